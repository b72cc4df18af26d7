package replicaproto

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// fakePeer is a replica server that answers the open as a real one would
// and then hands the connection to serve: the client's side of bad input
// from a peer.
func fakePeer(t testing.TB, serve func(conn net.Conn, r *bufio.Reader)) string {
	t.Helper()
	return fakePeerOpening(t, []byte(`{"size":1048576,"epoch":3,"term":1}`), serve)
}

// fakePeerOpening is fakePeer answering the open with reply.
func fakePeerOpening(t testing.TB, reply []byte, serve func(conn net.Conn, r *bufio.Reader)) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	t.Cleanup(func() { l.Close(); wg.Wait() })
	wg.Go(func() {
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
		if _, err := conn.Write(append(header{magic: replyMagic, kind: statusOK, id: h.id, length: uint32(len(reply))}.encode(), reply...)); err != nil {
			return
		}
		serve(conn, r)
	})
	return l.Addr().String()
}

// nextRequest reads one request and its body.
func nextRequest(r *bufio.Reader) (header, error) {
	h, err := readHeader(r, requestMagic)
	if err != nil {
		return h, err
	}
	n, err := requestBody(h)
	if err != nil {
		return h, err
	}
	_, err = io.ReadFull(r, make([]byte, n))
	return h, err
}

// closedByClient tells whether the client closed the connection: the
// peer's next read ends in EOF (or a reset), not in its deadline.
func closedByClient(conn net.Conn, r *bufio.Reader) bool {
	_ = conn.SetReadDeadline(time.Now().Add(3 * time.Second))
	for {
		if _, err := r.ReadByte(); err != nil {
			var ne net.Error
			return !(errors.As(err, &ne) && ne.Timeout())
		}
	}
}

// Each bad reply fails the request it answers (or the one waiting) with
// ErrProtocol, the client closes the connection without reading further
// (an oversized length is refused before its body is read, or
// allocated: the peer sends none), and every later request fails too.
func TestABadReplyClosesTheClientsConnection(t *testing.T) {
	reserved := header{magic: replyMagic, kind: statusOK}.encode()
	binary.BigEndian.PutUint16(reserved[5:], 1)
	cases := map[string]struct {
		op    byte
		reply func(id uint64) []byte
	}{
		"a bad magic": {OpSync, func(id uint64) []byte { return header{magic: 0xdeadbeef, kind: statusOK, id: id}.encode() }},
		"reserved bytes set": {OpSync, func(id uint64) []byte {
			binary.BigEndian.PutUint64(reserved[8:], id)
			return reserved
		}},
		"a read answered with more than it asked": {OpRead, func(id uint64) []byte {
			return header{magic: replyMagic, kind: statusOK, id: id, length: 4097}.encode()
		}},
		"a read answered with less than it asked": {OpRead, func(id uint64) []byte {
			return append(header{magic: replyMagic, kind: statusOK, id: id, length: 16}.encode(), make([]byte, 16)...)
		}},
		"a reply to no request": {OpSync, func(id uint64) []byte {
			return header{magic: replyMagic, kind: statusOK, id: id + 1000}.encode()
		}},
		"an error above its bound": {OpSync, func(id uint64) []byte {
			return header{magic: replyMagic, kind: statusError, id: id, length: maxErrorBody + 1}.encode()
		}},
		"a chain above the message limit": {OpChain, func(id uint64) []byte {
			return header{magic: replyMagic, kind: statusOK, id: id, length: 1 << 31}.encode()
		}},
		"a malformed chain": {OpChain, func(id uint64) []byte {
			return append(header{magic: replyMagic, kind: statusOK, id: id, length: 5}.encode(), []byte("[{,}]")...)
		}},
		"a write answered with a body": {OpWrite, func(id uint64) []byte {
			return header{magic: replyMagic, kind: statusOK, id: id, length: 1 << 20}.encode()
		}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			closed := make(chan bool, 1)
			addr := fakePeer(t, func(conn net.Conn, r *bufio.Reader) {
				h, err := nextRequest(r)
				if err != nil {
					closed <- false
					return
				}
				_, _ = conn.Write(tc.reply(h.id))
				closed <- closedByClient(conn, r)
			})
			c, err := Dial(context.Background(), addr, nil, open("engine-a", 1), 5*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			switch tc.op {
			case OpSync:
				err = c.Sync()
			case OpRead:
				_, err = c.ReadAt(make([]byte, 4096), 0)
			case OpWrite:
				_, err = c.WriteAt(make([]byte, 4096), 0)
			case OpChain:
				_, err = c.Chain()
			}
			if !errors.Is(err, ErrProtocol) {
				t.Fatalf("want ErrProtocol, got %v", err)
			}
			if !<-closed {
				t.Fatal("the client kept the connection open")
			}
			if err := c.Sync(); !errors.Is(err, ErrProtocol) {
				t.Fatalf("a request after: want the connection's ErrProtocol, got %v", err)
			}
		})
	}
}

// The client sends at most MaxInFlight requests, and MaxInFlightBytes of
// data, before replies come: the others wait unsent, and end with the
// connection.
func TestTheClientBoundsWhatItHasInFlight(t *testing.T) {
	for name, tc := range map[string]struct {
		writes, size, want int
	}{
		"requests": {writes: 3 * MaxInFlight, size: 4096, want: MaxInFlight},
		"bytes":    {writes: 40, size: MaxMessage, want: MaxInFlightBytes / MaxMessage},
	} {
		t.Run(name, func(t *testing.T) {
			var received atomic.Int64
			addr := fakePeer(t, func(conn net.Conn, r *bufio.Reader) {
				for {
					if _, err := nextRequest(r); err != nil {
						return
					}
					received.Add(1)
				}
			})
			c, err := Dial(context.Background(), addr, nil, open("engine-a", 1), time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			data := make([]byte, tc.size)
			var wg sync.WaitGroup
			var failed atomic.Int64
			for i := range tc.writes {
				wg.Go(func() {
					if _, err := c.WriteAt(data, int64(i)*4096); err != nil {
						failed.Add(1)
					}
				})
			}
			// Until the peer has received nothing more for half a second.
			for last, since, deadline := int64(-1), time.Now(), time.Now().Add(30*time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
				if got := received.Load(); got != last {
					last, since = got, time.Now()
				} else if got > 0 && time.Since(since) > 500*time.Millisecond {
					break
				}
			}
			if got := received.Load(); got != int64(tc.want) {
				t.Fatalf("the peer received %d requests before any reply, want %d", got, tc.want)
			}
			c.Close()
			wg.Wait()
			if failed.Load() != int64(tc.writes) {
				t.Fatalf("%d of %d writes failed; none was answered", failed.Load(), tc.writes)
			}
			if got := received.Load(); got != int64(tc.want) {
				t.Fatalf("the peer received %d requests in all, want %d: the waiting ones are not sent once the connection broke", got, tc.want)
			}
		})
	}
}

// FuzzClientReplies feeds the client whatever bytes a peer sends after a
// valid open while it reads, writes, syncs, lists the chain and sets the
// epoch: each request returns (an error or its answer) and the client
// never panics or hangs.
func FuzzClientReplies(f *testing.F) {
	ok := func(id uint64, body []byte) []byte {
		return append(header{magic: replyMagic, kind: statusOK, id: id, length: uint32(len(body))}.encode(), body...)
	}
	f.Add(ok(2, make([]byte, 4096)))
	f.Add(append(ok(2, make([]byte, 4096)), ok(3, nil)...))
	f.Add(ok(5, []byte(`[{"Name":"volume-head"}]`)))
	f.Add(header{magic: replyMagic, kind: statusFenced, id: 2, length: 3}.encode())
	f.Add(header{magic: replyMagic, kind: statusOK, id: 2, length: 1 << 31}.encode())
	f.Add([]byte("not a frame at all"))
	// The ops of version 2: a purge's names, malformed or too many.
	f.Add(append(ok(2, make([]byte, 4096)), ok(7, []byte(`["s1","s2"]`))...))
	f.Add(ok(7, []byte(`{"not":"a list"}`)))
	f.Add(header{magic: replyMagic, kind: statusNotFound, id: 8, length: 9}.encode())
	f.Fuzz(func(t *testing.T, replies []byte) {
		client, server := net.Pipe()
		defer server.Close()
		go func() {
			r := bufio.NewReader(server)
			h, err := readHeader(r, requestMagic)
			if err != nil {
				return
			}
			if _, err := io.ReadFull(r, make([]byte, h.length)); err != nil {
				return
			}
			go func() { _, _ = io.Copy(io.Discard, r) }()
			reply := []byte(`{"size":1048576,"epoch":0,"term":1,"version":2}`)
			_, _ = server.Write(append(header{magic: replyMagic, kind: statusOK, id: h.id, length: uint32(len(reply))}.encode(), reply...))
			_, _ = server.Write(replies)
			time.Sleep(20 * time.Millisecond)
			_ = server.Close()
		}()
		c, err := dialConn(context.Background(), client, "pipe", open("fuzz", 1), 200*time.Millisecond)
		if err != nil {
			return
		}
		defer c.Close()
		done := make(chan struct{})
		go func() {
			defer close(done)
			_, _ = c.ReadAt(make([]byte, 4096), 0)
			_, _ = c.WriteAt(make([]byte, 4096), 0)
			_ = c.Sync()
			_, _ = c.Chain()
			_ = c.SetEpoch(4)
			_ = c.MarkRemoved("s1")
			_, _ = c.Purge()
			_ = c.Revert("s2")
			_ = c.Grow(2 << 20)
			_ = c.TrimKeeping(0, 4096, []string{"s1"})
		}()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Fatal("the client's requests did not return")
		}
	})
}
