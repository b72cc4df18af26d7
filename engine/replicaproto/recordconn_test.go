package replicaproto

import (
	"bytes"
	"context"
	"crypto/rand"
	"sync"
	"testing"
	"time"
)

// Over mutual TLS a message's records go in batches and are read through
// a buffer: large writes and reads from many goroutines at once, each
// message whole and in its place, read back through the protocol and from
// the replica.
func TestLargeMessagesOverMutualTLS(t *testing.T) {
	r, addr, _, clientTLS := serveReplicaSized(t, volSize, true)
	c, err := Dial(context.Background(), addr, clientTLS, open("engine-a", 1), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if c.rc == nil {
		t.Fatal("the client's TLS connection is not over a recordConn")
	}
	want := make([]byte, volSize)
	_, _ = rand.Read(want)
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for i := range 8 {
		off := i * (volSize / 8)
		wg.Go(func() {
			if _, err := c.WriteAt(want[off:off+volSize/8], int64(off)); err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	got := make([]byte, volSize)
	for i := range 8 {
		off := i * (volSize / 8)
		wg.Go(func() {
			if _, err := c.ReadAt(got[off:off+volSize/8], int64(off)); err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatal("what was read over TLS is not what was written")
	}
	local := make([]byte, volSize)
	if _, err := r.ReadAt(local, 0); err != nil || !bytes.Equal(local, want) {
		t.Fatalf("the replica does not hold what was written over TLS: %v", err)
	}
}
