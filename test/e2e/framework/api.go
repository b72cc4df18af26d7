package framework

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/cadence-storage/longhorn-manager/api"
	"github.com/cadence-storage/longhorn-manager/app"
	"github.com/cadence-storage/longhorn-manager/k8s/testcluster"
)

// KubernetesAuthAPIEnv runs a daemon as package/rbac.yaml's account with
// --api-auth=kubernetes; opts change its options further. The env's own
// calls carry no token.
func KubernetesAuthAPIEnv(t *testing.T, opts ...func(*app.DaemonOptions)) (*APIEnv, *RunningDaemon) {
	t.Helper()
	cluster := testcluster.Get(t)
	ns := cluster.NewNamespace(t)
	kube := cluster.KubeClient(t)
	InstallRBACIn(t, cluster, kube, ns, "rbac-api-auth.yaml", "rbac-ui.yaml")
	d := StartDaemon(t, cluster.ServiceAccountConfig(ns, ServiceAccount), ns, "node-1", t.TempDir(), append([]func(*app.DaemonOptions){func(o *app.DaemonOptions) {
		o.APIAuth = api.AuthKubernetes
	}}, opts...)...)
	return &APIEnv{ManagerEnv: &ManagerEnv{Cluster: cluster, NS: ns, Kube: kube, LH: LHClient(t, cluster.Config)}, Base: "http://" + d.APIAddress, InstanceManagerDir: d.InstanceManagerDir}, d
}

// TokenOf returns a new token (an hour long) of the ServiceAccount name in
// ns, as the kubelet projects one into a pod: for audiences when given,
// else for the apiserver.
func TokenOf(t testing.TB, kube kubernetes.Interface, ns, name string, audiences ...string) string {
	t.Helper()
	expiry := int64(3600)
	tr, err := kube.CoreV1().ServiceAccounts(ns).CreateToken(context.Background(), name, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &expiry, Audiences: audiences},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("TokenRequest for %s/%s: %v", ns, name, err)
	}
	return tr.Status.Token
}

// APIEnv is a daemon running as its ServiceAccount with a client of its API.
type APIEnv struct {
	*ManagerEnv
	Base string
	// InstanceManagerDir is the daemon's instance manager's folder, ""
	// when its engines run in the daemon (RunningDaemon's).
	InstanceManagerDir string
	// Token, when set, is the bearer token Call and Dial send (a call that
	// sets Authorization itself sends its own).
	Token string
	// HTTP, when set, is the client Call uses (a daemon with --api-tls:
	// see UseAPITLS); http.DefaultClient when nil.
	HTTP *http.Client
}

func NewAPIEnv(t testing.TB, opts ...func(*app.DaemonOptions)) *APIEnv {
	t.Helper()
	return NewAPIEnvIn(t, testcluster.Get(t).NewNamespace(t), opts...)
}

// NewAPIEnvIn is newAPIEnv in a namespace of the test's own.
func NewAPIEnvIn(t testing.TB, ns string, opts ...func(*app.DaemonOptions)) *APIEnv {
	t.Helper()
	cluster := testcluster.Get(t)
	kube := cluster.KubeClient(t)
	InstallRBAC(t, kube, ns)
	d := StartDaemon(t, cluster.ServiceAccountConfig(ns, ServiceAccount), ns, "node-1", t.TempDir(), opts...)
	return &APIEnv{
		ManagerEnv:         &ManagerEnv{Cluster: cluster, NS: ns, Kube: kube, LH: LHClient(t, cluster.Config)},
		Base:               "http://" + d.APIAddress,
		InstanceManagerDir: d.InstanceManagerDir,
	}
}

type APIResponse struct {
	Status int
	Header http.Header
	Body   map[string]any
	Raw    string
}

func (e *APIEnv) Call(t *testing.T, method, path, body string, header ...string) APIResponse {
	t.Helper()
	req, err := http.NewRequest(method, e.Base+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if body != "" || method == "POST" || method == "PUT" {
		req.Header.Set("Content-Type", "application/json")
	}
	if e.Token != "" {
		req.Header.Set("Authorization", "Bearer "+e.Token)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	hc := e.HTTP
	if hc == nil {
		hc = http.DefaultClient
	}
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	out := APIResponse{Status: resp.StatusCode, Header: resp.Header, Raw: string(raw)}
	if len(raw) > 0 && strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
		if err := json.Unmarshal(raw, &out.Body); err != nil {
			t.Fatalf("%s %s answered non-JSON %q", method, path, raw)
		}
	}
	return out
}

// Expect asserts the status and, for errors, that the message says each fragment.
func (r APIResponse) Expect(t *testing.T, status int, fragments ...string) APIResponse {
	t.Helper()
	if r.Status != status {
		t.Fatalf("status %d, want %d: %s", r.Status, status, r.Raw)
	}
	if status >= 400 {
		if r.Body["type"] != "error" || int(r.Body["status"].(float64)) != status {
			t.Errorf("error body %s", r.Raw)
		}
	}
	for _, f := range fragments {
		if !strings.Contains(r.Raw, f) {
			t.Errorf("response %s does not say %q", r.Raw, f)
		}
	}
	return r
}

func Names(r APIResponse) []string {
	var out []string
	for _, item := range r.Body["data"].([]any) {
		out = append(out, item.(map[string]any)["name"].(string))
	}
	return out
}

func (e *APIEnv) Dial(t *testing.T, path string) *websocket.Conn {
	t.Helper()
	var header http.Header
	if e.Token != "" {
		header = http.Header{"Authorization": {"Bearer " + e.Token}}
	}
	conn, resp, err := websocket.DefaultDialer.Dial("ws"+strings.TrimPrefix(e.Base, "http")+path, header)
	if err != nil {
		status := 0
		if resp != nil {
			status = resp.StatusCode
		}
		t.Fatalf("dial %s: %v (status %d)", path, err, status)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// NextList reads stream messages until one satisfies cond.
func NextList(t *testing.T, conn *websocket.Conn, what string, cond func(names []string, raw string) bool) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		_ = conn.SetReadDeadline(deadline)
		_, data, err := conn.ReadMessage()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		var body map[string]any
		if err := json.Unmarshal(data, &body); err != nil {
			t.Fatal(err)
		}
		if cond(Names(APIResponse{Body: body}), string(data)) {
			return
		}
	}
}

// UIUser makes a ServiceAccount name in the env's namespace bound to role
// (rbac-ui.yaml's longhorn-ui-viewer or longhorn-ui-operator), a user of
// the UI as an administrator would bind one, and waits until the
// apiserver's authorizer knows of the binding. It returns the account's
// user name.
func (e *APIEnv) UIUser(t *testing.T, name, role string) string {
	t.Helper()
	ctx := context.Background()
	if _, err := e.Kube.CoreV1().ServiceAccounts(e.NS).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Kube.RbacV1().RoleBindings(e.NS).Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: role},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: name, Namespace: e.NS}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	user := "system:serviceaccount:" + e.NS + ":" + name
	Eventually(t, 10*time.Second, user+"'s RoleBinding in force", func() (bool, error) {
		sar, err := e.Kube.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
			User: user, Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + e.NS, "system:authenticated"},
			ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: e.NS, Verb: "list", Group: "longhorn.io", Resource: "volumes"},
		}}, metav1.CreateOptions{})
		return err == nil && sar.Status.Allowed, nil
	})
	return user
}
