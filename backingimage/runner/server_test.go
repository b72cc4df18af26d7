package runner

import (
	"errors"
	"strings"
	"testing"

	"github.com/sirupsen/logrus"
)

func testRunner(script string) *ProcessRunner {
	// The "server" is a shell that logs an address and waits; args are
	// ignored by sh -c beyond $0.
	return NewProcessRunner(logrus.NewEntry(logrus.New()), []string{"sh", "-c", script, "server"}, nil)
}

func TestProcessRunnerStartsOnceAndStops(t *testing.T) {
	r := testRunner(`echo 'level=info msg="Serving" address=127.0.0.1:4567' >&2; exec sleep 60`)
	defer r.StopAll()
	if err := r.Start("k", []string{"x"}); err != nil {
		t.Fatal(err)
	}
	first := r.procs["k"].cmd.Process.Pid
	if err := r.Start("k", []string{"x"}); err != nil {
		t.Fatal(err)
	}
	if pid := r.procs["k"].cmd.Process.Pid; pid != first {
		t.Fatalf("a second Start started another process (%d, first %d)", pid, first)
	}
	if addr, err := r.Address("k"); err != nil || addr != "127.0.0.1:4567" {
		t.Fatalf("address %q, %v", addr, err)
	}
	r.Stop("k")
	if _, err := r.Address("k"); !errors.Is(err, ErrServerNotStarted) {
		t.Fatalf("after Stop: %v, want ErrServerNotStarted", err)
	}
}

func TestProcessRunnerReportsAnExitWithItsLastLogLines(t *testing.T) {
	r := testRunner(`echo 'address=127.0.0.1:4567' >&2; echo 'disk is gone' >&2; exit 3`)
	defer r.StopAll()
	_ = r.Start("k", nil)
	<-r.procs["k"].done
	_, err := r.Address("k")
	if err == nil || errors.Is(err, ErrServerNotStarted) || !strings.Contains(err.Error(), "disk is gone") {
		t.Fatalf("Address after exit: %v, want the exit with the last log lines", err)
	}
}

func TestProcessRunnerFailsAServerThatExitsBeforeListening(t *testing.T) {
	r := testRunner(`echo 'no such flag' >&2; exit 1`)
	defer r.StopAll()
	err := r.Start("k", nil)
	if err == nil || !strings.Contains(err.Error(), "no such flag") {
		t.Fatalf("Start: %v, want the reason", err)
	}
}
