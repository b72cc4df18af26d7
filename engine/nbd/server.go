package nbd

import (
	"bufio"
	"cmp"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/sirupsen/logrus"
	"golang.org/x/sync/semaphore"

	"github.com/cadence-storage/longhorn-manager/internal/panics"
)

// Device is what an export serves.
type Device interface {
	io.ReaderAt
	io.WriterAt
	Size() int64
	Sync() error
}

// Trimmer is a Device that can give back the space of a range (NBD_CMD_TRIM,
// what a filesystem's discards become). A Device that is one is served
// with trim advertised.
type Trimmer interface {
	Trim(off, length int64) error
}

// Server serves one device under one export name. Each connection handles
// its requests in order.
type Server struct {
	name   string
	device Device
	log    *logrus.Entry

	// MaxConnections bounds the connections served at once; one more is
	// closed as soon as it is accepted. DefaultMaxConnections when 0.
	MaxConnections int
	// HandshakeTimeout bounds the time from connecting to the start of
	// transmission. Transmission itself has no idle bound: a mounted file
	// system may send nothing for hours, and TCP keepalive finds a peer
	// that is gone. DefaultHandshakeTimeout when 0.
	HandshakeTimeout time.Duration

	mu       sync.Mutex
	listener net.Listener
	conns    map[net.Conn]struct{}
	closed   bool
	wg       sync.WaitGroup
}

// The bounds of a server that does not set its own: an export has one
// consumer (the node's block device or a tool), so a few connections
// are plenty, and a handshake takes milliseconds.
const (
	DefaultMaxConnections   = 16
	DefaultHandshakeTimeout = 10 * time.Second
)

// NewServer returns a server of device as export name.
func NewServer(name string, device Device, log *logrus.Entry) *Server {
	return &Server{name: name, device: device, log: log.WithField("export", name), conns: map[net.Conn]struct{}{}}
}

// Serve accepts connections on l until Close.
func (s *Server) Serve(l net.Listener) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return net.ErrClosed
	}
	s.listener = l
	s.mu.Unlock()
	for {
		conn, err := l.Accept()
		if err != nil {
			s.mu.Lock()
			closed := s.closed
			s.mu.Unlock()
			if closed {
				return nil
			}
			return err
		}
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			conn.Close()
			return nil
		}
		if limit := cmp.Or(s.MaxConnections, DefaultMaxConnections); len(s.conns) >= limit {
			s.mu.Unlock()
			s.log.WithFields(logrus.Fields{"remote": conn.RemoteAddr().String(), "limit": limit}).Warn("Refused an NBD connection: the export serves its most connections already")
			conn.Close()
			continue
		}
		s.conns[conn] = struct{}{}
		s.wg.Add(1)
		s.mu.Unlock()
		go func() {
			defer s.wg.Done()
			defer func() {
				s.mu.Lock()
				delete(s.conns, conn)
				s.mu.Unlock()
				conn.Close()
			}()
			if err := s.serveConn(conn); err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) {
				s.log.WithError(err).WithField("remote", conn.RemoteAddr().String()).Warn("NBD connection ended with an error")
			}
		}()
	}
}

// Close stops accepting, ends every connection and waits for them.
func (s *Server) Close() error {
	s.mu.Lock()
	s.closed = true
	if s.listener != nil {
		s.listener.Close()
	}
	for c := range s.conns {
		c.Close()
	}
	s.mu.Unlock()
	s.wg.Wait()
	return nil
}

type conn struct {
	nc net.Conn
	r  *bufio.Reader
	w  *bufio.Writer
}

func (c *conn) u16() (uint16, error) {
	var b [2]byte
	_, err := io.ReadFull(c.r, b[:])
	return binary.BigEndian.Uint16(b[:]), err
}

func (c *conn) u32() (uint32, error) {
	var b [4]byte
	_, err := io.ReadFull(c.r, b[:])
	return binary.BigEndian.Uint32(b[:]), err
}

func (c *conn) u64() (uint64, error) {
	var b [8]byte
	_, err := io.ReadFull(c.r, b[:])
	return binary.BigEndian.Uint64(b[:]), err
}

func (c *conn) put(vals ...any) error {
	for _, v := range vals {
		if err := binary.Write(c.w, binary.BigEndian, v); err != nil {
			return err
		}
	}
	return nil
}

// serveConn serves one client. A panic while serving ends this connection
// only, logged with the export and the stack: the client sees it drop, the
// engine and its other connections go on.
func (s *Server) serveConn(nc net.Conn) (err error) {
	defer panics.Recover(s.log.WithField("remote", nc.RemoteAddr().String()), &err)
	if err := nc.SetDeadline(time.Now().Add(cmp.Or(s.HandshakeTimeout, DefaultHandshakeTimeout))); err != nil {
		return err
	}
	c := &conn{nc: nc, r: bufio.NewReaderSize(nc, 128<<10), w: bufio.NewWriterSize(nc, 128<<10)}
	if err := c.put(uint64(nbdMagic), uint64(optMagic), uint16(flagFixedNewstyle|flagNoZeroes)); err != nil {
		return err
	}
	if err := c.w.Flush(); err != nil {
		return err
	}
	clientFlags, err := c.u32()
	if err != nil {
		return err
	}
	if clientFlags&clientFlagFixedNewstyle == 0 {
		return errors.New("client does not speak fixed newstyle")
	}
	noZeroes := clientFlags&clientFlagNoZeroes != 0
	ok, window, err := s.negotiate(c, noZeroes)
	if err != nil || !ok {
		return err
	}
	if err := nc.SetDeadline(time.Time{}); err != nil {
		return err
	}
	return s.transmit(c, window)
}

func (s *Server) transmissionFlags() uint16 {
	flags := uint16(transHasFlags | transSendFlush | transSendFUA | transWriteZeros)
	if _, ok := s.device.(Trimmer); ok {
		flags |= transSendTrim
	}
	return flags
}

// negotiate runs option haggling; it reports true when the client chose
// an export and transmission begins, and whether it is the window.
func (s *Server) negotiate(c *conn, noZeroes bool) (bool, bool, error) {
	for {
		magic, err := c.u64()
		if err != nil {
			return false, false, err
		}
		if magic != optMagic {
			return false, false, fmt.Errorf("bad option magic %#x", magic)
		}
		opt, err := c.u32()
		if err != nil {
			return false, false, err
		}
		length, err := c.u32()
		if err != nil {
			return false, false, err
		}
		if length > maxOption {
			return false, false, fmt.Errorf("option %d of %d bytes is too large", opt, length)
		}
		data := make([]byte, length)
		if _, err := io.ReadFull(c.r, data); err != nil {
			return false, false, err
		}
		switch opt {
		case optExportName:
			window, known := s.export(string(data))
			if !known {
				return false, false, fmt.Errorf("client asked for unknown export %q", data)
			}
			if err := c.put(uint64(s.exportSize(window)), s.transmissionFlags()); err != nil {
				return false, false, err
			}
			if !noZeroes {
				if _, err := c.w.Write(make([]byte, 124)); err != nil {
					return false, false, err
				}
			}
			return true, window, c.w.Flush()
		case optAbort:
			if err := s.reply(c, opt, repAck, nil); err != nil {
				return false, false, err
			}
			return false, false, nil
		case optList:
			name := []byte(s.name)
			payload := append(binary.BigEndian.AppendUint32(nil, uint32(len(name))), name...)
			if err := s.reply(c, opt, repServer, payload); err != nil {
				return false, false, err
			}
			if err := s.reply(c, opt, repAck, nil); err != nil {
				return false, false, err
			}
		case optInfo, optGo:
			done, window, err := s.infoOrGo(c, opt, data)
			if err != nil || done {
				return done, window, err
			}
		default:
			if err := s.reply(c, opt, repErrUnsup, nil); err != nil {
				return false, false, err
			}
		}
	}
}

func (s *Server) infoOrGo(c *conn, opt uint32, data []byte) (bool, bool, error) {
	if len(data) < 6 {
		return false, false, s.reply(c, opt, repErrInvalid, nil)
	}
	nameLen := binary.BigEndian.Uint32(data)
	if uint64(nameLen)+6 > uint64(len(data)) {
		return false, false, s.reply(c, opt, repErrInvalid, nil)
	}
	name := string(data[4 : 4+nameLen])
	window, known := s.export(name)
	if !known {
		return false, false, s.reply(c, opt, repErrUnknown, []byte("no such export"))
	}
	export := binary.BigEndian.AppendUint16(nil, infoExport)
	export = binary.BigEndian.AppendUint64(export, uint64(s.exportSize(window)))
	export = binary.BigEndian.AppendUint16(export, s.transmissionFlags())
	if err := s.reply(c, opt, repInfo, export); err != nil {
		return false, false, err
	}
	sizes := binary.BigEndian.AppendUint16(nil, infoBlockSize)
	sizes = binary.BigEndian.AppendUint32(sizes, 1)
	sizes = binary.BigEndian.AppendUint32(sizes, 4096)
	sizes = binary.BigEndian.AppendUint32(sizes, maxRequest)
	if err := s.reply(c, opt, repInfo, sizes); err != nil {
		return false, false, err
	}
	if err := s.reply(c, opt, repAck, nil); err != nil {
		return false, false, err
	}
	return opt == optGo, window, nil
}

func (s *Server) reply(c *conn, opt, typ uint32, data []byte) error {
	if err := c.put(uint64(optReplyMagic), opt, typ, uint32(len(data))); err != nil {
		return err
	}
	if _, err := c.w.Write(data); err != nil {
		return err
	}
	return c.w.Flush()
}

// A connection keeps one buffer of retainedBuffer bytes between its
// requests. A read or write larger than that borrows a buffer of its own
// size from the process's budget for large requests and gives it back
// once answered: however many clients send requests of up to maxRequest
// bytes, the buffers of a process's exports (every engine of an instance
// manager) hold at most largeRequestBudget bytes more than
// retainedBuffer per connection. Past the budget a large request waits
// for one in flight to be answered: back pressure, never an error.
const (
	retainedBuffer     = 1 << 20
	largeRequestBudget = 256 << 20
)

// largeRequestTimeout bounds a large request's transfer, its data in or
// its answer out (32 MiB in that time is 1 MiB/s).
var largeRequestTimeout = 30 * time.Second

var largeRequests = semaphore.NewWeighted(largeRequestBudget)

// largeBorrowed is what large requests hold of the budget now, and
// largePeak the most they have held (for the tests).
var largeBorrowed, largePeak atomic.Int64

// largeBuffers keep the large requests' buffers for the next ones, one
// pool per power of two from 2 MiB to maxRequest: buffers that come and
// go by the hundred megabytes would otherwise be garbage the collector
// lets pile up to twice what is live before it runs.
var largeBuffers [6]sync.Pool

// largeClass is the pool of a request of n bytes (retainedBuffer < n <=
// maxRequest), and its buffers' size.
func largeClass(n int64) (int, int64) {
	class, size := 0, int64(2*retainedBuffer)
	for size < n {
		class, size = class+1, size*2
	}
	return class, size
}

// borrowLarge returns a buffer of n bytes, its capacity counted against
// the budget until returnLarge.
func borrowLarge(n int64) []byte {
	class, size := largeClass(n)
	// Waits, when the budget is spent, for large requests of other
	// connections to be answered; theirs never wait on this one, so the
	// wait ends.
	_ = largeRequests.Acquire(context.Background(), size)
	now := largeBorrowed.Add(size)
	for {
		peak := largePeak.Load()
		if now <= peak || largePeak.CompareAndSwap(peak, now) {
			break
		}
	}
	if b, ok := largeBuffers[class].Get().(*[]byte); ok {
		return (*b)[:0]
	}
	return make([]byte, 0, size)
}

func returnLarge(buf []byte) {
	class, size := largeClass(int64(cap(buf)))
	largeBuffers[class].Put(&buf)
	largeBorrowed.Add(-size)
	largeRequests.Release(size)
}

// transmit serves requests until the client disconnects. On the window
// export, the range past the device's end reads as zeros and refuses
// writes (ENOSPC).
func (s *Server) transmit(c *conn, window bool) error {
	retained := make([]byte, 0, retainedBuffer)
	for {
		if err := s.serveRequest(c, window, retained); err != nil {
			if errors.Is(err, errDisconnect) {
				return nil
			}
			return err
		}
	}
}

// errDisconnect: the client said goodbye (NBD_CMD_DISC).
var errDisconnect = errors.New("the client disconnected")

// serveRequest reads one request and answers it, with retained as its
// buffer or one borrowed from the budget for large requests.
func (s *Server) serveRequest(c *conn, window bool, retained []byte) error {
	buf := retained
	magic, err := c.u32()
	if err != nil {
		return err
	}
	if magic != requestMagic {
		return fmt.Errorf("bad request magic %#x", magic)
	}
	flags, err := c.u16()
	if err != nil {
		return err
	}
	typ, err := c.u16()
	if err != nil {
		return err
	}
	handle, err := c.u64()
	if err != nil {
		return err
	}
	offset, err := c.u64()
	if err != nil {
		return err
	}
	length, err := c.u32()
	if err != nil {
		return err
	}
	if typ == cmdDisc {
		return errDisconnect
	}
	size := uint64(s.exportSize(window))
	inRange := length <= maxRequest && offset <= size && uint64(length) <= size-offset
	// past: the request reaches past the device's end (the window's
	// range the volume has not grown into).
	past := offset+uint64(length) > uint64(s.device.Size())
	if typ == cmdWrite && length > maxRequest {
		// The data cannot be skipped safely: end the connection.
		return fmt.Errorf("write of %d bytes exceeds the %d-byte limit", length, maxRequest)
	}
	if (typ == cmdRead || typ == cmdWrite) && length > retainedBuffer && length <= maxRequest {
		buf = borrowLarge(int64(length))
		defer returnLarge(buf)
		// What it borrowed is held while the client sends the data or
		// takes the answer: a client that stalls there is cut off
		// rather than keeping the budget from everyone else.
		if c.nc != nil {
			_ = c.nc.SetDeadline(time.Now().Add(largeRequestTimeout))
			defer c.nc.SetDeadline(time.Time{})
		}
	}
	var errno uint32
	var payload []byte
	switch typ {
	case cmdRead:
		if !inRange {
			errno = errInvalid
			break
		}
		payload = buf[:length]
		if err := s.read(payload, int64(offset), past); err != nil {
			errno, payload = ioErrno(err), nil
		}
	case cmdWrite:
		data := buf[:length]
		if _, err := io.ReadFull(c.r, data); err != nil {
			return err
		}
		if !inRange {
			errno = errInvalid
			break
		}
		if past {
			errno = errNoSpace
			break
		}
		errno = s.write(data, int64(offset), flags&cmdFlagFUA != 0)
	case cmdWriteZeroes:
		// Zeroes carry no payload: like a trim, the range is not
		// bounded by maxRequest (nbdcopy zeroes a file's holes so).
		if offset > size || uint64(length) > size-offset {
			errno = errInvalid
			break
		}
		if past {
			errno = errNoSpace
			break
		}
		errno = s.writeZeroes(&buf, int64(offset), int64(length), flags&cmdFlagFUA != 0)
	case cmdFlush:
		if err := s.device.Sync(); err != nil {
			errno = ioErrno(err)
		}
	case cmdTrim:
		errno = s.trim(int64(offset), int64(length), size, flags&cmdFlagFUA != 0)
	default:
		errno = errNotSup
	}
	if err := c.put(uint32(replyMagic), errno, handle); err != nil {
		return err
	}
	if errno == 0 && payload != nil {
		if _, err := c.w.Write(payload); err != nil {
			return err
		}
	}
	if err := c.w.Flush(); err != nil {
		return err
	}
	return nil
}

func (s *Server) write(data []byte, offset int64, fua bool) uint32 {
	if _, err := s.device.WriteAt(data, offset); err != nil {
		return ioErrno(err)
	}
	if fua {
		if err := s.device.Sync(); err != nil {
			return ioErrno(err)
		}
	}
	return 0
}

// writeZeroes writes zeros over [offset, offset+length), at most a
// connection's retained buffer at a time, then syncs once when fua asks.
func (s *Server) writeZeroes(buf *[]byte, offset, length int64, fua bool) uint32 {
	chunk := min(length, int64(cap(*buf)))
	zero := (*buf)[:chunk]
	clear(zero)
	for done := int64(0); done < length; done += chunk {
		n := min(chunk, length-done)
		if errno := s.write(zero[:n], offset+done, false); errno != 0 {
			return errno
		}
	}
	if fua {
		if err := s.device.Sync(); err != nil {
			return ioErrno(err)
		}
	}
	return 0
}

// trim gives back the space of a range within the export (size): a
// trim asks no data of the client, so it is not bounded by maxRequest.
// The window's part past the device's end holds nothing to give back.
func (s *Server) trim(offset, length int64, size uint64, fua bool) uint32 {
	t, ok := s.device.(Trimmer)
	if !ok {
		return errNotSup
	}
	if offset < 0 || length < 0 || uint64(offset) > size || uint64(length) > size-uint64(offset) {
		return errInvalid
	}
	if end := s.device.Size(); offset+length > end {
		length = max(end-offset, 0)
	}
	if length == 0 {
		return 0
	}
	if err := t.Trim(offset, length); err != nil {
		return ioErrno(err)
	}
	if fua {
		if err := s.device.Sync(); err != nil {
			return ioErrno(err)
		}
	}
	return 0
}

func ioErrno(err error) uint32 {
	switch {
	case errors.Is(err, syscall.ENOSPC):
		return errNoSpace
	case errors.Is(err, syscall.EROFS), errors.Is(err, syscall.EPERM):
		return errPerm
	}
	return errIO
}
