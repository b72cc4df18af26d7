package app

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/cadence-storage/longhorn-manager/api"
	"github.com/cadence-storage/longhorn-manager/k8s/testcluster"
)

// serviceAccountToken makes a ServiceAccount and returns a token for it
// from the TokenRequest API, as a pod's projected token would be.
func serviceAccountToken(t *testing.T, kube kubernetes.Interface, ns, name string) string {
	t.Helper()
	ctx := context.Background()
	if _, err := kube.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	expiry := int64(3600)
	tr, err := kube.CoreV1().ServiceAccounts(ns).CreateToken(ctx, name, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &expiry},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("TokenRequest for %s: %v", name, err)
	}
	return tr.Status.Token
}

// TestAPIKubernetesAuth runs the daemon with --api-auth=kubernetes and
// calls it as two ServiceAccounts: "operator", bound to a Role that
// allows reading volumes, creating them and their actions (but not
// deleting them), and "stranger", bound to nothing.
func TestAPIKubernetesAuth(t *testing.T) {
	t.Parallel()
	e, d := kubernetesAuthAPIEnv(t)
	ns, kube := e.ns, e.kube
	ctx := context.Background()

	operator := serviceAccountToken(t, kube, ns, "operator")
	stranger := serviceAccountToken(t, kube, ns, "stranger")
	role := &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Name: "longhorn-volume-operator"},
		Rules: []rbacv1.PolicyRule{{
			APIGroups: []string{"longhorn.io"}, Resources: []string{"volumes"},
			Verbs: []string{"get", "list", "watch", "create", "update"},
		}},
	}
	if _, err := kube.RbacV1().Roles(ns).Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	binding := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "operator"},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: role.Name},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: "operator", Namespace: ns}},
	}
	if _, err := kube.RbacV1().RoleBindings(ns).Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	bearer := func(token string) []string { return []string{"Authorization", "Bearer " + token} }

	// The kubelet's probes need no token.
	e.call(t, "GET", "/healthz", "").expect(t, 200)
	e.call(t, "GET", "/readyz", "").expect(t, 200)

	// No token, a malformed header, a forged token: 401.
	r := e.call(t, "GET", "/v1/volumes", "").expect(t, 401, "bearer token")
	if !strings.HasPrefix(r.header.Get("WWW-Authenticate"), "Bearer") {
		t.Errorf("WWW-Authenticate %q", r.header.Get("WWW-Authenticate"))
	}
	e.call(t, "GET", "/v1/volumes", "", "Authorization", "Basic YWRtaW46YWRtaW4=").expect(t, 401, "Bearer")
	e.call(t, "GET", "/v1/volumes", "", bearer("not-a-token")...).expect(t, 401, "not valid")
	e.call(t, "GET", "/v1", "").expect(t, 401)

	// The binding reaches the apiserver's authorizer through a watch.
	eventually(t, 10*time.Second, "the operator's Role in force", func() (bool, error) {
		return e.call(t, "GET", "/v1/volumes", "", bearer(operator)...).status == 200, nil
	})

	// The stranger is authenticated but allowed nothing.
	e.call(t, "GET", "/v1", "", bearer(stranger)...).expect(t, 200)
	e.call(t, "GET", "/v1/volumes", "", bearer(stranger)...).expect(t, 403,
		"system:serviceaccount:"+ns+":stranger", "list volumes.longhorn.io", "namespace "+ns)
	e.call(t, "POST", "/v1/volumes", `{"name":"v1","size":"1Mi"}`, bearer(stranger)...).expect(t, 403, "create volumes.longhorn.io")
	e.call(t, "GET", "/v1/settings", "", bearer(stranger)...).expect(t, 403, "list settings.longhorn.io")
	e.call(t, "GET", "/metrics", "", bearer(stranger)...).expect(t, 403, "get /metrics")

	// The operator may do what its Role says, and no more.
	e.call(t, "POST", "/v1/volumes", `{"name":"v1","size":"1Mi"}`, bearer(operator)...).expect(t, 200)
	eventually(t, 10*time.Second, "the volume in the cache", func() (bool, error) {
		return e.call(t, "GET", "/v1/volumes/v1", "", bearer(operator)...).status == 200, nil
	})
	e.call(t, "GET", "/v1/volumes/v1", "", bearer(stranger)...).expect(t, 403, `get volumes.longhorn.io \"v1\"`)
	e.call(t, "POST", "/v1/volumes/v1?action=recurringJobList", "{}", bearer(operator)...).expect(t, 200)
	e.call(t, "POST", "/v1/volumes/v1?action=recurringJobList", "{}", bearer(stranger)...).expect(t, 403, `get volumes.longhorn.io \"v1\"`)
	e.call(t, "POST", "/v1/volumes/v1?action=detach", "{}", bearer(stranger)...).expect(t, 403, `update volumes.longhorn.io \"v1\"`)
	e.call(t, "DELETE", "/v1/volumes/v1", "", bearer(operator)...).expect(t, 403, `delete volumes.longhorn.io \"v1\"`)
	e.call(t, "DELETE", "/v1/volumes/v1", "", bearer(stranger)...).expect(t, 403)
	e.call(t, "GET", "/v1/nodes", "", bearer(operator)...).expect(t, 403, "list nodes.longhorn.io")
	e.call(t, "PUT", "/v1/settings/backup-target", `{"value":""}`, bearer(operator)...).expect(t, 403, `update settings.longhorn.io \"backup-target\"`)
	if _, err := e.lh.LonghornV1beta2().Volumes(ns).Get(ctx, "v1", metav1.GetOptions{}); err != nil {
		t.Fatalf("the refused delete removed the volume: %v", err)
	}

	// Websocket streams need list and watch on the resource.
	wsURL := "ws://" + d.apiAddress + "/v1/ws/volumes"
	_, resp, err := websocket.DefaultDialer.Dial(wsURL, http.Header{"Authorization": {"Bearer " + stranger}})
	if err == nil || resp == nil || resp.StatusCode != 403 {
		t.Fatalf("stranger's stream: err %v, response %v", err, resp)
	}
	_, resp, err = websocket.DefaultDialer.Dial("ws://"+d.apiAddress+"/v1/ws/nodes", http.Header{"Authorization": {"Bearer " + operator}})
	if err == nil || resp == nil || resp.StatusCode != 403 {
		t.Fatalf("operator's nodes stream: err %v, response %v", err, resp)
	}
	conn, _, err := websocket.DefaultDialer.Dial(wsURL, http.Header{"Authorization": {"Bearer " + operator}})
	if err != nil {
		t.Fatalf("operator's stream: %v", err)
	}
	defer conn.Close()
	_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, msg, err := conn.ReadMessage(); err != nil || !strings.Contains(string(msg), `"v1"`) {
		t.Fatalf("operator's stream: %q, %v", msg, err)
	}
}

// kubernetesAuthAPIEnv runs a daemon as package/rbac.yaml's account with
// --api-auth=kubernetes; opts change its options further. The env's own
// calls carry no token.
func kubernetesAuthAPIEnv(t *testing.T, opts ...func(*DaemonOptions)) (*apiEnv, *runningDaemon) {
	t.Helper()
	cluster := testcluster.Get(t)
	ns := cluster.NewNamespace(t)
	kube := cluster.KubeClient(t)
	installRBACIn(t, cluster, kube, ns, "rbac-api-auth.yaml")
	d := startDaemon(t, cluster.ServiceAccountConfig(ns, serviceAccount), ns, "node-1", t.TempDir(), append([]func(*DaemonOptions){func(o *DaemonOptions) {
		o.APIAuth = api.AuthKubernetes
	}}, opts...)...)
	return &apiEnv{managerEnv: &managerEnv{cluster: cluster, ns: ns, kube: kube, lh: lhClient(t, cluster.Config)}, base: "http://" + d.apiAddress}, d
}
