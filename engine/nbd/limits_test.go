package nbd

import (
	"io"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/cadence-storage/longhorn-manager/engine/replica"
)

// serveWith exports a fresh replica with the server's bounds changed.
func serveWith(t *testing.T, set func(*Server)) (string, string) {
	t.Helper()
	r, err := replica.Create(filepath.Join(t.TempDir(), "r"), size)
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	log := logrus.New()
	log.SetLevel(logrus.PanicLevel)
	s := NewServer("vol", r, logrus.NewEntry(log))
	set(s)
	go s.Serve(l)
	t.Cleanup(func() { s.Close(); r.Close() })
	return l.Addr().String(), "nbd://" + l.Addr().String() + "/vol"
}

// closedWithin reports whether the server ends the connection within d
// (reading what it sent first).
func closedWithin(c net.Conn, d time.Duration) bool {
	_ = c.SetReadDeadline(time.Now().Add(d))
	_, err := io.Copy(io.Discard, c)
	return err == nil // EOF: closed by the server; a timeout is an error
}

// A client that connects and never finishes the handshake is cut off
// after the handshake timeout, so idle sockets cannot pile up; one that
// goes on to transmission is not (a mounted file system may be quiet for
// hours).
func TestAHandshakeThatStallsIsCutOff(t *testing.T) {
	addr, uri := serveWith(t, func(s *Server) { s.HandshakeTimeout = 300 * time.Millisecond })
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if !closedWithin(c, 5*time.Second) {
		t.Fatal("a connection that sent nothing was kept past the handshake timeout")
	}
	// A real client, quiet for longer than the handshake timeout between
	// its commands, keeps its connection.
	run(t, "qemu-io", "-f", "raw", uri, "-c", "write -P 0x22 0 4k", "-c", "sleep 800", "-c", "read -P 0x22 0 4k")
}

// Connections beyond MaxConnections are closed at once; those within go
// on, and a place freed is taken again.
func TestConnectionsAreCapped(t *testing.T) {
	addr, uri := serveWith(t, func(s *Server) { s.MaxConnections = 2 })
	var held []net.Conn
	for i := 0; i < 2; i++ {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		held = append(held, c)
	}
	time.Sleep(100 * time.Millisecond) // both accepted
	extra, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer extra.Close()
	if !closedWithin(extra, 5*time.Second) {
		t.Fatal("a third connection was served with MaxConnections 2")
	}
	held[0].Close()
	time.Sleep(100 * time.Millisecond)
	out := run(t, "qemu-io", "-f", "raw", uri, "-c", "read 0 4k")
	if !strings.Contains(out, "read 4096/4096") {
		t.Fatalf("a connection in the place freed: %s", out)
	}
}
