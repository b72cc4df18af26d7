package mtls

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// writeCAFile writes the certificates of a's bundle to a file, as the CA
// ConfigMap is mounted.
func writeCAFile(t *testing.T, path string, a *Authority) {
	t.Helper()
	certs, _, err := a.EncodeBundle()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, certs, 0o644); err != nil {
		t.Fatal(err)
	}
}

// A client of the API accepts a manager's leaf of the CA in its file, and
// refuses a data source's leaf of the same CA, a leaf of another CA, and
// a CA file it cannot read; a file rewritten (a rotation reaching the
// mounted ConfigMap) applies to the next connection.
func TestAPIClientsCheckTheServerIsAManagerOfTheClustersCA(t *testing.T) {
	cluster, other := newAuthority(t, time.Now()), newAuthority(t, time.Now())
	caFile := filepath.Join(t.TempDir(), "ca.crt")
	writeCAFile(t, caFile, cluster)
	manager := identityOf(t, cluster)
	dataSource, err := cluster.IssueFor(time.Now(), RoleDataSource)
	if err != nil {
		t.Fatal(err)
	}
	client := APIClientConfig(caFile)

	if cerr, serr := handshake(t, manager.APIServerConfig(), client); cerr != nil || serr != nil {
		t.Fatalf("a manager of the cluster's CA: client %v, server %v", cerr, serr)
	}
	if cerr, _ := handshake(t, NewIdentity(dataSource, cluster.Pool()).APIServerConfig(), client); cerr == nil || !strings.Contains(cerr.Error(), "not a manager's") {
		t.Errorf("a data source's leaf passed for the API: %v", cerr)
	}
	if cerr, _ := handshake(t, identityOf(t, other).APIServerConfig(), client); cerr == nil || !strings.Contains(cerr.Error(), "does not verify") {
		t.Errorf("a leaf of another CA passed for the API: %v", cerr)
	}
	writeCAFile(t, caFile, other)
	if cerr, _ := handshake(t, identityOf(t, other).APIServerConfig(), client); cerr != nil {
		t.Errorf("after the CA file changed, a manager of its CA: %v", cerr)
	}
	if cerr, _ := handshake(t, manager.APIServerConfig(), APIClientConfig(filepath.Join(t.TempDir(), "none"))); cerr == nil || !strings.Contains(cerr.Error(), "read the internal CA bundle") {
		t.Errorf("no CA file: %v", cerr)
	}
	// The manager's own calls trust its identity's bundle.
	if cerr, _ := handshake(t, manager.APIServerConfig(), APIClientConfigOf(manager)); cerr != nil {
		t.Errorf("the manager calling its own API: %v", cerr)
	}
}
