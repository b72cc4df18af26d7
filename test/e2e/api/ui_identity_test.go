//go:build e2e

package api

import (
	"context"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cadence-storage/longhorn-manager/app"
	"github.com/cadence-storage/longhorn-manager/test/e2e/framework"
)

// TestTheAPIAsDeployedServesTheUIsUsersAndNoTenant plays the doors of the
// issue's review against a manager as package/ deploys it
// (--api-auth=kubernetes, --api-token-audience, rbac-api-auth.yaml) and
// the UI's server as its
// pods run it (`longhorn-manager ui --token-file`, the longhorn-ui account
// of rbac-ui.yaml):
//   - through the UI, a request with no credential (as the UI's pages send
//     them) reads and writes as the UI's account, and one with a tenant's
//     token still acts as the UI: a browser's token never passes through;
//   - straight to the API, no token is a 401, so is a tenant pod's default
//     token (made for the apiserver), and a tenant's token for the API's
//     audience is a 403, for reading volumes and for turning the download
//     guard off;
//   - the UI may do what the administrator grants its account and no
//     more: with rbac-ui.yaml trimmed to its read rule, the UI reads and
//     may not create;
//   - the token file is read again on each request, as the kubelet
//     rotates it.
func TestTheAPIAsDeployedServesTheUIsUsersAndNoTenant(t *testing.T) {
	const audience = "longhorn-manager"
	e, _ := framework.KubernetesAuthAPIEnv(t, func(o *app.DaemonOptions) { o.APITokenAudience = audience })
	ctx := context.Background()

	tokenFile := filepath.Join(t.TempDir(), "token")
	writeToken := func(token string) {
		if err := os.WriteFile(tokenFile+".new", []byte(token+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		// As the kubelet updates a projected token: a rename, never a
		// half-written file.
		if err := os.Rename(tokenFile+".new", tokenFile); err != nil {
			t.Fatal(err)
		}
	}
	writeToken(framework.TokenOf(t, e.Kube, e.NS, "longhorn-ui", audience))
	dist := t.TempDir()
	if err := os.WriteFile(filepath.Join(dist, "index.html"), []byte("<html>ui</html>"), 0o644); err != nil {
		t.Fatal(err)
	}
	addr := framework.FreeAddress(t)
	ui := exec.Command(framework.ManagerBinary(t), "ui", "--dist", dist, "--listen", addr,
		"--manager-url", e.Base, "--token-file", tokenFile)
	ui.Stdout, ui.Stderr = os.Stderr, os.Stderr
	if err := ui.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ui.Process.Kill(); _ = ui.Wait() })
	uiEnv := &framework.APIEnv{ManagerEnv: e.ManagerEnv, Base: "http://" + addr}
	framework.Eventually(t, 30*time.Second, "the UI's server up", func() (bool, error) {
		resp, err := http.Get(uiEnv.Base + "/")
		if err != nil {
			return false, nil
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, nil
	})

	// A tenant: a ServiceAccount of another namespace, bound to nothing.
	tenantNS := e.Cluster.NewPlainNamespace(t)
	if _, err := e.Kube.CoreV1().ServiceAccounts(tenantNS).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "tenant"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	tenantDefault := framework.TokenOf(t, e.Kube, tenantNS, "tenant")
	tenant := framework.TokenOf(t, e.Kube, tenantNS, "tenant", audience)
	const disableGuard = `{"value":"0.0.0.0/0"}`
	const guardPath = "/v1/settings/backing-image-download-allowed-ranges"

	t.Run("through the UI", func(t *testing.T) {
		uiEnv.Call(t, "GET", "/v1/volumes", "").Expect(t, http.StatusOK)
		uiEnv.Call(t, "POST", "/v1/volumes", `{"name":"by-the-ui","size":"16777216","numberOfReplicas":1}`).Expect(t, http.StatusOK)
		uiEnv.Call(t, "GET", "/v1/volumes/by-the-ui", "", "Authorization", "Bearer "+tenant).Expect(t, http.StatusOK)
		uiEnv.Call(t, "GET", "/v1/volumes", "", "Authorization", "Bearer not-a-token").Expect(t, http.StatusOK)
	})
	t.Run("straight to the API", func(t *testing.T) {
		e.Call(t, "GET", "/v1/volumes", "").Expect(t, http.StatusUnauthorized, "bearer token")
		e.Call(t, "PUT", guardPath, disableGuard).Expect(t, http.StatusUnauthorized)
		e.Call(t, "GET", "/v1/volumes", "", "Authorization", "Bearer "+tenantDefault).Expect(t, http.StatusUnauthorized, "audience "+audience)
		e.Call(t, "PUT", guardPath, disableGuard, "Authorization", "Bearer "+tenantDefault).Expect(t, http.StatusUnauthorized)
		e.Call(t, "GET", "/v1/volumes", "", "Authorization", "Bearer "+tenant).Expect(t, http.StatusForbidden, "system:serviceaccount:"+tenantNS+":tenant", "list volumes.longhorn.io")
		e.Call(t, "PUT", guardPath, disableGuard, "Authorization", "Bearer "+tenant).Expect(t, http.StatusForbidden, "update settings.longhorn.io")
		e.Call(t, "DELETE", "/v1/volumes/by-the-ui", "", "Authorization", "Bearer "+tenant).Expect(t, http.StatusForbidden, "delete volumes.longhorn.io")
	})
	t.Run("the UI has the rights its account is granted", func(t *testing.T) {
		role, err := e.Kube.RbacV1().Roles(e.NS).Get(ctx, "longhorn-ui", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		role.Rules = []rbacv1.PolicyRule{role.Rules[0]}
		if _, err := e.Kube.RbacV1().Roles(e.NS).Update(ctx, role, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		// A refused access is never cached; the authorizer learns of the
		// Role's change from a watch.
		framework.Eventually(t, 30*time.Second, "the UI refused a create once its Role is read-only", func() (bool, error) {
			r := uiEnv.Call(t, "POST", "/v1/volumes", `{"name":"refused","size":"16777216","numberOfReplicas":1}`)
			return r.Status == http.StatusForbidden && strings.Contains(r.Raw, "system:serviceaccount:"+e.NS+":longhorn-ui"), nil
		})
		uiEnv.Call(t, "GET", "/v1/volumes/by-the-ui", "").Expect(t, http.StatusOK)
	})
	t.Run("a rotated token is used at once", func(t *testing.T) {
		writeToken("not-a-token")
		uiEnv.Call(t, "GET", "/v1/volumes", "").Expect(t, http.StatusUnauthorized, "not valid")
		writeToken(framework.TokenOf(t, e.Kube, e.NS, "longhorn-ui", audience))
		uiEnv.Call(t, "GET", "/v1/volumes", "").Expect(t, http.StatusOK)
	})
}
