package manager

import (
	"context"
	"errors"
	"fmt"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/cadence-storage/longhorn-manager/backingimage/rpc/pb"
	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	"github.com/cadence-storage/longhorn-manager/mtls"
)

// The kinds of error a Client returns, for errors.Is.
var (
	ErrNotFound     = errors.New("not found")
	ErrInvalid      = errors.New("invalid request")
	ErrPrecondition = errors.New("precondition failed")
	ErrBusy         = errors.New("busy")
	ErrUnavailable  = errors.New("unavailable")
)

// DefaultTimeout bounds every unary call.
const DefaultTimeout = 30 * time.Second

// FileInfo is the state of one file on a manager's disk.
type FileInfo struct {
	Name string
	UUID string
	Size int64
	// The size of the disk a ready file holds (0: unknown, or not a disk
	// image volumes can use).
	VirtualSize      int64
	State            longhorn.BackingImageState
	Progress         int
	CurrentChecksum  string
	ExpectedChecksum string
	Message          string
	// The data file's path relative to the disk, once ready.
	Path string
	// How many Sends of the file run now.
	Sending int
}

func fromPB(i *pb.FileInfo) *FileInfo {
	return &FileInfo{Name: i.Name, UUID: i.Uuid, Size: i.Size, VirtualSize: i.VirtualSize, State: longhorn.BackingImageState(i.State),
		Progress: int(i.Progress), CurrentChecksum: i.CurrentChecksum, ExpectedChecksum: i.ExpectedChecksum,
		Message: i.Message, Path: i.Path, Sending: int(i.Sending)}
}

// Client talks to one backing image manager.
type Client struct {
	conn    *grpc.ClientConn
	client  pb.BackingImageManagerClient
	address string
	timeout time.Duration
}

// NewClient returns a client of the manager at address (host:port),
// speaking mutual TLS as id; the connection is made lazily. timeout
// bounds each unary call (DefaultTimeout when zero).
func NewClient(address string, timeout time.Duration, id *mtls.Identity) (*Client, error) {
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	if id == nil {
		return nil, fmt.Errorf("backing image manager at %s: no internal TLS identity to call it with", address)
	}
	conn, err := grpc.NewClient(address, id.GRPCDialOption())
	if err != nil {
		return nil, fmt.Errorf("backing image manager at %s: %w", address, err)
	}
	return &Client{conn: conn, client: pb.NewBackingImageManagerClient(conn), address: address, timeout: timeout}, nil
}

// Close closes the connection.
func (c *Client) Close() error { return c.conn.Close() }

func (c *Client) wrap(op string, err error) error {
	st := status.Convert(err)
	kind := ErrUnavailable
	switch st.Code() {
	case codes.NotFound:
		kind = ErrNotFound
	case codes.InvalidArgument:
		kind = ErrInvalid
	case codes.FailedPrecondition:
		kind = ErrPrecondition
	case codes.ResourceExhausted:
		kind = ErrBusy
	}
	return fmt.Errorf("%s on the backing image manager at %s: %w: %s", op, c.address, kind, st.Message())
}

// VersionGet is the range of API versions the manager speaks.
func (c *Client) VersionGet(ctx context.Context) (version, minVersion int, err error) {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	v, err := c.client.VersionGet(ctx, &pb.Empty{})
	if err != nil {
		return 0, 0, c.wrap("version get", err)
	}
	return int(v.Version), int(v.MinVersion), nil
}

// Get is one file's state; uuid may be empty to match any.
func (c *Client) Get(ctx context.Context, name, uuid string) (*FileInfo, error) {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	i, err := c.client.Get(ctx, &pb.FileRequest{Name: name, Uuid: uuid})
	if err != nil {
		return nil, c.wrap("get "+name, err)
	}
	return fromPB(i), nil
}

// List is every file's state, by backing image name.
func (c *Client) List(ctx context.Context) (map[string]*FileInfo, error) {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	l, err := c.client.List(ctx, &pb.Empty{})
	if err != nil {
		return nil, c.wrap("list", err)
	}
	out := make(map[string]*FileInfo, len(l.Files))
	for name, i := range l.Files {
		out[name] = fromPB(i)
	}
	return out, nil
}

// Delete removes a file; ErrPrecondition while it is in use or being sent.
func (c *Client) Delete(ctx context.Context, name, uuid string) error {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	if _, err := c.client.Delete(ctx, &pb.FileRequest{Name: name, Uuid: uuid}); err != nil {
		return c.wrap("delete "+name, err)
	}
	return nil
}

// Fetch starts taking the file from the data source at dataSourceAddress
// (or reusing the one on the disk) and answers its state at once.
func (c *Client) Fetch(ctx context.Context, name, uuid, checksum, dataSourceAddress string, size int64) (*FileInfo, error) {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	i, err := c.client.Fetch(ctx, &pb.FetchRequest{Name: name, Uuid: uuid, Checksum: checksum, DataSourceAddress: dataSourceAddress, Size: size})
	if err != nil {
		return nil, c.wrap("fetch "+name, err)
	}
	return fromPB(i), nil
}

// Sync starts receiving the file from the manager at fromAddress and
// answers its state at once.
func (c *Client) Sync(ctx context.Context, name, uuid, checksum, fromAddress string, size int64) (*FileInfo, error) {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	i, err := c.client.Sync(ctx, &pb.SyncRequest{Name: name, Uuid: uuid, Checksum: checksum, FromAddress: fromAddress, Size: size})
	if err != nil {
		return nil, c.wrap("sync "+name, err)
	}
	return fromPB(i), nil
}

// Watch returns a channel that receives a notice after every change on
// the manager (changes in a burst may share one notice), the first one at
// once. The channel is closed when the stream ends: when ctx ends or the
// manager goes away; the caller then lists and watches again.
func (c *Client) Watch(ctx context.Context) (<-chan struct{}, error) {
	stream, err := c.client.Watch(ctx, &pb.Empty{})
	if err != nil {
		return nil, c.wrap("watch", err)
	}
	if _, err := stream.Recv(); err != nil {
		return nil, c.wrap("watch", err)
	}
	out := make(chan struct{}, 1)
	out <- struct{}{}
	go func() {
		defer close(out)
		for {
			if _, err := stream.Recv(); err != nil {
				return
			}
			select {
			case out <- struct{}{}:
			default:
			}
		}
	}()
	return out, nil
}
