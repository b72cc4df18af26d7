// Package mtlstest gives tests identities of one test CA, as a cluster's
// components have: servers and clients built with them trust each other.
package mtlstest

import (
	"net"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/cadence-storage/longhorn-manager/mtls"
)

var (
	once    sync.Once
	cluster *mtls.Authority
	caErr   error
)

// Authority is the test CA, the same for the whole test binary.
func Authority(t testing.TB) *mtls.Authority {
	t.Helper()
	once.Do(func() {
		cluster = &mtls.Authority{}
		_, caErr = cluster.Rotate(time.Now())
	})
	if caErr != nil {
		t.Fatal(caErr)
	}
	return cluster
}

// Identity is a fresh leaf of the test CA.
func Identity(t testing.TB) *mtls.Identity {
	t.Helper()
	return IdentityOf(t, Authority(t))
}

// IdentityOf is a fresh leaf of a.
func IdentityOf(t testing.TB, a *mtls.Authority) *mtls.Identity {
	t.Helper()
	leaf, err := a.Issue(time.Now())
	if err != nil {
		t.Fatal(err)
	}
	return mtls.NewIdentity(leaf, a.Pool())
}

// Stranger is an identity of a CA of its own: what a pod that is not a
// Longhorn component could make for itself.
func Stranger(t testing.TB) *mtls.Identity {
	t.Helper()
	a := &mtls.Authority{}
	if _, err := a.Rotate(time.Now()); err != nil {
		t.Fatal(err)
	}
	return IdentityOf(t, a)
}

// Dir is a folder holding a leaf of the test CA, for --tls-dir.
func Dir(t testing.TB) string {
	t.Helper()
	a := Authority(t)
	leaf, err := a.Issue(time.Now())
	if err != nil {
		t.Fatal(err)
	}
	ca, _, err := a.EncodeBundle()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := mtls.WriteDir(dir, ca, leaf); err != nil {
		t.Fatal(err)
	}
	return dir
}

// ServeHTTPS serves h with mutual TLS, as a leaf of the test CA, on a
// free 127.0.0.1 port until the test ends; it returns host:port.
func ServeHTTPS(t testing.TB, h http.Handler) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := &http.Server{Handler: h, TLSConfig: Identity(t).ServerConfig(), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = hs.ServeTLS(l, "", "") }()
	t.Cleanup(func() { _ = hs.Close() })
	return l.Addr().String()
}
