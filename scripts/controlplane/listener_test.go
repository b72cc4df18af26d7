package main

import (
	"errors"
	"io"
	"net"
	"strconv"
	"testing"
)

// The listener takes connections on each address, on one port, names the
// first address as its own, and stops taking them once closed.
func TestMultiListenerAcceptsOnEachAddress(t *testing.T) {
	// 127.0.0.2 is loopback too on Linux: two addresses without a device.
	addresses := []net.IP{net.IPv4(127, 0, 0, 1), net.IPv4(127, 0, 0, 2)}
	l, err := listenOnAddresses(addresses)
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().(*net.TCPAddr)
	if !addr.IP.Equal(addresses[0]) {
		t.Errorf("Addr %s, want the first address %s", addr, addresses[0])
	}
	go func() {
		for {
			conn, err := l.Accept()
			if err != nil {
				return
			}
			conn.Write([]byte("ok"))
			conn.Close()
		}
	}()
	for _, ip := range addresses {
		conn, err := net.Dial("tcp", net.JoinHostPort(ip.String(), strconv.Itoa(addr.Port)))
		if err != nil {
			t.Fatalf("dial %s: %v", ip, err)
		}
		got, _ := io.ReadAll(conn)
		conn.Close()
		if string(got) != "ok" {
			t.Errorf("%s answered %q", ip, got)
		}
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Accept(); !errors.Is(err, net.ErrClosed) {
		t.Errorf("Accept after Close: %v, want net.ErrClosed", err)
	}
	if conn, err := net.Dial("tcp", net.JoinHostPort(addresses[1].String(), strconv.Itoa(addr.Port))); err == nil {
		conn.Close()
		t.Error("the second address still takes connections after Close")
	}
}
