package panics_test

import (
	"errors"
	"strings"
	"testing"

	logtest "github.com/sirupsen/logrus/hooks/test"

	"github.com/cadence-storage/longhorn-manager/internal/panics"
)

func work(fail string) (err error) {
	logger, _ := logtest.NewNullLogger()
	defer panics.Recover(logger, &err)
	if fail == "error" {
		return errors.New("an error")
	}
	if fail == "panic" {
		var m map[string]int
		m["x"]++
	}
	return nil
}

func TestRecover(t *testing.T) {
	if err := work(""); err != nil {
		t.Errorf("no panic: got %v", err)
	}
	if err := work("error"); err == nil || err.Error() != "an error" {
		t.Errorf("an error and no panic: got %v", err)
	}
	if err := work("panic"); err == nil || !strings.Contains(err.Error(), "internal error: assignment to entry in nil map") {
		t.Errorf("a panic: got %v", err)
	}
}

func TestRecoverLogs(t *testing.T) {
	logger, hook := logtest.NewNullLogger()
	func() (err error) {
		defer panics.Recover(logger.WithField("volume", "v"), &err)
		panic("boom")
	}()
	e := hook.LastEntry()
	if e == nil || e.Data["volume"] != "v" || e.Data["panic"] != "boom" || !strings.Contains(e.Data["stack"].(string), "TestRecoverLogs") {
		t.Fatalf("logged %+v, want the fields, the panic and a stack through the panicking function", e)
	}
}
