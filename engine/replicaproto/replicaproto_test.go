package replicaproto

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/cadence-storage/longhorn-manager/engine/replica"
	"github.com/cadence-storage/longhorn-manager/mtls/mtlstest"
)

const volSize = 32 << 20

// serveReplica serves one fresh replica, named r1 of volume uid-1, and
// returns it and the server's address.
func serveReplica(t *testing.T, withTLS bool) (*replica.Replica, string, *Server) {
	t.Helper()
	r, addr, s, _ := serveReplicaSized(t, volSize, withTLS)
	return r, addr, s
}

// serveReplicaSized is serveReplica for a replica of size bytes; with
// TLS it returns a client's configuration of the server's CA too.
func serveReplicaSized(tb testing.TB, size int64, withTLS bool) (*replica.Replica, string, *Server, *tls.Config) {
	tb.Helper()
	r, err := replica.Create(filepath.Join(tb.TempDir(), "r1"), size)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { r.Close() })
	log := logrus.New()
	log.SetLevel(logrus.PanicLevel)
	s := NewServer(func(req OpenRequest) (Replica, error) {
		if req.VolumeUID != "uid-1" || req.Replica != "r1" {
			return nil, fmt.Errorf("no replica %s of volume %s here", req.Replica, req.VolumeUID)
		}
		return r, nil
	}, logrus.NewEntry(log))
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	var client *tls.Config
	if withTLS {
		id := mtlstest.Identity(tb)
		go s.Serve(l, id.ServerConfig())
		client = id.ClientConfig()
	} else {
		go s.Serve(l, nil)
	}
	tb.Cleanup(func() { l.Close(); s.Close() })
	return r, l.Addr().String(), s, client
}

func open(engine string, term uint64) OpenRequest {
	return OpenRequest{VolumeUID: "uid-1", Replica: "r1", Engine: engine, Term: term}
}

func dial(t *testing.T, addr string, req OpenRequest) *Client {
	t.Helper()
	c, err := Dial(context.Background(), addr, nil, req, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func TestPipelinedWritesAndReadsRoundTrip(t *testing.T) {
	r, addr, _ := serveReplica(t, false)
	c := dial(t, addr, open("engine-a", 1))
	if got := c.Opened(); got.Size != volSize || got.Term != 1 {
		t.Fatalf("opened as %+v", got)
	}
	// 64 writers at once, one 256 KiB block each, and one 9 MiB write
	// split into messages: every byte reads back, through the protocol
	// and from the replica itself.
	want := make([]byte, volSize)
	var wg sync.WaitGroup
	errs := make(chan error, 65)
	for i := range 64 {
		off := i * (256 << 10)
		_, _ = rand.Read(want[off : off+256<<10])
		wg.Go(func() {
			if _, err := c.WriteAt(want[off:off+256<<10], int64(off)); err != nil {
				errs <- err
			}
		})
	}
	big := want[16<<20 : 25<<20]
	_, _ = rand.Read(big)
	wg.Go(func() {
		if _, err := c.WriteAt(big, 16<<20); err != nil {
			errs <- err
		}
	})
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if err := c.Sync(); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, volSize)
	if _, err := c.ReadAt(got, 0); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatal("what was read over the protocol is not what was written")
	}
	local := make([]byte, volSize)
	if _, err := r.ReadAt(local, 0); err != nil || !bytes.Equal(local, want) {
		t.Fatalf("the replica does not hold what was written: %v", err)
	}
}

func TestANewerEngineFencesTheOlderOne(t *testing.T) {
	_, addr, _ := serveReplica(t, false)
	old := dial(t, addr, open("engine-a", 1))
	if _, err := old.WriteAt([]byte("old engine's data"), 0); err != nil {
		t.Fatal(err)
	}
	newer := dial(t, addr, open("engine-b", 2))
	if _, err := old.WriteAt([]byte("a stale write!!!!"), 0); !errors.Is(err, replica.ErrFenced) {
		t.Fatalf("the old engine's write after a newer opened the replica: want ErrFenced, got %v", err)
	}
	if err := old.Sync(); !errors.Is(err, replica.ErrFenced) {
		t.Fatalf("the old engine's sync: want ErrFenced, got %v", err)
	}
	if err := old.Trim(0, 4096); !errors.Is(err, replica.ErrFenced) {
		t.Fatalf("the old engine's trim: want ErrFenced, got %v", err)
	}
	got := make([]byte, 17)
	if _, err := newer.ReadAt(got, 0); err != nil || string(got) != "old engine's data" {
		t.Fatalf("the newer engine reads %q, %v: the fenced write must not have landed", got, err)
	}
	// An open of a lower term, or of the same term by another engine, is
	// refused; the holder's reconnect is not.
	if _, err := Dial(context.Background(), addr, nil, open("engine-c", 1), time.Second); !errors.Is(err, replica.ErrFenced) {
		t.Fatalf("an open of a lower term: want ErrFenced, got %v", err)
	}
	if _, err := Dial(context.Background(), addr, nil, open("engine-c", 2), time.Second); !errors.Is(err, replica.ErrFenced) {
		t.Fatalf("an open of the same term by another engine: want ErrFenced, got %v", err)
	}
	again := dial(t, addr, open("engine-b", 2))
	if _, err := again.WriteAt([]byte("x"), 0); err != nil {
		t.Fatalf("the holder's second connection: %v", err)
	}
}

func TestOpensOfAnotherVolumeOrMalformedAreRefused(t *testing.T) {
	_, addr, _ := serveReplica(t, false)
	req := open("engine-a", 1)
	req.VolumeUID = "uid-of-a-volume-made-again"
	if _, err := Dial(context.Background(), addr, nil, req, time.Second); err == nil {
		t.Fatal("a replica of another volume's UID was opened")
	}
	if _, err := Dial(context.Background(), addr, nil, open("engine-a", 0), time.Second); err == nil {
		t.Fatal("an open of term 0 was accepted")
	}
}

// rawConn opens the replica by hand and returns the connection, for
// frames a client would never send.
func rawConn(t *testing.T, addr string) net.Conn {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	body := []byte(`{"volumeUID":"uid-1","replica":"r1","engine":"raw","term":5}`)
	if _, err := conn.Write(append(header{magic: requestMagic, kind: OpOpen, id: 1, length: uint32(len(body))}.encode(), body...)); err != nil {
		t.Fatal(err)
	}
	h, err := readHeader(conn, replyMagic)
	if err != nil || h.kind != statusOK {
		t.Fatalf("raw open: %+v %v", h, err)
	}
	reply := make([]byte, h.length)
	if _, err := conn.Read(reply); err != nil {
		t.Fatal(err)
	}
	return conn
}

func closedSoon(conn net.Conn) bool {
	_ = conn.SetReadDeadline(time.Now().Add(3 * time.Second))
	buf := make([]byte, 64)
	for {
		_, err := conn.Read(buf)
		if err != nil {
			var ne net.Error
			return !(errors.As(err, &ne) && ne.Timeout())
		}
	}
}

func TestMalformedFramesCloseTheConnectionBeforeAnythingIsAllocated(t *testing.T) {
	_, addr, _ := serveReplica(t, false)
	cases := map[string][]byte{
		"a write above the message limit": header{magic: requestMagic, kind: OpWrite, id: 2, length: MaxMessage + 1}.encode(),
		"a read above the message limit":  header{magic: requestMagic, kind: OpRead, id: 2, length: 1 << 31}.encode(),
		"an unknown op":                   header{magic: requestMagic, kind: 99, id: 2}.encode(),
		"a bad magic":                     header{magic: 0xdeadbeef, kind: OpRead, id: 2, length: 4096}.encode(),
		"a second open":                   header{magic: requestMagic, kind: OpOpen, id: 2, length: 10}.encode(),
		"a snapshot above its bound":      header{magic: requestMagic, kind: OpSnapshot, id: 2, length: maxSnapshotBody + 1}.encode(),
	}
	reserved := header{magic: requestMagic, kind: OpSync, id: 2}.encode()
	binary.BigEndian.PutUint16(reserved[5:], 7)
	cases["reserved bytes set"] = reserved
	for name, frame := range cases {
		t.Run(name, func(t *testing.T) {
			conn := rawConn(t, addr)
			if _, err := conn.Write(frame); err != nil {
				t.Fatal(err)
			}
			if !closedSoon(conn) {
				t.Fatal("the server kept the connection open")
			}
		})
	}
}

func TestARequestPastItsDeadlineBreaksTheConnection(t *testing.T) {
	// A server that opens and then never answers.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		conn, err := l.Accept()
		if err != nil {
			return
		}
		defer conn.Close()
		h, _ := readHeader(conn, requestMagic)
		body := make([]byte, h.length)
		_, _ = conn.Read(body)
		reply := []byte(`{"size":4096,"epoch":0,"term":1}`)
		_, _ = conn.Write(append(header{magic: replyMagic, kind: statusOK, id: h.id, length: uint32(len(reply))}.encode(), reply...))
		time.Sleep(10 * time.Second)
	}()
	c, err := Dial(context.Background(), l.Addr().String(), nil, open("engine-a", 1), 300*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.WriteAt([]byte("x"), 0); !errors.Is(err, ErrTimeout) {
		t.Fatalf("want ErrTimeout, got %v", err)
	}
	if _, err := c.ReadAt(make([]byte, 1), 0); !errors.Is(err, ErrTimeout) {
		t.Fatalf("a request after the timeout: want the connection's ErrTimeout, got %v", err)
	}
}

func TestOverMutualTLS(t *testing.T) {
	_, addr, _ := serveReplica(t, true)
	c, err := Dial(context.Background(), addr, mtlstest.Identity(t).ClientConfig(), open("engine-a", 1), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.WriteAt([]byte("over TLS"), 4096); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, 8)
	if _, err := c.ReadAt(got, 4096); err != nil || string(got) != "over TLS" {
		t.Fatalf("read %q, %v", got, err)
	}
	if _, err := Dial(context.Background(), addr, mtlstest.Stranger(t).ClientConfig(), open("engine-b", 2), time.Second); err == nil {
		t.Fatal("a peer with a certificate of another CA was served")
	}
}

// A snapshot, an epoch and a chain's listing come after every request
// sent before them on the connection: frames written back to back, the
// snapshot holds every write before it, and the chain lists it.
func TestSnapshotsEpochsAndChainsAreOrderedWithTheWritesBeforeThem(t *testing.T) {
	r, addr, _ := serveReplica(t, false)
	conn := rawConn(t, addr)
	var frames []byte
	want := make([]byte, 64<<10)
	_, _ = rand.Read(want)
	for i := range 16 {
		block := want[i*4096 : (i+1)*4096]
		frames = append(frames, header{magic: requestMagic, kind: OpWrite, id: uint64(10 + i), offset: uint64(i * 4096), length: 4096}.encode()...)
		frames = append(frames, block...)
	}
	snap, _ := json.Marshal(SnapshotRequest{Name: "s1", ID: "id-1", UserCreated: true, Created: time.Date(2026, 12, 2, 9, 0, 0, 0, time.UTC), Labels: map[string]string{"k": "v"}})
	frames = append(frames, header{magic: requestMagic, kind: OpSnapshot, id: 30, length: uint32(len(snap))}.encode()...)
	frames = append(frames, snap...)
	frames = append(frames, header{magic: requestMagic, kind: OpSetEpoch, id: 31, offset: 7}.encode()...)
	frames = append(frames, header{magic: requestMagic, kind: OpChain, id: 32}.encode()...)
	if _, err := conn.Write(frames); err != nil {
		t.Fatal(err)
	}
	var chain []replica.Snapshot
	for range 19 {
		h, err := readHeader(conn, replyMagic)
		if err != nil {
			t.Fatal(err)
		}
		body := make([]byte, h.length)
		if _, err := io.ReadFull(conn, body); err != nil {
			t.Fatal(err)
		}
		if h.kind != statusOK {
			t.Fatalf("request %d: status %d, %s", h.id, h.kind, body)
		}
		if h.id == 32 {
			if err := json.Unmarshal(body, &chain); err != nil {
				t.Fatal(err)
			}
		}
	}
	if len(chain) != 2 || chain[0].Name != "s1" || chain[0].ID != "id-1" || chain[0].Labels["k"] != "v" || chain[0].Size != int64(len(want)) || chain[1].Name != replica.HeadName {
		t.Fatalf("chain %+v", chain)
	}
	if r.Epoch() != 7 {
		t.Fatalf("epoch %d, want 7", r.Epoch())
	}
	v, err := r.OpenSnapshot("s1")
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	got := make([]byte, len(want))
	if _, err := v.ReadAt(got, 0); err != nil || !bytes.Equal(got, want) {
		t.Fatalf("the snapshot does not hold every write sent before it (%v)", err)
	}
}

func TestTheClientsSnapshotEpochAndChainAreFencedToo(t *testing.T) {
	r, addr, _ := serveReplica(t, false)
	old := dial(t, addr, open("engine-a", 1))
	if err := old.Snapshot(SnapshotRequest{Name: "s1", ID: "id-1", Created: time.Now()}); err != nil {
		t.Fatal(err)
	}
	if err := old.SetEpoch(2); err != nil {
		t.Fatal(err)
	}
	if chain, err := old.Chain(); err != nil || len(chain) != 2 {
		t.Fatalf("chain %+v, %v", chain, err)
	}
	if err := old.Snapshot(SnapshotRequest{Name: "s1", ID: "id-x", Created: time.Now()}); err == nil || errors.Is(err, ErrProtocol) {
		t.Fatalf("a snapshot of a name taken: want the replica's refusal, got %v", err)
	}
	if err := old.Snapshot(SnapshotRequest{Name: "s2"}); err == nil {
		t.Fatal("a snapshot without an ID was taken")
	}
	dial(t, addr, open("engine-b", 2))
	if err := old.Snapshot(SnapshotRequest{Name: "s3", ID: "id-3", Created: time.Now()}); !errors.Is(err, replica.ErrFenced) {
		t.Fatalf("the old engine's snapshot: want ErrFenced, got %v", err)
	}
	if err := old.SetEpoch(9); !errors.Is(err, replica.ErrFenced) {
		t.Fatalf("the old engine's epoch: want ErrFenced, got %v", err)
	}
	if _, err := old.Chain(); !errors.Is(err, replica.ErrFenced) {
		t.Fatalf("the old engine's chain: want ErrFenced, got %v", err)
	}
	if r.Epoch() != 2 || r.HasSnapshot("s3") {
		t.Fatalf("the fenced requests changed the replica: epoch %d, s3 %v", r.Epoch(), r.HasSnapshot("s3"))
	}
}
