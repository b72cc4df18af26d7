package replicaproto

import (
	"bufio"
	"crypto/tls"
	"net"
	"sync"
)

// recordConn is the TCP connection under a TLS one. A TLS connection
// reads and writes one record, at most 16 KiB, in a system call of its
// own; over a recordConn it reads through a buffer, several records in a
// call, and writes a message's records (a 1 MiB write is 64) in calls of
// batchSize while a batch is open.
type recordConn struct {
	net.Conn
	r *bufio.Reader

	mu  sync.Mutex
	buf []byte // while a batch is open
	err error  // a batch's write failed: every write after fails too
}

// batchSize is how much of a batch's records go to the connection at
// once.
const batchSize = 256 << 10

func newRecordConn(c net.Conn) *recordConn {
	return &recordConn{Conn: c, r: bufio.NewReaderSize(c, 64<<10)}
}

// recordConnOf is the recordConn under c, a TLS connection over one, or
// nil.
func recordConnOf(c net.Conn) *recordConn {
	if tc, ok := c.(*tls.Conn); ok {
		rc, _ := tc.NetConn().(*recordConn)
		return rc
	}
	return nil
}

func (c *recordConn) Read(p []byte) (int, error) { return c.r.Read(p) }

// closeConn closes c; a TLS connection over a recordConn is closed at its
// TCP connection, without the TLS close_notify: its write could wait
// behind a batch that a peer who reads nothing holds up (for up to the 5 s
// the TLS layer gives it), where a connection broken on purpose must end
// at once. The peer reads the end as the end of the stream all the same.
func closeConn(c net.Conn) error {
	if rc := recordConnOf(c); rc != nil {
		return rc.Conn.Close()
	}
	return c.Close()
}

func (c *recordConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err != nil {
		return 0, c.err
	}
	if c.buf == nil {
		return c.Conn.Write(p)
	}
	if len(c.buf)+len(p) > cap(c.buf) {
		if err := c.flushLocked(); err != nil {
			return 0, err
		}
		if len(p) > cap(c.buf) {
			n, err := c.Conn.Write(p)
			c.err = err
			return n, err
		}
	}
	c.buf = append(c.buf, p...)
	return len(p), nil
}

func (c *recordConn) flushLocked() error {
	if len(c.buf) > 0 {
		_, c.err = c.Conn.Write(c.buf)
		c.buf = c.buf[:0]
	}
	return c.err
}

// batch gathers the writes after it until flush.
func (c *recordConn) batch() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.buf == nil {
		c.buf = getBuffer(batchSize)[:0]
	}
}

// flush writes what the batch gathered and closes it.
func (c *recordConn) flush() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.buf == nil {
		return c.err
	}
	err := c.flushLocked()
	putBuffer(c.buf)
	c.buf = nil
	return err
}
