package nbd

import (
	"io"
	"net"
	"strings"
	"testing"
	"time"
)

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
	_, addr := serveWith(t, func(s *Server) { s.HandshakeTimeout = 300 * time.Millisecond })
	uri := "nbd://" + addr + "/vol"
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
	_, addr := serveWith(t, func(s *Server) { s.MaxConnections = 2 })
	uri := "nbd://" + addr + "/vol"
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
