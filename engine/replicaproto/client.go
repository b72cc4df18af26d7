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
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"
	"golang.org/x/sync/semaphore"

	"github.com/cadence-storage/longhorn-manager/engine/replica"
)

// Client is an engine's connection to one replica: ReadAt, WriteAt, Sync
// and Trim as a replica of the engine's own process has them, the
// snapshot, epoch and chain of the engine's I/O path, and, from a server
// of version 2, the chain's and the size's changes (control.go). Requests from many
// goroutines are pipelined on the one connection, at most MaxInFlight and
// MaxInFlightBytes at once (more wait their turn before they are sent,
// their deadline not yet running). Once a request fails for the
// connection (a timeout, a broken peer) every request after fails too:
// the engine drops the replica, as it drops one whose I/O fails.
type Client struct {
	conn    net.Conn
	timeout time.Duration
	// controlTimeout is the deadline of a purge and a grow (ControlTimeout).
	controlTimeout time.Duration
	open           OpenReply
	// size is the replica's: as it answered the open, and as Grow set it
	// since.
	size atomic.Int64

	// slots and budget bound the requests in flight; waiting for them
	// ends when the connection breaks (ctx).
	slots, budget *semaphore.Weighted
	ctx           context.Context
	cancel        context.CancelFunc

	// wmu orders the requests' messages on the connection. A message
	// goes to a TCP connection in one system call (writev: the header
	// and the caller's data, not copied), to a TLS one over a recordConn
	// in a batch of its records, to any other through w.
	wmu sync.Mutex
	tcp bool
	rc  *recordConn
	w   *bufio.Writer
	hdr [headerSize]byte

	mu      sync.Mutex
	nextID  uint64
	pending map[uint64]*call
	broken  error
	done    chan struct{}
}

// call is a request waiting for its reply.
type call struct {
	op     byte
	length uint32 // what a read's reply must carry
	// limit, when above 0, is the most body an answer may carry (the ops
	// of version 3 whose answers' sizes their requests set).
	limit uint32
	reply chan result
}

// DialOption changes how Dial opens a replica.
type DialOption func(*Client)

// ControlTimeout is the deadline of a purge and of a grow, which may take
// far longer than an I/O (DefaultControlTimeout when not given, or 0).
func ControlTimeout(d time.Duration) DialOption {
	return func(c *Client) {
		if d > 0 {
			c.controlTimeout = d
		}
	}
}

// Dial connects to the replica server at addr (over mutual TLS with
// tlsConfig, the node's identity's ClientConfig, unless nil) and opens the
// replica req names; timeout is each request's deadline (DefaultTimeout
// when 0), but for those of ControlTimeout.
func Dial(ctx context.Context, addr string, tlsConfig *tls.Config, req OpenRequest, timeout time.Duration, opts ...DialOption) (*Client, error) {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	if tlsConfig != nil {
		tc := tls.Client(newRecordConn(conn), tlsConfig)
		if err := tc.HandshakeContext(ctx); err != nil {
			conn.Close()
			return nil, err
		}
		conn = tc
	}
	return dialConn(ctx, conn, addr, req, timeout, opts...)
}

// dialConn opens the replica req names over conn, a connection to addr.
func dialConn(ctx context.Context, conn net.Conn, addr string, req OpenRequest, timeout time.Duration, opts ...DialOption) (*Client, error) {
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	c := &Client{conn: conn, timeout: timeout, controlTimeout: DefaultControlTimeout, w: bufio.NewWriterSize(conn, 64<<10), pending: map[uint64]*call{}, done: make(chan struct{}),
		slots: semaphore.NewWeighted(MaxInFlight), budget: semaphore.NewWeighted(MaxInFlightBytes)}
	for _, opt := range opts {
		opt(c)
	}
	req.Version = ProtocolVersion
	_, c.tcp = conn.(*net.TCPConn)
	c.rc = recordConnOf(conn)
	c.ctx, c.cancel = context.WithCancel(context.Background())
	go c.readReplies(bufio.NewReaderSize(conn, 64<<10))
	// The open ends with ctx too.
	stop := context.AfterFunc(ctx, func() { c.fail(fmt.Errorf("open: %w", ctx.Err())) })
	defer stop()
	body, err := json.Marshal(req)
	if err != nil {
		c.Close()
		return nil, err
	}
	res, err := c.do(OpOpen, 0, uint32(len(body)), body)
	if err != nil {
		c.Close()
		return nil, fmt.Errorf("open replica %s at %s: %w", req.Replica, addr, err)
	}
	if err := json.Unmarshal(res, &c.open); err != nil || c.open.Size < 0 {
		c.Close()
		return nil, fmt.Errorf("open replica %s at %s: %w: a malformed answer", req.Replica, addr, ErrProtocol)
	}
	c.size.Store(c.open.Size)
	return c, nil
}

// Opened is what the replica said of itself when it was opened.
func (c *Client) Opened() OpenReply { return c.open }

// Size is the replica's size: when it was opened, or as Grow made it.
func (c *Client) Size() int64 { return c.size.Load() }

// Close ends the connection; requests still waiting fail.
func (c *Client) Close() error {
	err := closeConn(c.conn)
	<-c.done
	return err
}

// ReadAt reads len(p) bytes at off, in messages of at most MaxMessage
// bytes sent at once.
func (c *Client) ReadAt(p []byte, off int64) (int, error) {
	err := c.split(len(p), func(at, n int) error {
		data, err := c.do(OpRead, uint64(off)+uint64(at), uint32(n), nil)
		if err == nil {
			copy(p[at:at+n], data)
		}
		return err
	})
	if err != nil {
		return 0, err
	}
	return len(p), nil
}

// WriteAt writes p at off, in messages of at most MaxMessage bytes sent at
// once; it returns once the replica has them all.
func (c *Client) WriteAt(p []byte, off int64) (int, error) {
	err := c.split(len(p), func(at, n int) error {
		_, err := c.do(OpWrite, uint64(off)+uint64(at), uint32(n), p[at:at+n])
		return err
	})
	if err != nil {
		return 0, err
	}
	return len(p), nil
}

// Sync makes everything the replica acknowledged before it durable.
func (c *Client) Sync() error {
	_, err := c.do(OpSync, 0, 0, nil)
	return err
}

// SetEpoch records the replica's epoch, its data synced first, once every
// request before it on the connection is done.
func (c *Client) SetEpoch(epoch uint64) error {
	_, err := c.do(OpSetEpoch, epoch, 0, nil)
	return err
}

// Snapshot takes a snapshot, once every request before it on the
// connection is done.
func (c *Client) Snapshot(req SnapshotRequest) error {
	body, err := json.Marshal(req)
	if err != nil {
		return err
	}
	if len(body) > maxSnapshotBody {
		return fmt.Errorf("snapshot %s: its request takes %d bytes, above the %d the replica protocol carries", req.Name, len(body), maxSnapshotBody)
	}
	_, err = c.do(OpSnapshot, 0, uint32(len(body)), body)
	return err
}

// Chain lists the replica's snapshots and head, as replica.Snapshots
// does.
func (c *Client) Chain() ([]replica.Snapshot, error) {
	body, err := c.do(OpChain, 0, 0, nil)
	if err != nil {
		return nil, err
	}
	var list []replica.Snapshot
	if err := json.Unmarshal(body, &list); err != nil {
		err = fmt.Errorf("%w: a malformed chain: %v", ErrProtocol, err)
		c.fail(err)
		return nil, err
	}
	return list, nil
}

// Trim gives back the space of [off, off+length).
func (c *Client) Trim(off, length int64) error {
	for length > 0 {
		n := min(length, 1<<30)
		if _, err := c.do(OpTrim, uint64(off), uint32(n), nil); err != nil {
			return err
		}
		off, length = off+n, length-n
	}
	return nil
}

// split runs f over [0, n) in parts of at most MaxMessage bytes, at once.
func (c *Client) split(n int, f func(at, n int) error) error {
	if n <= MaxMessage {
		return f(0, n)
	}
	var g errgroup.Group
	for at := 0; at < n; at += MaxMessage {
		g.Go(func() error { return f(at, min(MaxMessage, n-at)) })
	}
	return g.Wait()
}

// do sends one request and waits, at most the client's timeout, for its
// reply's body.
func (c *Client) do(op byte, offset uint64, length uint32, body []byte) ([]byte, error) {
	return c.doWithin(c.timeout, op, offset, length, body)
}

// doWithin is do with a deadline of its own for the reply; sending it is
// bounded by the client's timeout all the same.
func (c *Client) doWithin(timeout time.Duration, op byte, offset uint64, length uint32, body []byte) ([]byte, error) {
	return c.doCall(timeout, op, offset, length, body, 0)
}

// doCall is doWithin for an answer of at most limit bytes (0: the op's
// own bound), which count in the connection's budget.
func (c *Client) doCall(timeout time.Duration, op byte, offset uint64, length uint32, body []byte, limit uint32) ([]byte, error) {
	cost := int64(len(body))
	if op == OpRead {
		cost = int64(length)
	}
	cost = max(cost, int64(limit))
	if err := c.slots.Acquire(c.ctx, 1); err != nil {
		return nil, c.brokenErr()
	}
	defer c.slots.Release(1)
	if err := c.budget.Acquire(c.ctx, cost); err != nil {
		return nil, c.brokenErr()
	}
	defer c.budget.Release(cost)
	cl := &call{op: op, length: length, limit: limit, reply: make(chan result, 1)}
	c.mu.Lock()
	if c.broken != nil {
		err := c.broken
		c.mu.Unlock()
		return nil, err
	}
	c.nextID++
	id := c.nextID
	c.pending[id] = cl
	c.mu.Unlock()

	c.wmu.Lock()
	_ = c.conn.SetWriteDeadline(time.Now().Add(c.timeout))
	err := c.send(header{magic: requestMagic, kind: op, id: id, offset: offset, length: length}, body)
	c.wmu.Unlock()
	if err != nil {
		c.fail(fmt.Errorf("send to the replica: %w", err))
	}
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	select {
	case res := <-cl.reply:
		switch res.status {
		case statusOK:
			return res.body, nil
		case statusFenced:
			// The server's message begins with the refusal's own words.
			return nil, fmt.Errorf("%w: %s", replica.ErrFenced, strings.TrimPrefix(string(res.body), replica.ErrFenced.Error()+": "))
		case statusNotFound:
			return nil, fmt.Errorf("%w: %s", replica.ErrNotFound, res.body)
		case statusInvalid:
			return nil, fmt.Errorf("the replica refused the request: %s", res.body)
		case statusBroken:
			c.mu.Lock()
			err := c.broken
			c.mu.Unlock()
			if err == nil {
				err = errors.New(string(res.body))
			}
			return nil, err
		default:
			return nil, fmt.Errorf("the replica: %s", res.body)
		}
	case <-timer.C:
		err := fmt.Errorf("%w: no answer within %s", ErrTimeout, timeout)
		c.fail(err)
		return nil, err
	}
}

// send writes one request's message; the caller holds wmu.
func (c *Client) send(h header, body []byte) error {
	h.put(c.hdr[:])
	if c.tcp {
		bufs := net.Buffers{c.hdr[:], body}
		_, err := bufs.WriteTo(c.conn)
		return err
	}
	if c.rc != nil {
		c.rc.batch()
		_, err := c.conn.Write(c.hdr[:])
		if err == nil && len(body) > 0 {
			_, err = c.conn.Write(body)
		}
		if ferr := c.rc.flush(); err == nil {
			err = ferr
		}
		return err
	}
	if _, err := c.w.Write(c.hdr[:]); err != nil {
		return err
	}
	if _, err := c.w.Write(body); err != nil {
		return err
	}
	return c.w.Flush()
}

// brokenErr is why the connection broke.
func (c *Client) brokenErr() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.broken == nil {
		return errors.New("the replica's connection is closed")
	}
	return c.broken
}

// statusBroken is the client's own: the connection failed before the
// reply came.
const statusBroken byte = 255

// fail breaks the connection: every request waiting, and every one after,
// fails with err.
func (c *Client) fail(err error) {
	c.mu.Lock()
	if c.broken == nil {
		c.broken = err
	}
	pending := c.pending
	c.pending = map[uint64]*call{}
	c.mu.Unlock()
	c.cancel()
	_ = closeConn(c.conn)
	for _, cl := range pending {
		cl.reply <- result{status: statusBroken, body: []byte(err.Error())}
	}
}

// readReplies hands each reply to its request until the connection ends.
// A reply to no request, or of a length its request does not allow,
// breaks the connection before its body is read; the connection is
// broken before the request that met the bad reply is told, so that it
// fails with the connection's error.
func (c *Client) readReplies(r *bufio.Reader) {
	defer close(c.done)
	for {
		h, err := readHeader(r, replyMagic)
		if err != nil {
			c.fail(fmt.Errorf("the replica's connection: %w", err))
			return
		}
		c.mu.Lock()
		cl, ok := c.pending[h.id]
		delete(c.pending, h.id)
		c.mu.Unlock()
		if !ok {
			c.fail(fmt.Errorf("%w: a reply to no request (%d)", ErrProtocol, h.id))
			return
		}
		if limit := replyLimit(cl, h.kind); h.length > limit {
			err := fmt.Errorf("%w: a reply of %d bytes to op %d, above %d", ErrProtocol, h.length, cl.op, limit)
			c.fail(err)
			cl.reply <- result{status: statusBroken, body: []byte(err.Error())}
			return
		}
		body := make([]byte, h.length)
		if _, err := io.ReadFull(r, body); err != nil {
			err = fmt.Errorf("the replica's connection: %w", err)
			c.fail(err)
			cl.reply <- result{status: statusBroken, body: []byte(err.Error())}
			return
		}
		if h.kind == statusOK && cl.op == OpRead && h.length != cl.length {
			err := fmt.Errorf("%w: a read of %d bytes answered with %d", ErrProtocol, cl.length, h.length)
			c.fail(err)
			cl.reply <- result{status: statusBroken, body: []byte(err.Error())}
			return
		}
		cl.reply <- result{status: h.kind, body: body}
	}
}

// replyLimit is the most body a reply of status to cl may carry.
func replyLimit(cl *call, status byte) uint32 {
	switch {
	case status != statusOK:
		return maxErrorBody
	case cl.limit > 0:
		return cl.limit
	case cl.op == OpRead:
		return cl.length
	case cl.op == OpOpen:
		return maxOpenBody
	case cl.op == OpChain:
		return MaxMessage
	case cl.op == OpPurge:
		return maxNamesBody
	}
	return 0
}
