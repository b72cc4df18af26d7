package volumeengine

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"io"
	"math/rand"
	"net"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/cadence-storage/longhorn-manager/engine/replica"
	"github.com/cadence-storage/longhorn-manager/engine/replicaproto"
)

// The volume UID the remote tests' replicas belong to.
const testVolumeUID = "uid-1"

// replicaServer is the replica server of a process that has replica
// open (another node's instance manager, as the design has it): a real
// replicaproto.Server on 127.0.0.1, on a random port.
type replicaServer struct {
	name string
	r    *replica.Replica
	addr string
	l    net.Listener
	s    *replicaproto.Server
	once sync.Once
}

// serveReplica serves replica r, named name, until the test ends or
// stop.
func serveReplica(tb testing.TB, name string, r *replica.Replica) *replicaServer {
	tb.Helper()
	log := logrus.New()
	log.SetLevel(logrus.PanicLevel)
	s := replicaproto.NewServer(func(req replicaproto.OpenRequest) (replicaproto.Replica, error) {
		if req.VolumeUID != testVolumeUID || req.Replica != name {
			return nil, fmt.Errorf("no replica %s of volume %s here", req.Replica, req.VolumeUID)
		}
		return r, nil
	}, logrus.NewEntry(log))
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	go s.Serve(l, nil)
	rs := &replicaServer{name: name, r: r, addr: l.Addr().String(), l: l, s: s}
	tb.Cleanup(rs.stop)
	return rs
}

// stop ends the server and every connection it has: the process that
// served the replica is gone.
func (rs *replicaServer) stop() {
	rs.once.Do(func() {
		rs.l.Close()
		rs.s.Close()
	})
}

// newReplica creates an empty replica of n bytes in a folder of the test.
func newReplica(tb testing.TB, n int64) *replica.Replica {
	tb.Helper()
	r, err := replica.Create(filepath.Join(tb.TempDir(), "r"), n)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { r.Close() })
	return r
}

// startEngine starts engine instance of the volume with term over the
// local replicas and the remote ones (name to address).
func startEngine(tb testing.TB, instance string, term uint64, local map[string]*replica.Replica, remote map[string]string, opts ...Option) (*Engine, error) {
	tb.Helper()
	log := logrus.New()
	log.SetLevel(logrus.PanicLevel)
	opts = append(opts, Term(testVolumeUID, instance, term))
	for name, addr := range remote {
		opts = append(opts, Remote(name, addr))
	}
	e, err := New("vol", local, clocktesting.NewFakeClock(time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)), logrus.NewEntry(log), opts...)
	if err == nil {
		tb.Cleanup(func() { e.Close() })
	}
	return e, err
}

// volumeModel is what a volume must read: every acknowledged write, in
// order.
type volumeModel struct {
	mu   sync.Mutex
	data []byte
}

func newModel(n int64) *volumeModel { return &volumeModel{data: make([]byte, n)} }

func (m *volumeModel) acked(p []byte, off int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	copy(m.data[off:], p)
}

func (m *volumeModel) snapshot() []byte {
	m.mu.Lock()
	defer m.mu.Unlock()
	return bytes.Clone(m.data)
}

// checksummedBlocks writes count random blocks of 4 KiB to 256 KiB at
// random block-aligned offsets of [from, to) through e, recording each
// acknowledged one in model; every write must be acknowledged.
func checksummedBlocks(t *testing.T, e *Engine, model *volumeModel, seed int64, count int, from, to int64) {
	t.Helper()
	rnd := rand.New(rand.NewSource(seed))
	for range count {
		n := int64(1+rnd.Intn(64)) * replica.BlockSize
		off := from + rnd.Int63n((to-from-n)/replica.BlockSize+1)*replica.BlockSize
		p := make([]byte, n)
		rnd.Read(p)
		if _, err := e.WriteAt(p, off); err != nil {
			t.Errorf("write of %d bytes at %d: %v", n, off, err)
			return
		}
		model.acked(p, off)
	}
}

// readsAs checks that r reads want, saying which blocks differ by their
// checksums.
func readsAs(t *testing.T, what string, r io.ReaderAt, want []byte) {
	t.Helper()
	got := make([]byte, len(want))
	if _, err := r.ReadAt(got, 0); err != nil {
		t.Fatalf("%s: read: %v", what, err)
	}
	if bytes.Equal(got, want) {
		return
	}
	bad := 0
	first := -1
	for b := 0; b < len(want); b += replica.BlockSize {
		if sha256.Sum256(got[b:b+replica.BlockSize]) != sha256.Sum256(want[b:b+replica.BlockSize]) {
			bad++
			if first < 0 {
				first = b
			}
		}
	}
	t.Fatalf("%s: %d blocks differ from what was acknowledged, the first at %d", what, bad, first)
}

// proxy stands between an engine and a replica server, as a network
// would: it can stall (frozen: nothing passes either way) or put a frame
// of its own into what the engine reads.
type proxy struct {
	addr   string
	l      net.Listener
	target string
	frozen atomic.Bool

	mu      sync.Mutex
	clients []net.Conn
	toEng   sync.Mutex // one writer at a time to the engine's side
}

func newProxy(tb testing.TB, target string) *proxy {
	tb.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	p := &proxy{addr: l.Addr().String(), l: l, target: target}
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			s, err := net.Dial("tcp", target)
			if err != nil {
				c.Close()
				continue
			}
			p.mu.Lock()
			p.clients = append(p.clients, c)
			p.mu.Unlock()
			go p.pipe(s, c, true)
			go p.pipe(c, s, false)
		}
	}()
	tb.Cleanup(func() {
		l.Close()
		p.mu.Lock()
		defer p.mu.Unlock()
		for _, c := range p.clients {
			c.Close()
		}
	})
	return p
}

// pipe copies src to dst, holding what it read while the proxy is
// frozen; toEngine marks the direction replies take.
func (p *proxy) pipe(dst, src net.Conn, toEngine bool) {
	defer dst.Close()
	defer src.Close()
	buf := make([]byte, 64<<10)
	for {
		n, err := src.Read(buf)
		for p.frozen.Load() {
			time.Sleep(5 * time.Millisecond)
		}
		if n > 0 {
			if toEngine {
				p.toEng.Lock()
			}
			_, werr := dst.Write(buf[:n])
			if toEngine {
				p.toEng.Unlock()
			}
			if werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// inject writes frame to the engine's side of every connection, between
// two replies when no request is waiting.
func (p *proxy) inject(frame []byte) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.toEng.Lock()
	defer p.toEng.Unlock()
	for _, c := range p.clients {
		_, _ = c.Write(frame)
	}
}

// replyHeader is a reply's header as the replica protocol frames it
// (replicaproto/protocol.go), with magic given, for frames a server would
// never send.
func replyHeader(magic uint32, id uint64, length uint32) []byte {
	b := make([]byte, 28)
	b[0], b[1], b[2], b[3] = byte(magic>>24), byte(magic>>16), byte(magic>>8), byte(magic)
	for i := range 8 {
		b[8+i] = byte(id >> (56 - 8*i))
	}
	b[24], b[25], b[26], b[27] = byte(length>>24), byte(length>>16), byte(length>>8), byte(length)
	return b
}
