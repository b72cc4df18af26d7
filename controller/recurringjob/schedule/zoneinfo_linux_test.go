package schedule

import (
	"errors"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
)

// zoneSources are where Go's time package looks for zoneinfo on Linux
// (time/zoneinfo_unix.go), before the database embedded by time/tzdata
// and then $GOROOT/lib/time/zoneinfo.zip.
var zoneSources = []string{"/usr/share/zoneinfo", "/usr/share/lib/zoneinfo", "/usr/lib/locale/TZ", "/etc/zoneinfo"}

const hiddenZoneinfoEnv = "SCHEDULE_TEST_ZONEINFO_HIDDEN"

// Time zones work on a machine without zoneinfo (a runtime image without
// tzdata): the package embeds the database. The test runs itself again in
// a user and mount namespace where every zoneinfo directory is an empty
// tmpfs, with ZONEINFO and GOROOT pointing at an empty directory and TZ
// unset; there, only the embedded database can answer, and the ticks are
// checked against their definition on it.
func TestZonesWithoutSystemZoneinfo(t *testing.T) {
	if os.Getenv(hiddenZoneinfoEnv) == "1" {
		hideZoneinfo(t)
		checkZones(t)
		checkTicksMatchTheirDefinition(t)
		return
	}
	empty := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestZonesWithoutSystemZoneinfo$", "-test.v")
	cmd.Env = []string{hiddenZoneinfoEnv + "=1", "ZONEINFO=" + empty, "GOROOT=" + empty, "PATH=" + os.Getenv("PATH")}
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Cloneflags:  syscall.CLONE_NEWUSER | syscall.CLONE_NEWNS,
		UidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getuid(), Size: 1}},
		GidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getgid(), Size: 1}},
	}
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		// No user namespaces here (a seccomp profile, a sysctl): the
		// directories cannot be hidden. Where there are none to hide,
		// the plain environment is the test.
		for _, dir := range zoneSources {
			if _, serr := os.Stat(dir); serr == nil {
				t.Skipf("cannot hide %s (%v) on this machine", dir, err)
			}
		}
		cmd.SysProcAttr = nil
		out, err = cmd.CombinedOutput()
	}
	if err == nil && strings.Contains(string(out), "--- SKIP: TestZonesWithoutSystemZoneinfo") {
		t.Skipf("the zoneinfo cannot be hidden here:\n%s", out)
	}
	if err != nil || !strings.Contains(string(out), "--- PASS: TestZonesWithoutSystemZoneinfo") {
		t.Fatalf("with the system's zoneinfo hidden: %v\n%s", err, out)
	}
}

// hideZoneinfo mounts an empty tmpfs on every zoneinfo directory, in the
// child's own mount namespace (private, so nothing reaches the host).
func hideZoneinfo(t *testing.T) {
	if err := syscall.Mount("", "/", "", syscall.MS_REC|syscall.MS_PRIVATE, ""); err != nil && !errors.Is(err, syscall.EPERM) {
		t.Fatalf("make the mounts private: %v", err)
	}
	for _, dir := range zoneSources {
		if _, err := os.Stat(dir); err != nil {
			continue
		}
		if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size=64k"); err != nil {
			// A user namespace without the right to mount (AppArmor's
			// restriction of unprivileged user namespaces, say).
			t.Skipf("cannot hide %s: %v", dir, err)
		}
	}
	for _, dir := range zoneSources {
		if _, err := os.Stat(dir + "/Europe/Paris"); err == nil {
			t.Fatalf("%s/Europe/Paris is still there", dir)
		}
	}
	if _, err := os.Stat(os.Getenv("GOROOT") + "/lib/time/zoneinfo.zip"); err == nil {
		t.Fatal("GOROOT still has zoneinfo.zip")
	}
	if tz, ok := os.LookupEnv("TZ"); ok {
		t.Fatalf("TZ=%q is set", tz)
	}
}

func checkZones(t *testing.T) {
	if _, err := LoadLocation("Australia/Lord_Howe"); err != nil {
		t.Fatal(err)
	}
	s, err := Parse("0 2 * * *", "Europe/Paris")
	if err != nil {
		t.Fatal(err)
	}
	// 02:00 in Paris is 01:00 UTC in winter, 00:00 in summer.
	if got, want := s.Next(utc("2026-11-22T00:00:00Z")), utc("2026-11-22T01:00:00Z"); !got.Equal(want) {
		t.Fatalf("winter: %s, want %s", got.UTC(), want)
	}
	if got, want := s.Next(utc("2026-07-01T12:00:00Z")), utc("2026-07-02T00:00:00Z"); !got.Equal(want) {
		t.Fatalf("summer: %s, want %s", got.UTC(), want)
	}
	if _, err := LoadLocation("Mars/Olympus"); err == nil {
		t.Fatal("an unknown zone loads")
	}
}
