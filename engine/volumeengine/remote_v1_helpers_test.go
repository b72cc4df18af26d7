package volumeengine

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"io"
	"net"
	"sync"
	"testing"
)

// v1Server stands in front of a replica server as a server of version 1
// of the replica protocol would be: its open's reply says no version,
// and an op it does not know (above 8, OpChain) closes the connection.
// It parses the frames as that version framed them.
type v1Server struct {
	addr string
	// unknown counts the ops it did not know, each of which closed a
	// connection.
	mu      sync.Mutex
	unknown int
}

func serveAsVersion1(tb testing.TB, target string) *v1Server {
	tb.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	v := &v1Server{addr: l.Addr().String()}
	var conns sync.WaitGroup
	var mu sync.Mutex
	var open []net.Conn
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
			mu.Lock()
			open = append(open, c, s)
			mu.Unlock()
			conns.Go(func() { v.requests(c, s) })
			conns.Go(func() { v.replies(s, c) })
		}
	}()
	tb.Cleanup(func() {
		l.Close()
		mu.Lock()
		for _, c := range open {
			c.Close()
		}
		mu.Unlock()
		conns.Wait()
	})
	return v
}

// requests forwards the engine's requests, closing both sides at an op
// of a later version.
func (v *v1Server) requests(from, to net.Conn) {
	defer from.Close()
	defer to.Close()
	r := bufio.NewReader(from)
	hdr := make([]byte, 28)
	for {
		if _, err := io.ReadFull(r, hdr); err != nil {
			return
		}
		op, length := hdr[4], binary.BigEndian.Uint32(hdr[24:])
		if op > 8 {
			v.mu.Lock()
			v.unknown++
			v.mu.Unlock()
			return
		}
		n := 0
		if op == 1 || op == 3 || op == 6 { // open, write, snapshot
			n = int(length)
		}
		frame := append(hdr[:28:28], make([]byte, n)...)
		if _, err := io.ReadFull(r, frame[28:]); err != nil {
			return
		}
		if _, err := to.Write(frame); err != nil {
			return
		}
	}
}

// replies forwards the server's replies, the open's without its version.
func (v *v1Server) replies(from, to net.Conn) {
	defer from.Close()
	defer to.Close()
	r := bufio.NewReader(from)
	hdr := make([]byte, 28)
	if _, err := io.ReadFull(r, hdr); err != nil {
		return
	}
	body := make([]byte, binary.BigEndian.Uint32(hdr[24:]))
	if _, err := io.ReadFull(r, body); err != nil {
		return
	}
	if hdr[4] == 0 {
		var reply map[string]any
		if err := json.Unmarshal(body, &reply); err != nil {
			return
		}
		delete(reply, "version")
		body, _ = json.Marshal(reply)
		binary.BigEndian.PutUint32(hdr[24:], uint32(len(body)))
	}
	if _, err := to.Write(append(hdr, body...)); err != nil {
		return
	}
	_, _ = io.Copy(to, r)
}

func (v *v1Server) unknownOps() int {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.unknown
}
