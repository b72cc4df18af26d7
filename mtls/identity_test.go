package mtls

import (
	"crypto/tls"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
)

func identityOf(t *testing.T, a *Authority) *Identity {
	t.Helper()
	leaf, err := a.Issue(time.Now())
	if err != nil {
		t.Fatal(err)
	}
	return NewIdentity(leaf, a.Pool())
}

// handshake serves one TLS connection with server and dials it with
// client; it returns the client's error and the server's.
func handshake(t *testing.T, server, client *tls.Config) (clientErr, serverErr error) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	done := make(chan error, 1)
	go func() {
		c, err := l.Accept()
		if err != nil {
			done <- err
			return
		}
		defer c.Close()
		tc := tls.Server(c, server)
		err = tc.Handshake()
		if err == nil {
			_, err = tc.Write([]byte("ok"))
		}
		done <- err
	}()
	c, err := tls.Dial("tcp", l.Addr().String(), client)
	if err == nil {
		// TLS 1.3 checks the client's certificate after the client's side
		// of the handshake: the first read shows the refusal.
		_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
		buf := make([]byte, 2)
		_, err = io.ReadFull(c, buf)
		c.Close()
	}
	return err, <-done
}

func TestMutualTLSAcceptsOnlyTheClustersCA(t *testing.T) {
	now := time.Now()
	cluster := newAuthority(t, now)
	server, member := identityOf(t, cluster), identityOf(t, cluster)
	stranger := identityOf(t, newAuthority(t, now))

	if cErr, sErr := handshake(t, server.ServerConfig(), member.ClientConfig()); cErr != nil || sErr != nil {
		t.Fatalf("a member is refused: client %v, server %v", cErr, sErr)
	}
	noCert := &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS13} //nolint:gosec // a hostile client
	if _, sErr := handshake(t, server.ServerConfig(), noCert); sErr == nil {
		t.Error("a client without a certificate is served")
	}
	// A client of another CA that would talk to any server.
	hostile := stranger.ClientConfig()
	hostile.VerifyConnection = nil
	if _, sErr := handshake(t, server.ServerConfig(), hostile); sErr == nil || !strings.Contains(sErr.Error(), "internal CA") {
		t.Errorf("a client of another CA: %v", sErr)
	}
	if cErr, _ := handshake(t, stranger.ServerConfig(), member.ClientConfig()); cErr == nil {
		t.Error("a client accepts a server of another CA")
	}
}

func TestARotatedBundleAppliesToTheNextHandshake(t *testing.T) {
	now := time.Now()
	old, next := newAuthority(t, now), newAuthority(t, now)
	server := identityOf(t, old)
	both := &Authority{CAs: append(append([]CA{}, next.CAs...), old.CAs...)}
	// A peer that already has the rotated bundle, with a leaf of the new CA.
	newcomerLeaf, _ := next.Issue(now)
	newcomer := NewIdentity(newcomerLeaf, both.Pool())
	serverConfig := server.ServerConfig()
	if _, sErr := handshake(t, serverConfig, newcomer.ClientConfig()); sErr == nil {
		t.Fatal("a CA not in the bundle yet is trusted")
	}
	// The bundle gains the new CA, as a rotation does: the same config,
	// built once, now trusts it.
	leaf, _ := old.Issue(now)
	server.Set(leaf, both.Pool())
	if cErr, sErr := handshake(t, serverConfig, newcomer.ClientConfig()); sErr != nil || cErr != nil {
		t.Fatalf("after the rotation: client %v, server %v", cErr, sErr)
	}
}

func TestAnExpiredLeafIsRefused(t *testing.T) {
	now := time.Now()
	cluster := newAuthority(t, now)
	server := identityOf(t, cluster)
	leaf, err := cluster.Issue(now.Add(-LeafLifetime - time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	expired := NewIdentity(leaf, cluster.Pool())
	if _, sErr := handshake(t, server.ServerConfig(), expired.ClientConfig()); sErr == nil {
		t.Error("an expired client certificate is accepted")
	}
}

func TestAFolderIdentityTakesUpARenewedLeaf(t *testing.T) {
	now := time.Now()
	cluster := newAuthority(t, now)
	caPEM, _, _ := cluster.EncodeBundle()
	dir := t.TempDir()
	first, _ := cluster.Issue(now)
	if err := WriteDir(dir, caPEM, first); err != nil {
		t.Fatal(err)
	}
	id, err := LoadDir(dir, logrus.NewEntry(logrus.StandardLogger()))
	if err != nil {
		t.Fatal(err)
	}
	if !id.Leaf().Equal(first.Leaf) {
		t.Fatal("not the folder's leaf")
	}
	second, _ := cluster.Issue(now)
	if err := WriteDir(dir, caPEM, second); err != nil {
		t.Fatal(err)
	}
	defer func(d time.Duration) { reloadEvery = d }(reloadEvery)
	reloadEvery = 0
	if !id.Leaf().Equal(second.Leaf) {
		t.Error("the renewed leaf is not taken up")
	}
	// A folder broken later keeps the last good identity.
	if err := WriteDir(dir, []byte("junk"), second); err != nil {
		t.Fatal(err)
	}
	if !id.Leaf().Equal(second.Leaf) {
		t.Error("a broken folder replaced the identity")
	}
	if _, err := LoadDir(dir, nil); err == nil {
		t.Error("a broken folder loads")
	}
	if _, err := LoadDir(t.TempDir(), nil); err == nil {
		t.Error("an empty folder loads")
	}
}
