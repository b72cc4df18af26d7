package framework

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	endian "encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// NBDBlockSize is the size of each write of an NBDWriter.
const NBDBlockSize = 4096

// nbdOrder is NBD's byte order (the package's name binary is taken).
var nbdOrder = endian.BigEndian

// NBDWriterOptions change how an NBDWriter writes.
type NBDWriterOptions struct {
	// Interval is the pause between writes (none when 0), to leave the
	// machine's CPUs to what the test does meanwhile.
	Interval time.Duration
	// Timeout bounds each request: one unanswered for so long is an
	// error and ends the connection. 10 s when 0.
	Timeout time.Duration
	// Reconnect dials again after a dropped connection. Off by default:
	// a volume that survives must keep its connection up.
	Reconnect bool
	// Seed picks the offsets.
	Seed uint64
}

// NBDWriterCounts is what an NBDWriter did so far.
type NBDWriterCounts struct {
	Acked, Errors int64
	FirstError    error
}

// NBDWriter writes 4 KiB blocks at pseudo-random offsets of an NBD export
// and remembers, per block, the last write the server acknowledged, so
// Verify can prove that no acknowledged write was lost or changed. Each
// block starts with its offset and the write's sequence number, so a
// wrong block read back says whose write it holds.
type NBDWriter struct {
	uri    string
	blocks int64
	opts   NBDWriterOptions
	stop   chan struct{}
	done   chan struct{}

	mu     sync.Mutex
	counts NBDWriterCounts

	// Only the writing goroutine touches these until done is closed.
	want  []uint64           // per block, the last acknowledged write's sequence number; 0 for none
	maybe map[int64][]uint64 // per block, writes since then that were sent but not acknowledged
}

// StartNBDWriter connects to uri (nbd://host:port/export) and writes over
// its first size bytes until Stop.
func StartNBDWriter(t testing.TB, uri string, size int64, opts NBDWriterOptions) *NBDWriter {
	t.Helper()
	w := &NBDWriter{uri: uri, blocks: size / NBDBlockSize, opts: opts, stop: make(chan struct{}), done: make(chan struct{}),
		want: make([]uint64, size/NBDBlockSize), maybe: map[int64][]uint64{}}
	if w.opts.Timeout == 0 {
		w.opts.Timeout = 10 * time.Second
	}
	c, err := dialNBD(uri, w.opts.Timeout)
	if err != nil {
		t.Fatalf("NBD writer: %v", err)
	}
	if c.size < size || w.blocks == 0 {
		c.close()
		t.Fatalf("NBD writer: %s has %d bytes, asked to write %d", uri, c.size, size)
	}
	go w.run(c)
	return w
}

// Counts is what the writer did so far.
func (w *NBDWriter) Counts() NBDWriterCounts {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.counts
}

// Stop ends the writes, flushes and disconnects, and returns the counts
// (a failed flush is an error too).
func (w *NBDWriter) Stop() NBDWriterCounts {
	select {
	case <-w.stop:
	default:
		close(w.stop)
	}
	<-w.done
	return w.Counts()
}

func (w *NBDWriter) run(c *nbdConn) {
	defer close(w.done)
	rng := rand.New(rand.NewPCG(w.opts.Seed, 47))
	buf := make([]byte, NBDBlockSize)
	for seq := uint64(1); ; seq++ {
		if c == nil {
			if c = w.redial(); c == nil {
				return
			}
		}
		block := rng.Int64N(w.blocks)
		fillBlock(buf, block*NBDBlockSize, seq)
		if _, err := c.do(nbdCmdWrite, block*NBDBlockSize, buf, 0); err != nil {
			w.maybe[block] = append(w.maybe[block], seq)
			w.fail(fmt.Errorf("write #%d at %d: %w", seq, block*NBDBlockSize, err))
		} else {
			w.want[block] = seq
			delete(w.maybe, block) // served in order: the acknowledged write is the last
			w.mu.Lock()
			w.counts.Acked++
			w.mu.Unlock()
		}
		if c.broken {
			c = nil
			if !w.opts.Reconnect {
				<-w.stop
				return
			}
		}
		select {
		case <-w.stop:
			if c != nil {
				if _, err := c.do(nbdCmdFlush, 0, nil, 0); err != nil {
					w.fail(fmt.Errorf("flush: %w", err))
				}
				c.close()
			}
			return
		case <-time.After(w.opts.Interval):
		}
	}
}

// redial connects again every 100 ms until it can or Stop.
func (w *NBDWriter) redial() *nbdConn {
	for {
		if c, err := dialNBD(w.uri, w.opts.Timeout); err == nil {
			return c
		}
		select {
		case <-w.stop:
			return nil
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func (w *NBDWriter) fail(err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.counts.Errors++
	if w.counts.FirstError == nil {
		w.counts.FirstError = err
	}
}

// NBDBadBlock is a block that does not hold its last acknowledged write.
type NBDBadBlock struct {
	Offset    int64
	Want, Got [sha256.Size]byte
	WantSeq   uint64
	Holds     string // whose write the block holds, as its header says
}

func (b NBDBadBlock) String() string {
	return fmt.Sprintf("block at offset %d: want write #%d (sha256 %x), got sha256 %x (%s)", b.Offset, b.WantSeq, b.Want[:8], b.Got[:8], b.Holds)
}

// Check reads every block ever acknowledged back over a new connection
// and returns how many it read and the wrong ones. A block also written
// since without an acknowledgement may hold that write instead.
func (w *NBDWriter) Check() (checked int, bad []NBDBadBlock, err error) {
	select {
	case <-w.done:
	default:
		return 0, nil, errors.New("check before Stop")
	}
	c, err := dialNBD(w.uri, w.opts.Timeout)
	if err != nil {
		return 0, nil, err
	}
	defer c.close()
	want := make([]byte, NBDBlockSize)
	for block, seq := range w.want {
		if seq == 0 {
			continue
		}
		off := int64(block) * NBDBlockSize
		got, err := c.do(nbdCmdRead, off, nil, NBDBlockSize)
		if err != nil {
			return checked, bad, fmt.Errorf("read at %d: %w", off, err)
		}
		checked++
		ok := false
		for _, s := range append([]uint64{seq}, w.maybe[int64(block)]...) {
			fillBlock(want, off, s)
			ok = ok || bytes.Equal(got, want)
		}
		if !ok {
			fillBlock(want, off, seq)
			bad = append(bad, NBDBadBlock{Offset: off, WantSeq: seq, Want: sha256.Sum256(want), Got: sha256.Sum256(got), Holds: holds(got)})
		}
	}
	return checked, bad, nil
}

// Verify is Check for a test: it fails naming each wrong block.
func (w *NBDWriter) Verify(t testing.TB) {
	t.Helper()
	checked, bad, err := w.Check()
	for i, b := range bad {
		if i == 50 {
			t.Errorf("... and %d more wrong blocks", len(bad)-i)
			break
		}
		t.Errorf("%s", b)
	}
	if err != nil {
		t.Fatalf("verifying %s: %v", w.uri, err)
	}
	t.Logf("verified %d acknowledged blocks of %s: %d wrong", checked, w.uri, len(bad))
}

// fillBlock makes write seq's content of the block at off: its offset and
// seq, then bytes drawn from both.
func fillBlock(b []byte, off int64, seq uint64) {
	nbdOrder.PutUint64(b, uint64(off))
	nbdOrder.PutUint64(b[8:], seq)
	_, _ = rand.NewChaCha8(sha256.Sum256(b[:16])).Read(b[16:])
}

func holds(got []byte) string {
	if bytes.Count(got, []byte{0}) == len(got) {
		return "zeros"
	}
	off, seq := nbdOrder.Uint64(got), nbdOrder.Uint64(got[8:])
	fill := make([]byte, len(got))
	fillBlock(fill, int64(off), seq)
	if bytes.Equal(fill, got) {
		return fmt.Sprintf("write #%d of offset %d", seq, off)
	}
	return "no write of this writer"
}

// The NBD protocol's constants a client needs (the fixed newstyle
// handshake and simple replies; engine/nbd/protocol.go has the server's).
const (
	nbdMagic          = 0x4e42444d41474943
	nbdOptMagic       = 0x49484156454f5054
	nbdOptReplyMagic  = 0x0003e889045565a9
	nbdRequestMagic   = 0x25609513
	nbdReplyMagic     = 0x67446698
	nbdOptExportName  = 1
	nbdOptGo          = 7
	nbdRepAck         = 1
	nbdRepInfo        = 3
	nbdRepErrUnsup    = 1<<31 + 1
	nbdFlagFixed      = 1 << 0
	nbdFlagNoZeroes   = 1 << 1
	nbdCmdRead        = 0
	nbdCmdWrite       = 1
	nbdCmdDisc        = 2
	nbdCmdFlush       = 3
	nbdMaxOptionReply = 64 << 10
)

// nbdConn is a client connection in transmission, one request at a time.
type nbdConn struct {
	nc      net.Conn
	r       *bufio.Reader
	size    int64
	timeout time.Duration
	handle  uint64
	broken  bool // the connection is unusable: closed, or a request went unanswered
}

func dialNBD(uri string, timeout time.Duration) (*nbdConn, error) {
	u, err := url.Parse(uri)
	if err != nil || u.Scheme != "nbd" {
		return nil, fmt.Errorf("%q is not an nbd:// URI", uri)
	}
	nc, err := net.DialTimeout("tcp", u.Host, timeout)
	if err != nil {
		return nil, err
	}
	c := &nbdConn{nc: nc, r: bufio.NewReader(nc), timeout: timeout}
	_ = nc.SetDeadline(time.Now().Add(timeout))
	if err := c.handshake(strings.TrimPrefix(u.Path, "/")); err != nil {
		nc.Close()
		return nil, fmt.Errorf("NBD handshake with %s: %w", uri, err)
	}
	return c, nil
}

func (c *nbdConn) handshake(export string) error {
	var hello [18]byte
	if _, err := io.ReadFull(c.r, hello[:]); err != nil {
		return err
	}
	flags := nbdOrder.Uint16(hello[16:])
	if nbdOrder.Uint64(hello[:]) != nbdMagic || nbdOrder.Uint64(hello[8:]) != nbdOptMagic || flags&nbdFlagFixed == 0 {
		return errors.New("not a fixed newstyle NBD server")
	}
	noZeroes := flags&nbdFlagNoZeroes != 0
	clientFlags := uint32(nbdFlagFixed)
	if noZeroes {
		clientFlags |= nbdFlagNoZeroes
	}
	goData := nbdOrder.AppendUint32(nil, uint32(len(export)))
	goData = nbdOrder.AppendUint16(append(goData, export...), 0) // no information requests
	if err := c.send(nbdOrder.AppendUint32(nil, clientFlags), c.option(nbdOptGo, goData)); err != nil {
		return err
	}
	for {
		var h [20]byte
		if _, err := io.ReadFull(c.r, h[:]); err != nil {
			return err
		}
		typ, n := nbdOrder.Uint32(h[12:]), nbdOrder.Uint32(h[16:])
		if nbdOrder.Uint64(h[:]) != nbdOptReplyMagic || n > nbdMaxOptionReply {
			return errors.New("bad option reply")
		}
		data := make([]byte, n)
		if _, err := io.ReadFull(c.r, data); err != nil {
			return err
		}
		switch {
		case typ == nbdRepInfo && n >= 12 && nbdOrder.Uint16(data) == 0: // NBD_INFO_EXPORT
			c.size = int64(nbdOrder.Uint64(data[2:]))
		case typ == nbdRepAck:
			return nil
		case typ == nbdRepErrUnsup: // an older server: NBD_OPT_EXPORT_NAME
			return c.exportName(export, noZeroes)
		case typ&(1<<31) != 0:
			return fmt.Errorf("export %q refused (reply %#x: %s)", export, typ, data)
		}
	}
}

func (c *nbdConn) exportName(export string, noZeroes bool) error {
	if err := c.send(c.option(nbdOptExportName, []byte(export))); err != nil {
		return err
	}
	reply := make([]byte, 10, 134)
	if !noZeroes {
		reply = reply[:134]
	}
	if _, err := io.ReadFull(c.r, reply); err != nil {
		return err
	}
	c.size = int64(nbdOrder.Uint64(reply))
	return nil
}

func (c *nbdConn) option(opt uint32, data []byte) []byte {
	b := nbdOrder.AppendUint64(nil, nbdOptMagic)
	b = nbdOrder.AppendUint32(b, opt)
	b = nbdOrder.AppendUint32(b, uint32(len(data)))
	return append(b, data...)
}

func (c *nbdConn) send(parts ...[]byte) error {
	_, err := c.nc.Write(slices.Concat(parts...))
	return err
}

// do sends one request and waits for its reply: data is a write's
// payload, readLen a read's length. A refusal by the server (its error
// number) leaves the connection usable; anything else breaks it.
func (c *nbdConn) do(cmd uint16, off int64, data []byte, readLen uint32) ([]byte, error) {
	if c.broken {
		return nil, errors.New("connection broken")
	}
	c.handle++
	length := readLen
	if cmd == nbdCmdWrite {
		length = uint32(len(data))
	}
	req := nbdOrder.AppendUint32(nil, nbdRequestMagic)
	req = nbdOrder.AppendUint16(req, 0)
	req = nbdOrder.AppendUint16(req, cmd)
	req = nbdOrder.AppendUint64(req, c.handle)
	req = nbdOrder.AppendUint64(req, uint64(off))
	req = nbdOrder.AppendUint32(req, length)
	_ = c.nc.SetDeadline(time.Now().Add(c.timeout))
	if err := c.send(req, data); err != nil {
		return nil, c.breakOn(err)
	}
	var reply [16]byte
	if _, err := io.ReadFull(c.r, reply[:]); err != nil {
		return nil, c.breakOn(err)
	}
	if nbdOrder.Uint32(reply[:]) != nbdReplyMagic || nbdOrder.Uint64(reply[8:]) != c.handle {
		return nil, c.breakOn(errors.New("bad reply"))
	}
	if errno := nbdOrder.Uint32(reply[4:]); errno != 0 {
		return nil, fmt.Errorf("the server answered error %d", errno)
	}
	if cmd != nbdCmdRead {
		return nil, nil
	}
	got := make([]byte, readLen)
	if _, err := io.ReadFull(c.r, got); err != nil {
		return nil, c.breakOn(err)
	}
	return got, nil
}

func (c *nbdConn) breakOn(err error) error {
	c.broken = true
	c.nc.Close()
	return err
}

// close disconnects politely (NBD_CMD_DISC has no reply).
func (c *nbdConn) close() {
	if !c.broken {
		req := nbdOrder.AppendUint32(nil, nbdRequestMagic)
		req = nbdOrder.AppendUint32(req, nbdCmdDisc) // flags 0, then the type
		req = append(req, make([]byte, 20)...)
		_ = c.send(req)
	}
	c.broken = true
	c.nc.Close()
}
