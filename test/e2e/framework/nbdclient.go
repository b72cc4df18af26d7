package framework

import "time"

// NBDClient is one NBD connection, one request at a time, for tests and
// benchmarks that read and write an export directly.
type NBDClient struct{ c *nbdConn }

// DialNBD connects to uri (nbd://host:port/export); each request must be
// answered within timeout.
func DialNBD(uri string, timeout time.Duration) (*NBDClient, error) {
	c, err := dialNBD(uri, timeout)
	if err != nil {
		return nil, err
	}
	return &NBDClient{c: c}, nil
}

// Size is the export's size.
func (n *NBDClient) Size() int64 { return n.c.size }

// WriteAt writes p at off, acknowledged when it returns.
func (n *NBDClient) WriteAt(p []byte, off int64) error {
	_, err := n.c.do(nbdCmdWrite, off, p, 0)
	return err
}

// ReadAt reads length bytes at off.
func (n *NBDClient) ReadAt(off int64, length uint32) ([]byte, error) {
	return n.c.do(nbdCmdRead, off, nil, length)
}

// Flush makes every write before it durable.
func (n *NBDClient) Flush() error {
	_, err := n.c.do(nbdCmdFlush, 0, nil, 0)
	return err
}

// Close disconnects.
func (n *NBDClient) Close() { n.c.close() }
