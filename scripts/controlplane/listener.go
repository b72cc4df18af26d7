package main

import (
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"
)

// multiListener accepts on several listeners as one, so that the apiserver
// (which serves one listener) answers on the loopback address, where the
// kubeconfig points, and on the node's address, where pods reach it
// through the kubernetes Service, without listening on every address of
// the machine. Addr is the first listener's.
type multiListener struct {
	listeners []net.Listener
	conns     chan net.Conn
	errs      chan error
	closed    chan struct{}
	closeOnce sync.Once
}

// listenOnAddresses listens on the same free port of each address.
func listenOnAddresses(addresses []net.IP) (net.Listener, error) {
	var lastErr error
	// Another program may take the port between the first listener and
	// the next; a few tries find one free on all addresses.
	for try := 0; try < 10; try++ {
		first, err := net.Listen("tcp", net.JoinHostPort(addresses[0].String(), "0"))
		if err != nil {
			return nil, fmt.Errorf("listen on %s: %w", addresses[0], err)
		}
		port := strconv.Itoa(first.Addr().(*net.TCPAddr).Port)
		listeners := []net.Listener{first}
		for _, addr := range addresses[1:] {
			l, err := net.Listen("tcp", net.JoinHostPort(addr.String(), port))
			if err != nil {
				lastErr = fmt.Errorf("listen on %s:%s: %w", addr, port, err)
				break
			}
			listeners = append(listeners, l)
		}
		if len(listeners) == len(addresses) {
			return newMultiListener(listeners), nil
		}
		for _, l := range listeners {
			l.Close()
		}
	}
	return nil, lastErr
}

func newMultiListener(listeners []net.Listener) *multiListener {
	m := &multiListener{listeners: listeners, conns: make(chan net.Conn), errs: make(chan error), closed: make(chan struct{})}
	for _, l := range listeners {
		go m.serve(l)
	}
	return m
}

func (m *multiListener) serve(l net.Listener) {
	for {
		conn, err := l.Accept()
		if err != nil {
			select {
			case m.errs <- err:
			case <-m.closed:
				return
			}
			var netErr net.Error
			if errors.As(err, &netErr) && netErr.Timeout() {
				continue
			}
			return
		}
		select {
		case m.conns <- conn:
		case <-m.closed:
			conn.Close()
			return
		}
	}
}

// Accept returns the next connection of any listener, or the error of one
// that failed.
func (m *multiListener) Accept() (net.Conn, error) {
	select {
	case conn := <-m.conns:
		return conn, nil
	case err := <-m.errs:
		return nil, err
	case <-m.closed:
		return nil, net.ErrClosed
	}
}

// Close closes every listener.
func (m *multiListener) Close() error {
	var errs []error
	m.closeOnce.Do(func() {
		close(m.closed)
		for _, l := range m.listeners {
			errs = append(errs, l.Close())
		}
	})
	return errors.Join(errs...)
}

func (m *multiListener) Addr() net.Addr { return m.listeners[0].Addr() }
