package nbd

import (
	"net"
	"os/exec"
	"strings"
	"testing"

	"github.com/sirupsen/logrus"
	logtest "github.com/sirupsen/logrus/hooks/test"

	"github.com/cadence-storage/longhorn-manager/engine/replica"
)

// panicking is a device whose reads of its first block panic, as a bug
// in the engine's read path would.
type panicking struct{ *replica.Replica }

func (d panicking) ReadAt(p []byte, off int64) (int, error) {
	if off < 4096 {
		var s []byte
		_ = s[off]
	}
	return d.Replica.ReadAt(p, off)
}

// A panic while serving a request ends that connection, logged with the
// export and the stack; the server and its other connections go on.
func TestDevicePanicEndsOnlyItsConnection(t *testing.T) {
	r, _ := serve(t) // a replica to serve; its own server is not used
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	logger, hook := logtest.NewNullLogger()
	s := NewServer("vol", panicking{r}, logrus.NewEntry(logger))
	go s.Serve(l)
	t.Cleanup(func() { s.Close() })
	uri := "nbd://" + l.Addr().String() + "/vol"

	if out, err := exec.Command(tool(t, "qemu-io"), "-f", "raw", uri, "-c", "read 0 4k").CombinedOutput(); err == nil && !strings.Contains(string(out), "error") && !strings.Contains(string(out), "failed") {
		t.Fatalf("a read that panicked succeeded:\n%s", out)
	}
	run(t, "qemu-io", "-f", "raw", uri, "-c", "write -P 0x22 1M 4k", "-c", "read -P 0x22 1M 4k")

	var logged *logrus.Entry
	for _, e := range hook.AllEntries() {
		if e.Level == logrus.ErrorLevel && e.Data["stack"] != nil {
			logged = e
		}
	}
	if logged == nil || logged.Data["export"] != "vol" {
		t.Fatalf("no panic logged with the export: %v", hook.AllEntries())
	}
}
