package framework

import (
	"net"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/cadence-storage/longhorn-manager/engine/nbd"
)

// memDevice is a volume in memory whose writes can be made to fail.
type memDevice struct {
	mu   sync.Mutex
	data []byte
	fail bool
}

func (d *memDevice) ReadAt(p []byte, off int64) (int, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return copy(p, d.data[off:]), nil
}

func (d *memDevice) WriteAt(p []byte, off int64) (int, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.fail {
		return 0, syscall.EIO
	}
	return copy(d.data[off:], p), nil
}

func (d *memDevice) Size() int64 { return int64(len(d.data)) }
func (d *memDevice) Sync() error { return nil }

func (d *memDevice) setFail(fail bool) {
	d.mu.Lock()
	d.fail = fail
	d.mu.Unlock()
}

// serveDevice serves dev as export "vol" on addr (a free port when
// 127.0.0.1:0) and returns the server and its address.
func serveDevice(t *testing.T, dev nbd.Device, addr string) (*nbd.Server, string) {
	t.Helper()
	l, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	log := logrus.New()
	log.SetLevel(logrus.PanicLevel)
	s := nbd.NewServer("vol", dev, logrus.NewEntry(log))
	go s.Serve(l)
	t.Cleanup(func() { s.Close() })
	return s, l.Addr().String()
}

const testVolumeSize = 4 << 20

func newDevice() *memDevice { return &memDevice{data: make([]byte, testVolumeSize)} }

// waitFor waits until the writer's counts satisfy cond.
func waitFor(t *testing.T, w *NBDWriter, what string, cond func(NBDWriterCounts) bool) NBDWriterCounts {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		c := w.Counts()
		if cond(c) {
			return c
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: counts %+v", what, c)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// Every acknowledged block reads back; a block changed behind the
// writer's back is named.
func TestNBDWriterVerifiesEveryAcknowledgedBlock(t *testing.T) {
	dev := newDevice()
	_, addr := serveDevice(t, dev, "127.0.0.1:0")
	w := StartNBDWriter(t, "nbd://"+addr+"/vol", testVolumeSize, NBDWriterOptions{Seed: 1})
	waitFor(t, w, "2,000 writes acknowledged", func(c NBDWriterCounts) bool { return c.Acked >= 2000 })
	if c := w.Stop(); c.Errors != 0 {
		t.Fatalf("errors against a healthy server: %+v", c)
	}
	w.Verify(t)

	var victim int64 = -1
	for block, seq := range w.want {
		if seq != 0 {
			victim = int64(block) * NBDBlockSize
			break
		}
	}
	if _, err := dev.WriteAt(make([]byte, NBDBlockSize), victim); err != nil {
		t.Fatal(err)
	}
	_, bad, err := w.Check()
	if err != nil || len(bad) != 1 || bad[0].Offset != victim || bad[0].Holds != "zeros" {
		t.Fatalf("a zeroed block at %d: bad %v, err %v", victim, bad, err)
	}
}

// A write the server refuses is an error; the connection stays up and
// the writes go on. The refused write's block may still hold an earlier
// acknowledged write.
func TestNBDWriterCountsRefusedWrites(t *testing.T) {
	dev := newDevice()
	_, addr := serveDevice(t, dev, "127.0.0.1:0")
	w := StartNBDWriter(t, "nbd://"+addr+"/vol", testVolumeSize, NBDWriterOptions{Seed: 2})
	waitFor(t, w, "writes acknowledged", func(c NBDWriterCounts) bool { return c.Acked >= 500 })
	dev.setFail(true)
	failed := waitFor(t, w, "refused writes counted", func(c NBDWriterCounts) bool { return c.Errors >= 3 })
	dev.setFail(false)
	waitFor(t, w, "writes acknowledged again", func(c NBDWriterCounts) bool { return c.Acked > failed.Acked+100 })
	c := w.Stop()
	if c.Errors < 3 || c.FirstError == nil {
		t.Fatalf("counts %+v", c)
	}
	w.Verify(t)
}

// A dropped connection is one error, and the writer does not connect
// again unless asked to (then it goes on once the server is back).
func TestNBDWriterDoesNotReconnectByDefault(t *testing.T) {
	for _, reconnect := range []bool{false, true} {
		dev := newDevice()
		s, addr := serveDevice(t, dev, "127.0.0.1:0")
		w := StartNBDWriter(t, "nbd://"+addr+"/vol", testVolumeSize, NBDWriterOptions{Seed: 3, Interval: time.Millisecond, Reconnect: reconnect})
		waitFor(t, w, "writes acknowledged", func(c NBDWriterCounts) bool { return c.Acked >= 100 })
		s.Close()
		dropped := waitFor(t, w, "the drop counted", func(c NBDWriterCounts) bool { return c.Errors == 1 })
		serveDevice(t, dev, addr)
		if reconnect {
			waitFor(t, w, "writes after the reconnect", func(c NBDWriterCounts) bool { return c.Acked > dropped.Acked+100 })
		} else {
			time.Sleep(300 * time.Millisecond)
		}
		c := w.Stop()
		if c.Errors != 1 || (!reconnect && c.Acked != dropped.Acked) {
			t.Fatalf("reconnect %v: counts %+v, at the drop %+v", reconnect, c, dropped)
		}
		w.Verify(t)
	}
}
