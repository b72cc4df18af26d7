package replicaproto

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sirupsen/logrus"
	"golang.org/x/sync/semaphore"

	"github.com/cadence-storage/longhorn-manager/engine/replica"
)

// Replica is what the server needs of an open replica
// (*replica.Replica): a connection's engine accepted as its owner, then
// the replica as that owner uses it, every request checked against its
// term in one step with the request (replica.Owned).
type Replica interface {
	AcceptTerm(term uint64, holder string) error
	AtTerm(term uint64, holder string) *replica.Owned
}

var _ Replica = (*replica.Replica)(nil)

// Lookup finds the replica an open asks for, among those the server's
// process has open; an error refuses the open, saying why.
type Lookup func(req OpenRequest) (Replica, error)

// openTimeout bounds how long a new connection may take to open its
// replica.
const openTimeout = 10 * time.Second

// Server serves replicas over the replica protocol.
type Server struct {
	lookup Lookup
	log    *logrus.Entry
	// speaks is the protocol version served, ProtocolVersion unless a
	// test serves as an older server does (0).
	speaks atomic.Int32
	// growLimit bounds an OpGrow: MaxGrowSize unless a test lowers it
	// (0), as the fuzz test does to keep each grow's map small.
	growLimit uint64

	mu     sync.Mutex
	conns  map[net.Conn]struct{}
	closed bool
}

// NewServer serves the replicas lookup finds.
func NewServer(lookup Lookup, log *logrus.Entry) *Server {
	return &Server{lookup: lookup, log: log, conns: map[net.Conn]struct{}{}}
}

// Serve accepts connections on l until it is closed; with tlsConfig (the
// node's mutual-TLS identity's ServerConfig), only a peer with a
// certificate of the cluster's CA is served.
func (s *Server) Serve(l net.Listener, tlsConfig *tls.Config) error {
	for {
		c, err := l.Accept()
		if err != nil {
			return err
		}
		if tlsConfig != nil {
			c = tls.Server(newRecordConn(c), tlsConfig)
		}
		go s.ServeConn(c)
	}
}

// Close ends every connection.
func (s *Server) Close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	for c := range s.conns {
		_ = closeConn(c)
	}
}

func (s *Server) track(c net.Conn, add bool) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if add {
		if s.closed {
			return false
		}
		s.conns[c] = struct{}{}
	} else {
		delete(s.conns, c)
	}
	return true
}

// version is the protocol version the server speaks.
func (s *Server) version() int {
	if v := s.speaks.Load(); v > 0 {
		return int(v)
	}
	return ProtocolVersion
}

// session is one connection's open replica, as its engine owns it.
type session struct {
	rep       *replica.Owned
	log       *logrus.Entry
	growLimit uint64

	// wmu orders the replies on the connection; over TLS (rc) each
	// reply's records go in a batch.
	wmu sync.Mutex
	w   *bufio.Writer
	rc  *recordConn
	hdr [headerSize]byte // a reply's header, under wmu

	// layers are the layers a rebuild reads from this replica (rebuild.go),
	// held until OpCloseLayers or the connection's end.
	lmu    sync.RWMutex
	layers *replica.Layers
}

// ServeConn serves one connection: its open, then its requests, each in a
// goroutine of its own (answered out of order), at most MaxInFlight and
// MaxInFlightBytes at once; a sync, a snapshot, an epoch and a chain's
// listing wait for the requests before it, and the next is read after. A
// write larger than streamPiece is written as its data arrives, and the
// next request is read after it (streamWrite).
func (s *Server) ServeConn(c net.Conn) {
	if !s.track(c, true) {
		_ = c.Close()
		return
	}
	defer s.track(c, false)
	defer closeConn(c)
	log := s.log.WithField("peer", c.RemoteAddr().String())
	r := bufio.NewReaderSize(c, 64<<10)
	ss, err := s.open(c, r, log)
	if err != nil {
		log.WithError(err).Warn("Replica protocol: the connection's open was refused")
		return
	}
	defer ss.closeLayers()
	slots := semaphore.NewWeighted(MaxInFlight)
	budget := semaphore.NewWeighted(MaxInFlightBytes)
	var inFlight sync.WaitGroup
	defer inFlight.Wait()
	for {
		h, err := readHeader(r, requestMagic)
		if err != nil {
			if !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) {
				ss.log.WithError(err).Warn("Replica protocol: closing the connection")
			}
			return
		}
		n, err := requestBody(h)
		if err == nil && h.kind == OpOpen {
			err = fmt.Errorf("%w: a second open on one connection", ErrProtocol)
		}
		if err == nil && h.kind > OpChain && s.version() < 2 {
			err = fmt.Errorf("%w: unknown op %d", ErrProtocol, h.kind)
		}
		if err == nil && h.kind > OpTrimKeeping && s.version() < 3 {
			err = fmt.Errorf("%w: unknown op %d", ErrProtocol, h.kind)
		}
		if err != nil {
			ss.log.WithError(err).Warn("Replica protocol: closing the connection")
			return
		}
		cost := int64(n)
		if h.kind == OpRead {
			cost = int64(h.length)
		}
		if h.kind == OpReadLayer {
			// Its answer's length is in its body: counted at its bound.
			cost = MaxMessage + digestSize
		}
		// Back pressure: the next request is not read until this one
		// fits.
		_ = slots.Acquire(context.Background(), 1)
		_ = budget.Acquire(context.Background(), cost)
		if size := uint64(ss.rep.Size()); h.kind == OpWrite && n > streamPiece && h.offset <= size && uint64(n) <= size-h.offset {
			err := ss.streamWrite(r, h)
			slots.Release(1)
			budget.Release(cost)
			if err != nil {
				return
			}
			continue
		}
		body := getBuffer(n)
		if _, err := io.ReadFull(r, body); err != nil {
			return
		}
		if ordered(h.kind) {
			inFlight.Wait()
			ss.serve(h, body)
			slots.Release(1)
			budget.Release(cost)
			continue
		}
		inFlight.Add(1)
		go func() {
			defer inFlight.Done()
			defer slots.Release(1)
			defer budget.Release(cost)
			ss.serve(h, body)
		}()
	}
}

// streamPiece is how much of a write's data the server holds at once: a
// write larger than it is written to the replica piece by piece as its
// data arrives (pieces aligned on multiples of it), each while it is
// still in the processor's cache, and the connection carries the next
// piece meanwhile.
const streamPiece = 256 << 10

// streamWrite reads the data of write h, within the replica, from r and
// writes it to the replica as it comes, then answers: done, or the first
// failure, after which the rest of the data is read and dropped. The
// write is answered only once all of it is on the replica; one that is
// never answered (its connection broke) may be there in part, as a write
// to a disk may when the disk's power goes. An error is the connection's.
func (ss *session) streamWrite(r io.Reader, h header) error {
	buf := getBuffer(streamPiece)
	defer putBuffer(buf)
	var failed error
	for at, end := int64(h.offset), int64(h.offset)+int64(h.length); at < end; {
		next := min(end, (at/streamPiece+1)*streamPiece)
		p := buf[:next-at]
		if _, err := io.ReadFull(r, p); err != nil {
			return err
		}
		if failed == nil {
			_, failed = ss.rep.WriteAt(p, at)
		}
		at = next
	}
	res := result{status: statusOK}
	if failed != nil {
		res = failure(failed)
	}
	ss.reply(h.id, res)
	return nil
}

// open reads and answers the connection's first request, an open.
func (s *Server) open(c net.Conn, r *bufio.Reader, log *logrus.Entry) (*session, error) {
	_ = c.SetReadDeadline(time.Now().Add(openTimeout))
	defer c.SetReadDeadline(time.Time{})
	h, err := readHeader(r, requestMagic)
	if err != nil {
		return nil, err
	}
	if h.kind != OpOpen {
		return nil, fmt.Errorf("%w: the first request is op %d, not an open", ErrProtocol, h.kind)
	}
	n, err := requestBody(h)
	if err != nil {
		return nil, err
	}
	body := make([]byte, n)
	if _, err := io.ReadFull(r, body); err != nil {
		return nil, err
	}
	ss := &session{w: bufio.NewWriterSize(c, 64<<10), rc: recordConnOf(c), log: log, growLimit: s.growLimit}
	if ss.growLimit == 0 {
		ss.growLimit = MaxGrowSize
	}
	var req OpenRequest
	if err := json.Unmarshal(body, &req); err != nil || req.VolumeUID == "" || req.Replica == "" || req.Engine == "" || req.Term == 0 {
		ss.reply(h.id, result{status: statusInvalid, body: []byte("an open names the volume's UID, the replica, the engine instance and a term above 0")})
		return nil, fmt.Errorf("%w: a malformed open", ErrProtocol)
	}
	ss.log = log.WithFields(logrus.Fields{"replica": req.Replica, "engine": req.Engine, "term": req.Term})
	rep, err := s.lookup(req)
	if err == nil {
		err = rep.AcceptTerm(req.Term, req.Engine)
	}
	if err != nil {
		ss.reply(h.id, failure(err))
		return nil, err
	}
	ss.rep = rep.AtTerm(req.Term, req.Engine)
	reply := OpenReply{Size: ss.rep.Size(), Epoch: ss.rep.Epoch(), Term: req.Term, Version: s.version()}
	if reply.Version >= 3 {
		reply.Rebuilding = ss.rep.Rebuilding()
	}
	if reply.Version == 1 {
		// As a server of version 1 answers: without the field.
		reply.Version = 0
	}
	out, _ := json.Marshal(reply)
	ss.reply(h.id, result{status: statusOK, body: out})
	ss.log.WithField("clientVersion", max(req.Version, 1)).Info("Replica protocol: opened the replica for an engine")
	return ss, nil
}

// result is a reply's status and body; a pooled body goes back to its
// pool once the reply is written.
type result struct {
	status byte
	body   []byte
	pooled bool
}

// serve carries out one request and answers it; its body and its reply's
// go back to their pools after.
func (ss *session) serve(h header, body []byte) {
	res := ss.do(h, body)
	putBuffer(body)
	ss.reply(h.id, res)
	if res.pooled {
		putBuffer(res.body)
	}
}

func failure(err error) result {
	status := statusError
	if errors.Is(err, replica.ErrFenced) {
		status = statusFenced
	}
	msg := err.Error()
	if len(msg) > maxErrorBody {
		msg = msg[:maxErrorBody]
	}
	return result{status: status, body: []byte(msg)}
}

// do carries a request out for the session's engine, which must still
// own the replica.
func (ss *session) do(h header, body []byte) result {
	off := int64(h.offset)
	if (h.kind == OpRead || h.kind == OpWrite || h.kind == OpTrim || h.kind == OpTrimKeeping) && h.offset > uint64(ss.rep.Size()) {
		return result{status: statusInvalid, body: []byte(fmt.Sprintf("offset %d is past the replica's %d bytes", h.offset, ss.rep.Size()))}
	}
	var err error
	switch h.kind {
	case OpRead:
		data := getBuffer(int(h.length))
		if _, err = ss.rep.ReadAt(data, off); err == nil {
			return result{status: statusOK, body: data, pooled: true}
		}
		putBuffer(data)
	case OpWrite:
		_, err = ss.rep.WriteAt(body, off)
	case OpSync:
		err = ss.rep.Sync()
	case OpTrim:
		err = ss.rep.TrimKeeping(off, int64(h.length), nil)
	case OpSetEpoch:
		err = ss.rep.SetEpoch(h.offset)
	case OpSnapshot:
		var req SnapshotRequest
		if jerr := json.Unmarshal(body, &req); jerr != nil || req.Name == "" || req.ID == "" {
			return result{status: statusInvalid, body: []byte("a snapshot names the snapshot and its ID")}
		}
		err = ss.rep.CreateSnapshotWithID(req.Name, req.ID, req.UserCreated, req.Created, req.Labels)
	case OpChain:
		var list []replica.Snapshot
		if list, err = ss.rep.Snapshots(); err != nil {
			break
		}
		out, _ := json.Marshal(list)
		if len(out) > MaxMessage {
			err = fmt.Errorf("the replica's chain takes %d bytes, above the %d a message carries: its snapshots' labels are too large to list over the replica protocol", len(out), MaxMessage)
			break
		}
		return result{status: statusOK, body: out}
	case OpMarkRemoved, OpRevert, OpPurge, OpGrow, OpTrimKeeping:
		return ss.doControl(h, body)
	case OpOpenLayers, OpLayerExtents, OpReadLayer, OpCloseLayers, OpBeginRebuild, OpWriteLayer, OpInstallChain:
		return ss.doRebuild(h, body)
	}
	if err != nil {
		return failure(err)
	}
	return result{status: statusOK}
}

// reply writes one reply; replies of concurrent requests take turns.
func (ss *session) reply(id uint64, res result) {
	ss.wmu.Lock()
	defer ss.wmu.Unlock()
	if ss.rc != nil {
		ss.rc.batch()
		defer ss.rc.flush()
	}
	header{magic: replyMagic, kind: res.status, id: id, length: uint32(len(res.body))}.put(ss.hdr[:])
	if _, err := ss.w.Write(ss.hdr[:]); err != nil {
		return
	}
	if _, err := ss.w.Write(res.body); err != nil {
		return
	}
	_ = ss.w.Flush()
}
