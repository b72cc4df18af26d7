//go:build e2e

package api

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cadence-storage/longhorn-manager/app"
	"github.com/cadence-storage/longhorn-manager/test/e2e/framework"
)

const uiAudience = "longhorn-manager"

// startUI runs the UI's server as its pods do (`longhorn-manager ui`) with
// args, and waits until it serves; scheme is http or https.
func startUI(t *testing.T, e *framework.APIEnv, scheme string, client *http.Client, args ...string) *framework.APIEnv {
	t.Helper()
	dist := t.TempDir()
	if err := os.WriteFile(filepath.Join(dist, "index.html"), []byte("<html>ui</html>"), 0o644); err != nil {
		t.Fatal(err)
	}
	addr := framework.FreeAddress(t)
	ui := exec.Command(framework.ManagerBinary(t), append([]string{"ui", "--dist", dist, "--listen", addr, "--manager-url", e.Base}, args...)...)
	ui.Stdout, ui.Stderr = os.Stderr, os.Stderr
	if err := ui.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ui.Process.Kill(); _ = ui.Wait() })
	uiEnv := &framework.APIEnv{ManagerEnv: e.ManagerEnv, Base: scheme + "://" + addr, HTTP: client}
	if client == nil {
		client = http.DefaultClient
	}
	framework.Eventually(t, 30*time.Second, "the UI's server up", func() (bool, error) {
		resp, err := client.Get(uiEnv.Base + "/")
		if err != nil {
			return false, nil
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, nil
	})
	return uiEnv
}

// TestTheUIServesEachUserAsThemselves plays the doors of the issue's
// review against a manager as package/ deploys it (--api-auth=kubernetes,
// --api-token-audience, rbac-api-auth.yaml, rbac-ui.yaml) and the UI's
// server as its pods run it (`longhorn-manager ui`, no token of its own):
//   - through the UI, a request with no login of the user's is a 401 that
//     says to log in, forged identity headers or not (issue: the UI sent
//     every request as its own account);
//   - a user's own token passes through: the operator (rbac-ui.yaml's
//     longhorn-ui-operator) reads and creates, a tenant is refused (403,
//     named);
//   - the UI's own account may do nothing on longhorn.io (issue: its Role
//     could delete volumes, change settings, create backup targets and
//     system restores), at the apiserver's RBAC and at the API.
func TestTheUIServesEachUserAsThemselves(t *testing.T) {
	e, _ := framework.KubernetesAuthAPIEnv(t, func(o *app.DaemonOptions) { o.APITokenAudience = uiAudience })
	ctx := context.Background()
	ui := startUI(t, e, "http", nil)
	e.UIUser(t, "operator", "longhorn-ui-operator")
	operator := framework.TokenOf(t, e.Kube, e.NS, "operator", uiAudience)
	tenantNS := e.Cluster.NewPlainNamespace(t)
	if _, err := e.Kube.CoreV1().ServiceAccounts(tenantNS).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "tenant"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	tenant := framework.TokenOf(t, e.Kube, tenantNS, "tenant", uiAudience)

	t.Run("no login", func(t *testing.T) {
		ui.Call(t, "GET", "/v1/volumes", "").Expect(t, http.StatusUnauthorized, "not logged in", "docs/api.md")
		ui.Call(t, "POST", "/v1/volumes", `{"name":"no-login","size":"16777216","numberOfReplicas":1}`).Expect(t, http.StatusUnauthorized)
		ui.Call(t, "GET", "/v1/volumes", "", "X-Remote-User", "system:admin", "X-Remote-Group", "system:masters").Expect(t, http.StatusUnauthorized, "not logged in")
		ui.Call(t, "GET", "/v1/volumes", "", "Impersonate-User", "system:admin").Expect(t, http.StatusUnauthorized, "not logged in")
	})
	t.Run("the user's own token", func(t *testing.T) {
		ui.Call(t, "POST", "/v1/volumes", `{"name":"by-the-operator","size":"16777216","numberOfReplicas":1}`, "Authorization", "Bearer "+operator).Expect(t, http.StatusOK)
		ui.Call(t, "GET", "/v1/volumes/by-the-operator", "", "Authorization", "Bearer "+operator).Expect(t, http.StatusOK)
		ui.Call(t, "GET", "/v1/volumes", "", "Authorization", "Bearer "+tenant).Expect(t, http.StatusForbidden, "system:serviceaccount:"+tenantNS+":tenant", "list volumes.longhorn.io")
		ui.Call(t, "DELETE", "/v1/volumes/by-the-operator", "", "Authorization", "Bearer "+tenant).Expect(t, http.StatusForbidden, "delete volumes.longhorn.io")
	})
	t.Run("the UI's own account may do nothing", func(t *testing.T) {
		uiUser := "system:serviceaccount:" + e.NS + ":longhorn-ui"
		for _, ra := range []authorizationv1.ResourceAttributes{
			{Verb: "list", Resource: "volumes"}, {Verb: "delete", Resource: "volumes"}, {Verb: "update", Resource: "settings"},
			{Verb: "create", Resource: "backuptargets"}, {Verb: "create", Resource: "systemrestores"}, {Verb: "delete", Resource: "backups"},
		} {
			ra.Namespace, ra.Group = e.NS, "longhorn.io"
			sar, err := e.Kube.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
				User: uiUser, Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + e.NS, "system:authenticated"}, ResourceAttributes: &ra,
			}}, metav1.CreateOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if sar.Status.Allowed {
				t.Errorf("the UI's account may %s %s", ra.Verb, ra.Resource)
			}
		}
		own := framework.TokenOf(t, e.Kube, e.NS, "longhorn-ui", uiAudience)
		e.Call(t, "GET", "/v1/volumes", "", "Authorization", "Bearer "+own).Expect(t, http.StatusForbidden, uiUser)
		e.Call(t, "DELETE", "/v1/volumes/by-the-operator", "", "Authorization", "Bearer "+own).Expect(t, http.StatusForbidden, uiUser)
	})
}

// TestTheUIPassesOnTheUserItsAuthenticatingProxyNames runs the UI's
// server behind an authenticating proxy (identity headers, a client
// certificate of the proxy's CA) against the real apiserver's RBAC:
//   - the proxy's user reaches the manager as the UI's account
//     impersonating them, honoured only once rbac-ui-impersonate.yaml
//     lets that account impersonate (before: 403, naming the refusal);
//   - the request is then authorized as the user and their groups:
//     alice, bound to longhorn-ui-viewer, reads and may not create; in
//     the group longhorn-operators (bound to longhorn-ui-operator) she
//     creates;
//   - the same headers from a client without the proxy's certificate are
//     dropped: a 401, never the UI's account or the named user;
//   - straight to the API, a tenant's token with Impersonate-User is
//     refused (403), not served as the tenant;
//   - the UI's token file is read again on each request, as the kubelet
//     rotates it.
func TestTheUIPassesOnTheUserItsAuthenticatingProxyNames(t *testing.T) {
	e, _ := framework.KubernetesAuthAPIEnv(t, func(o *app.DaemonOptions) { o.APITokenAudience = uiAudience })
	ctx := context.Background()
	dir := t.TempDir()
	proxyCA := newE2ECA(t, "front-proxy-ca")
	servingCA := newE2ECA(t, "ui-serving-ca")
	writePEM(t, filepath.Join(dir, "proxy-ca.crt"), "CERTIFICATE", proxyCA.cert.Raw)
	serving := servingCA.issue(t, "longhorn-frontend", x509.ExtKeyUsageServerAuth)
	writePEM(t, filepath.Join(dir, "tls.crt"), "CERTIFICATE", serving.Certificate[0])
	keyDER, err := x509.MarshalECPrivateKey(serving.PrivateKey.(*ecdsa.PrivateKey))
	if err != nil {
		t.Fatal(err)
	}
	writePEM(t, filepath.Join(dir, "tls.key"), "EC PRIVATE KEY", keyDER)
	tokenFile := filepath.Join(dir, "token")
	writeToken := func(token string) {
		// As the kubelet updates a projected token: a rename, never a
		// half-written file.
		if err := os.WriteFile(tokenFile+".new", []byte(token+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tokenFile+".new", tokenFile); err != nil {
			t.Fatal(err)
		}
	}
	writeToken(framework.TokenOf(t, e.Kube, e.NS, "longhorn-ui", uiAudience))
	roots := x509.NewCertPool()
	roots.AddCert(servingCA.cert)
	client := func(certs ...tls.Certificate) *http.Client {
		return &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots, ServerName: "longhorn-frontend", Certificates: certs}}}
	}
	proxyClient := client(proxyCA.issue(t, "ingress-nginx", x509.ExtKeyUsageClientAuth))
	ui := startUI(t, e, "https", proxyClient, "--requestheader-client-ca-file", filepath.Join(dir, "proxy-ca.crt"),
		"--requestheader-allowed-names", "ingress-nginx", "--tls-cert-file", filepath.Join(dir, "tls.crt"),
		"--tls-private-key-file", filepath.Join(dir, "tls.key"), "--token-file", tokenFile)
	notProxy := &framework.APIEnv{ManagerEnv: e.ManagerEnv, Base: ui.Base, HTTP: client()}

	// alice may read; the group longhorn-operators may do all the UI does.
	for name, subject := range map[string]rbacv1.Subject{
		"longhorn-ui-viewer":   {Kind: "User", APIGroup: "rbac.authorization.k8s.io", Name: "alice"},
		"longhorn-ui-operator": {Kind: "Group", APIGroup: "rbac.authorization.k8s.io", Name: "longhorn-operators"},
	} {
		if _, err := e.Kube.RbacV1().RoleBindings(e.NS).Create(ctx, &rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: name + "-users"},
			RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: name},
			Subjects:   []rbacv1.Subject{subject},
		}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	const create = `{"name":"by-alice","size":"16777216","numberOfReplicas":1}`

	t.Run("before the UI may impersonate", func(t *testing.T) {
		ui.Call(t, "GET", "/v1/volumes", "", "X-Remote-User", "alice").
			Expect(t, http.StatusForbidden, "system:serviceaccount:"+e.NS+":longhorn-ui may not impersonate users", "rbac-ui-impersonate.yaml")
	})
	// As an administrator opts in: package/components/ui-impersonation/rbac-ui-impersonate.yaml, its
	// cluster-wide names made the test namespace's own.
	for _, obj := range framework.ReadManifests(t, "components/ui-impersonation/rbac-ui-impersonate.yaml") {
		switch o := obj.(type) {
		case *rbacv1.ClusterRole:
			o.Name += "-" + e.NS
			if _, err := e.Kube.RbacV1().ClusterRoles().Create(ctx, o, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() {
				_ = e.Kube.RbacV1().ClusterRoles().Delete(context.Background(), o.Name, metav1.DeleteOptions{})
			})
		case *rbacv1.ClusterRoleBinding:
			o.Name += "-" + e.NS
			o.RoleRef.Name += "-" + e.NS
			o.Subjects[0].Namespace = e.NS
			if _, err := e.Kube.RbacV1().ClusterRoleBindings().Create(ctx, o, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() {
				_ = e.Kube.RbacV1().ClusterRoleBindings().Delete(context.Background(), o.Name, metav1.DeleteOptions{})
			})
		default:
			t.Fatalf("rbac-ui-impersonate.yaml holds an unexpected %T", obj)
		}
	}
	// A refused access is remembered a few seconds; the authorizer learns
	// of the binding from a watch.
	framework.Eventually(t, 30*time.Second, "the UI may impersonate alice", func() (bool, error) {
		return ui.Call(t, "GET", "/v1/volumes", "", "X-Remote-User", "alice").Status == http.StatusOK, nil
	})

	t.Run("as the user and groups the proxy names", func(t *testing.T) {
		ui.Call(t, "POST", "/v1/volumes", create, "X-Remote-User", "alice").Expect(t, http.StatusForbidden, "alice may not create volumes.longhorn.io")
		ui.Call(t, "POST", "/v1/volumes", create, "X-Remote-User", "alice", "X-Remote-Group", "longhorn-operators").Expect(t, http.StatusOK)
		ui.Call(t, "GET", "/v1/volumes/by-alice", "", "X-Remote-User", "alice").Expect(t, http.StatusOK)
	})
	t.Run("headers from a client that is not the proxy", func(t *testing.T) {
		notProxy.Call(t, "GET", "/v1/volumes", "", "X-Remote-User", "alice", "X-Remote-Group", "longhorn-operators").Expect(t, http.StatusUnauthorized, "not logged in")
		other := newE2ECA(t, "another-ca")
		forged := &framework.APIEnv{ManagerEnv: e.ManagerEnv, Base: ui.Base, HTTP: client(other.issue(t, "ingress-nginx", x509.ExtKeyUsageClientAuth))}
		forged.Call(t, "DELETE", "/v1/volumes/by-alice", "", "X-Remote-User", "alice", "X-Remote-Group", "longhorn-operators").Expect(t, http.StatusUnauthorized)
	})
	t.Run("straight to the API", func(t *testing.T) {
		tenantNS := e.Cluster.NewPlainNamespace(t)
		if _, err := e.Kube.CoreV1().ServiceAccounts(tenantNS).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "tenant"}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		tenant := framework.TokenOf(t, e.Kube, tenantNS, "tenant", uiAudience)
		e.Call(t, "DELETE", "/v1/volumes/by-alice", "", "Authorization", "Bearer "+tenant, "Impersonate-User", "alice", "Impersonate-Group", "longhorn-operators").
			Expect(t, http.StatusForbidden, "system:serviceaccount:"+tenantNS+":tenant may not impersonate users")
		e.Call(t, "GET", "/v1/volumes", "", "Authorization", "Bearer "+tenant, "Impersonate-Group", "longhorn-operators").Expect(t, http.StatusBadRequest, "Impersonate-User")
	})
	t.Run("a rotated token is used at once", func(t *testing.T) {
		writeToken("not-a-token")
		ui.Call(t, "GET", "/v1/volumes", "", "X-Remote-User", "alice").Expect(t, http.StatusUnauthorized, "not valid")
		writeToken(framework.TokenOf(t, e.Kube, e.NS, "longhorn-ui", uiAudience))
		ui.Call(t, "GET", "/v1/volumes", "", "X-Remote-User", "alice").Expect(t, http.StatusOK)
	})
}

// e2eCA issues certificates for the test's proxy and the UI's server.
type e2eCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
}

func newE2ECA(t *testing.T, name string) *e2eCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return &e2eCA{cert: cert, key: key}
}

// issue is a certificate of the CA named cn (also its DNS name and, for
// a server, 127.0.0.1) for usage.
func (ca *e2eCA) issue(t *testing.T, cn string, usage x509.ExtKeyUsage) tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), DNSNames: []string{cn},
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
		KeyUsage:    x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{usage}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

func writePEM(t *testing.T, path, kind string, der []byte) {
	t.Helper()
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: kind, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
}
