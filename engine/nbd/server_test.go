package nbd

import (
	"bytes"
	"crypto/sha256"
	"math/rand"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/sirupsen/logrus"

	"github.com/cadence-storage/longhorn-manager/engine/replica"
)

const size = 16 << 20

// serve exports a fresh replica and returns its NBD URI.
func serve(t *testing.T) (*replica.Replica, string) {
	t.Helper()
	r, addr := serveWith(t, func(*Server) {})
	return r, "nbd://" + addr + "/vol"
}

// serveWith exports a fresh replica as "vol" on a server set changes
// (its bounds) before it serves, and returns the replica and address.
func serveWith(t *testing.T, set func(*Server)) (*replica.Replica, string) {
	t.Helper()
	return serveSized(t, size, set)
}

// serveSized is serveWith for a replica of n bytes.
func serveSized(t *testing.T, n int64, set func(*Server)) (*replica.Replica, string) {
	t.Helper()
	r, err := replica.Create(filepath.Join(t.TempDir(), "r"), n)
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	log := logrus.New()
	log.SetLevel(logrus.PanicLevel)
	s := NewServer("vol", r, logrus.NewEntry(log))
	set(s)
	go s.Serve(l)
	t.Cleanup(func() { s.Close(); r.Close() })
	return r, l.Addr().String()
}

// tool returns the path of a Debian client tool; scripts/test.sh installs
// them (qemu-utils, libnbd-bin).
func tool(t *testing.T, name string) string {
	t.Helper()
	path, err := exec.LookPath(name)
	if err != nil && testing.Short() {
		t.Skipf("%s is not installed: not needed in the fast tier (-short)", name)
	}
	if err != nil {
		t.Fatalf("%s is not installed: run `make test` (scripts/test.sh installs qemu-utils and libnbd-bin)", name)
	}
	return path
}

func run(t *testing.T, name string, args ...string) string {
	t.Helper()
	out, err := exec.Command(tool(t, name), args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %v: %v\n%s", name, args, err, out)
	}
	return string(out)
}

func TestNbdinfoSeesTheExport(t *testing.T) {
	_, uri := serve(t)
	out := run(t, "nbdinfo", "--size", uri)
	if strings.TrimSpace(out) != strconv.Itoa(size) {
		t.Fatalf("nbdinfo size %q, want %d", out, size)
	}
	list := run(t, "nbdinfo", "--list", strings.TrimSuffix(uri, "/vol"))
	if !strings.Contains(list, "vol") {
		t.Fatalf("nbdinfo --list: %s", list)
	}
}

func TestQemuIOWritesAndReads(t *testing.T) {
	r, uri := serve(t)
	out := run(t, "qemu-io", "-f", "raw", uri,
		"-c", "write -P 0xab 0 1M",
		"-c", "write -P 0xcd 1536k 100k",
		"-c", "flush",
		"-c", "read -P 0xab 0 1M",
		"-c", "read -P 0xcd 1536k 100k",
		"-c", "read -P 0 4M 1M")
	if strings.Contains(out, "fail") || strings.Contains(out, "Pattern verification failed") {
		t.Fatalf("qemu-io:\n%s", out)
	}
	got := make([]byte, 1<<20)
	if _, err := r.ReadAt(got, 0); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, bytes.Repeat([]byte{0xab}, 1<<20)) {
		t.Fatal("the replica does not hold what qemu-io wrote")
	}
}

func TestNbdcopyRoundTrip(t *testing.T) {
	_, uri := serve(t)
	dir := t.TempDir()
	in := filepath.Join(dir, "in.img")
	data := make([]byte, size)
	rand.New(rand.NewSource(7)).Read(data[:size/2])
	if err := os.WriteFile(in, data, 0o644); err != nil {
		t.Fatal(err)
	}
	run(t, "nbdcopy", in, uri)
	out := filepath.Join(dir, "out.img")
	run(t, "nbdcopy", uri, out)
	back, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if sha256.Sum256(back) != sha256.Sum256(data) {
		t.Fatal("what nbdcopy read back differs from what it wrote")
	}
}

func TestOutOfRangeRequestsFailCleanly(t *testing.T) {
	_, uri := serve(t)
	out, err := exec.Command(tool(t, "qemu-io"), "-f", "raw", uri, "-c", "read 16M 4k").CombinedOutput()
	if err == nil && !strings.Contains(string(out), "error") && !strings.Contains(string(out), "failed") {
		t.Fatalf("a read past the end succeeded:\n%s", out)
	}
	// The server still serves after refusing a request.
	run(t, "qemu-io", "-f", "raw", uri, "-c", "write -P 0x11 0 4k", "-c", "read -P 0x11 0 4k")
}
