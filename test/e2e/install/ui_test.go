//go:build e2enode

package install

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cadence-storage/longhorn-manager/test/e2e/cluster"
)

// checkUI calls Longhorn's UI through its Service, longhorn-frontend, as
// a browser behind the cluster's login would: with the token of a user
// bound to longhorn-ui-viewer, made for the manager's API (the UI passes
// it through), it lists volume; with no login it answers 401.
func checkUI(t *testing.T, c *cluster.Cluster, volume string) {
	t.Helper()
	ctx := context.Background()
	client := c.KubeClient(t)
	const viewer = "ui-viewer"
	if _, err := client.CoreV1().ServiceAccounts(namespace).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: viewer}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	binding := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: viewer},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: "longhorn-ui-viewer"},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: viewer, Namespace: namespace}},
	}
	if _, err := client.RbacV1().RoleBindings(namespace).Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	tr, err := client.CoreV1().ServiceAccounts(namespace).CreateToken(ctx, viewer, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{Audiences: []string{"longhorn-manager"}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	svc, err := client.CoreV1().Services(namespace).Get(ctx, "longhorn-frontend", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// From the node, as the ingress controller's pods would reach it: the
	// Service's cluster IP, which kube-proxy sends to a UI pod.
	url := "http://" + svc.Spec.ClusterIP + "/v1/volumes"
	get := func(token string) (int, string) {
		t.Helper()
		req, err := http.NewRequest(http.MethodGet, url, nil)
		if err != nil {
			t.Fatal(err)
		}
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := (&http.Client{Timeout: 10 * time.Second}).Do(req)
		if err != nil {
			t.Fatalf("GET %s: %v", url, err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		return resp.StatusCode, string(body)
	}
	if code, body := get(tr.Status.Token); code != http.StatusOK || !strings.Contains(body, volume) {
		t.Errorf("GET %s as a longhorn-ui-viewer: %d, want 200 listing %s: %.300s", url, code, volume, body)
	}
	if code, body := get(""); code != http.StatusUnauthorized {
		t.Errorf("GET %s with no login: %d, want 401: %.300s", url, code, body)
	}
}
