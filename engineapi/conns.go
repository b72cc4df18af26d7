package engineapi

import (
	"fmt"
	"sync"
	"time"

	"google.golang.org/grpc"

	"github.com/cadence-storage/longhorn-manager/engine/rpc/pb"
	"github.com/cadence-storage/longhorn-manager/mtls"
)

// Conns keeps one gRPC connection per engine service address (one per
// node), shared by every client made from it: a request no longer pays a
// TCP connection and a mutual TLS handshake of its own. A connection
// reconnects by itself when its peer goes and comes back, and takes up a
// renewed identity at its next handshake (the identity's configuration
// reads the material of the moment).
type Conns struct {
	id *mtls.Identity
	mu sync.Mutex
	// conns are the connections by address; closed says Close ran.
	conns  map[string]*grpc.ClientConn
	closed bool
}

// NewConns returns an empty cache of connections speaking mutual TLS as id.
func NewConns(id *mtls.Identity) *Conns {
	return &Conns{id: id, conns: map[string]*grpc.ClientConn{}}
}

// Client is a client of the engine of volume at address over the shared
// connection to that address. Its Close leaves the connection open.
func (c *Conns) Client(address, volume string, timeout time.Duration) (*GRPCClient, error) {
	if c == nil || c.id == nil {
		return nil, fmt.Errorf("engine of volume %s at %s: no internal TLS identity to call it with", volume, address)
	}
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, fmt.Errorf("engine of volume %s at %s: the manager is stopping", volume, address)
	}
	conn := c.conns[address]
	if conn == nil {
		var err error
		if conn, err = grpc.NewClient(address, c.id.GRPCDialOption()); err != nil {
			return nil, fmt.Errorf("engine of volume %s at %s: %w", volume, address, err)
		}
		c.conns[address] = conn
	}
	return &GRPCClient{conn: conn, client: pb.NewEngineClient(conn), volume: volume, address: address, timeout: timeout, shared: true}, nil
}

// Close closes every connection; clients made before fail from then on.
func (c *Conns) Close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for addr, conn := range c.conns {
		_ = conn.Close()
		delete(c.conns, addr)
	}
	c.closed = true
}
