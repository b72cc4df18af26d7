package replicaproto

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"crypto/tls"
	"io"
	"sync"
	"testing"
	"time"

	"github.com/cadence-storage/longhorn-manager/mtls/mtlstest"
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

// A TLS peer that opens the replica and then reads nothing more: the
// client's requests, their records held up in its batches, fail at their
// deadline, and the connection closes at once, not after the TLS layer's
// wait to send its close_notify.
func TestAStuckPeerOverTLSFailsAtTheDeadline(t *testing.T) {
	id := mtlstest.Identity(t)
	l, err := tls.Listen("tcp", "127.0.0.1:0", id.ServerConfig())
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		conn, err := l.Accept()
		if err != nil {
			return
		}
		defer conn.Close()
		r := bufio.NewReader(conn)
		h, err := readHeader(r, requestMagic)
		if err != nil {
			return
		}
		if _, err := io.ReadFull(r, make([]byte, h.length)); err != nil {
			return
		}
		reply := []byte(`{"size":1073741824,"epoch":0,"term":1}`)
		_, _ = conn.Write(append(header{magic: replyMagic, kind: statusOK, id: h.id, length: uint32(len(reply))}.encode(), reply...))
		<-stop
	}()
	const timeout = 300 * time.Millisecond
	c, err := Dial(context.Background(), l.Addr().String(), id.ClientConfig(), open("engine-a", 1), timeout)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	var wg sync.WaitGroup
	data := make([]byte, 200<<10)
	for i := range 64 {
		wg.Go(func() { _, _ = c.WriteAt(data, int64(i)*int64(len(data))) })
	}
	wg.Wait()
	failed := time.Since(start)
	_ = c.Close()
	if took := time.Since(start); failed > 3*time.Second || took > 3*time.Second {
		t.Fatalf("the requests failed after %s and the connection closed after %s: want both soon after the %s deadline", failed, took, timeout)
	}
}
