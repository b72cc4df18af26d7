package app

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	"github.com/cadence-storage/longhorn-manager/k8s/testcluster"
	"github.com/cadence-storage/longhorn-manager/types"
)

// apiEnv is a daemon running as its ServiceAccount with a client of its API.
type apiEnv struct {
	*managerEnv
	base string
}

func newAPIEnv(t testing.TB, opts ...func(*DaemonOptions)) *apiEnv {
	t.Helper()
	return newAPIEnvIn(t, testcluster.Get(t).NewNamespace(t), opts...)
}

// newAPIEnvIn is newAPIEnv in a namespace of the test's own.
func newAPIEnvIn(t testing.TB, ns string, opts ...func(*DaemonOptions)) *apiEnv {
	t.Helper()
	cluster := testcluster.Get(t)
	kube := cluster.KubeClient(t)
	installRBAC(t, kube, ns)
	d := startDaemon(t, cluster.ServiceAccountConfig(ns, serviceAccount), ns, "node-1", t.TempDir(), opts...)
	return &apiEnv{
		managerEnv: &managerEnv{cluster: cluster, ns: ns, kube: kube, lh: lhClient(t, cluster.Config)},
		base:       "http://" + d.apiAddress,
	}
}

type apiResponse struct {
	status int
	header http.Header
	body   map[string]any
	raw    string
}

func (e *apiEnv) call(t *testing.T, method, path, body string, header ...string) apiResponse {
	t.Helper()
	req, err := http.NewRequest(method, e.base+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if body != "" || method == "POST" || method == "PUT" {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	out := apiResponse{status: resp.StatusCode, header: resp.Header, raw: string(raw)}
	if len(raw) > 0 && strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
		if err := json.Unmarshal(raw, &out.body); err != nil {
			t.Fatalf("%s %s answered non-JSON %q", method, path, raw)
		}
	}
	return out
}

// expect asserts the status and, for errors, that the message says each fragment.
func (r apiResponse) expect(t *testing.T, status int, fragments ...string) apiResponse {
	t.Helper()
	if r.status != status {
		t.Fatalf("status %d, want %d: %s", r.status, status, r.raw)
	}
	if status >= 400 {
		if r.body["type"] != "error" || int(r.body["status"].(float64)) != status {
			t.Errorf("error body %s", r.raw)
		}
	}
	for _, f := range fragments {
		if !strings.Contains(r.raw, f) {
			t.Errorf("response %s does not say %q", r.raw, f)
		}
	}
	return r
}

func names(r apiResponse) []string {
	var out []string
	for _, item := range r.body["data"].([]any) {
		out = append(out, item.(map[string]any)["name"].(string))
	}
	return out
}

func TestAPIDiscovery(t *testing.T) {
	t.Parallel()
	e := newAPIEnv(t)
	root := e.call(t, "GET", "/v1", "").expect(t, 200)
	if root.header.Get("X-API-Schemas") != e.base+"/v1/schemas" {
		t.Errorf("X-API-Schemas %q", root.header.Get("X-API-Schemas"))
	}
	all := e.call(t, "GET", "/v1/schemas", "").expect(t, 200)
	ids := map[string]map[string]any{}
	for _, item := range all.body["data"].([]any) {
		sc := item.(map[string]any)
		ids[sc["id"].(string)] = sc
	}
	for _, id := range []string{"recurringJob", "volume", "volumeRecurringJobInput", "setting", "node", "error"} {
		if ids[id] == nil {
			t.Errorf("schema %s missing", id)
		}
	}
	vol := e.call(t, "GET", "/v1/schemas/volume", "").expect(t, 200).body
	if vol["links"].(map[string]any)["collection"] != e.base+"/v1/volumes" {
		t.Errorf("volume collection link %v", vol["links"])
	}
	add := vol["resourceActions"].(map[string]any)["recurringJobAdd"].(map[string]any)
	if add["input"] != "volumeRecurringJobInput" {
		t.Errorf("recurringJobAdd input %v", add)
	}
	task := ids["recurringJob"]["resourceFields"].(map[string]any)["task"].(map[string]any)
	if task["type"] != "enum" || len(task["options"].([]any)) != 6 {
		t.Errorf("task field %v", task)
	}
	e.call(t, "GET", "/v1/schemas/nothing", "").expect(t, 404, "nothing")
	e.call(t, "GET", "/v1/nowhere", "").expect(t, 404)
	e.call(t, "PATCH", "/v1/recurringjobs", "").expect(t, 405)
}

func TestAPIRecurringJobs(t *testing.T) {
	t.Parallel()
	e := newAPIEnv(t)
	created := e.call(t, "POST", "/v1/recurringjobs", `{"name":"snap-b","task":"snapshot","cron":"0 * * * *","retain":3,"groups":["gold"],"labels":{"team":"db"}}`).expect(t, 200)
	if created.body["concurrency"].(float64) != 10 || created.body["id"] != "snap-b" || created.body["type"] != "recurringJob" {
		t.Errorf("created %s", created.raw)
	}
	if created.body["links"].(map[string]any)["self"] != e.base+"/v1/recurringjobs/snap-b" {
		t.Errorf("self link %v", created.body["links"])
	}
	// Longhorn's clients send keys in any case.
	e.call(t, "POST", "/v1/recurringjobs", `{"Name":"back-a","Task":"backup","Cron":"@daily","Retain":2,"Concurrency":1}`).expect(t, 200)
	// Reads come from the informer cache, which follows writes closely.
	eventually(t, 10*time.Second, "list sorted by name", func() (bool, error) {
		return strings.Join(names(e.call(t, "GET", "/v1/recurringjobs", "").expect(t, 200)), ",") == "back-a,snap-b", nil
	})
	e.call(t, "GET", "/v1/recurringjobs/snap-b", "").expect(t, 200, `"cron":"0 * * * *"`)

	updated := e.call(t, "PUT", "/v1/recurringjobs/snap-b", `{"cron":"*/30 * * * *","retain":5,"concurrency":2,"groups":[],"labels":{"team":"ops"}}`).expect(t, 200)
	if updated.body["cron"] != "*/30 * * * *" || updated.body["retain"].(float64) != 5 || len(updated.body["groups"].([]any)) != 0 {
		t.Errorf("updated %s", updated.raw)
	}
	// The controller records the new schedule in the job's status: wait
	// until it has and the job stays put, so only the PUT below can write.
	var before *longhorn.RecurringJob
	eventually(t, 10*time.Second, "the controller has settled the updated job", func() (bool, error) {
		job, err := e.lh.LonghornV1beta2().RecurringJobs(e.ns).Get(context.Background(), "snap-b", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		settled := before != nil && before.ResourceVersion == job.ResourceVersion &&
			job.Status.ObservedSchedule != nil && job.Status.ObservedSchedule.Cron == "*/30 * * * *"
		before = job
		time.Sleep(200 * time.Millisecond)
		return settled, nil
	})
	e.call(t, "PUT", "/v1/recurringjobs/snap-b", `{"cron":"*/30 * * * *","retain":5}`).expect(t, 200)
	after, _ := e.lh.LonghornV1beta2().RecurringJobs(e.ns).Get(context.Background(), "snap-b", metav1.GetOptions{})
	if after.ResourceVersion != before.ResourceVersion {
		t.Errorf("an unchanged PUT wrote the job: resourceVersion %s -> %s", before.ResourceVersion, after.ResourceVersion)
	}
	e.call(t, "PUT", "/v1/recurringjobs/snap-b", `{"task":"backup"}`).expect(t, 400, "task", "cannot change")
	e.call(t, "PUT", "/v1/recurringjobs/snap-b", `{"cron":"0 0 30 2 *"}`).expect(t, 400, "spec.cron", "never fires")
	e.call(t, "PUT", "/v1/recurringjobs/nope", `{"cron":"@daily"}`).expect(t, 404)

	bad := []struct {
		name, body string
		status     int
		fragments  []string
	}{
		{"malformed JSON", `{"name":`, 400, []string{"malformed JSON"}},
		{"wrong type of a list", `{"name":"x1","task":"snapshot","cron":"@daily","retain":1,"groups":"gold"}`, 400, []string{"groups", "a list"}},
		{"wrong type", `{"name":"x1","task":"snapshot","cron":"@daily","retain":"three"}`, 400, []string{"retain", "whole number"}},
		{"missing retain", `{"name":"x1","task":"snapshot","cron":"@daily"}`, 400, []string{"retain", "required"}},
		{"invalid cron", `{"name":"x1","task":"snapshot","cron":"every day","retain":1}`, 400, []string{"spec.cron"}},
		{"unknown task", `{"name":"x1","task":"copy","cron":"@daily","retain":1}`, 400, []string{"spec.task"}},
		{"retain zero", `{"name":"x1","task":"snapshot","cron":"@daily","retain":0}`, 400, []string{"spec.retain"}},
		{"retain above the setting", `{"name":"x1","task":"backup","cron":"@daily","retain":101}`, 400, []string{"spec.retain", "recurring-job-max-retention"}},
		{"concurrency zero", `{"name":"x1","task":"snapshot","cron":"@daily","retain":1,"concurrency":0}`, 400, []string{"spec.concurrency"}},
		{"bad name", `{"name":"X_1","task":"snapshot","cron":"@daily","retain":1}`, 400, []string{"metadata.name"}},
		{"duplicate", `{"name":"snap-b","task":"snapshot","cron":"@daily","retain":1}`, 409, []string{"already exists"}},
		{"empty body", ``, 400, []string{"JSON object is required"}},
	}
	for _, c := range bad {
		t.Run(c.name, func(t *testing.T) {
			e.call(t, "POST", "/v1/recurringjobs", c.body).expect(t, c.status, c.fragments...)
		})
	}
	// Fields the project has no concept of are ignored, as Longhorn's API
	// ignores them: its UI's form sends forceCreate and parameters.
	lenient := e.call(t, "POST", "/v1/recurringjobs", `{"name":"x-lenient","task":"snapshot","cron":"@daily","retain":1,"forceCreate":true,"parameters":{"full-backup-interval":"0"},"color":["red"]}`).expect(t, 200)
	if lenient.body["color"] != nil || lenient.body["forceCreate"] != nil {
		t.Errorf("ignored fields came back: %s", lenient.raw)
	}
	e.call(t, "DELETE", "/v1/recurringjobs/x-lenient", "").expect(t, 204)
	huge := `{"name":"big","task":"snapshot","cron":"@daily","retain":1,"labels":{"a":"` + strings.Repeat("x", 2<<20) + `"}}`
	e.call(t, "POST", "/v1/recurringjobs", huge).expect(t, 413, "larger than")
	e.call(t, "POST", "/v1/recurringjobs", `name=x`, "Content-Type", "application/x-www-form-urlencoded").expect(t, 415, "application/json")

	e.call(t, "DELETE", "/v1/recurringjobs/snap-b", "").expect(t, 204)
	eventually(t, 15*time.Second, "deleted job gone", func() (bool, error) {
		_, err := e.lh.LonghornV1beta2().RecurringJobs(e.ns).Get(context.Background(), "snap-b", metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	e.call(t, "DELETE", "/v1/recurringjobs/snap-b", "").expect(t, 404)
}

func TestAPIVolumesAndTheirRecurringJobs(t *testing.T) {
	t.Parallel()
	e := newAPIEnv(t)
	e.call(t, "POST", "/v1/recurringjobs", `{"name":"nightly","task":"backup","cron":"@daily","retain":2}`).expect(t, 200)
	eventually(t, 10*time.Second, "job in the cache", func() (bool, error) {
		return e.call(t, "GET", "/v1/recurringjobs/nightly", "").status == 200, nil
	})

	v := e.call(t, "POST", "/v1/volumes", `{"name":"db","size":"1Gi","numberOfReplicas":2,"frontend":"blockdev","recurringJobSelector":[{"name":"nightly","isGroup":false},{"name":"gold","isGroup":true}]}`).expect(t, 200)
	if v.body["size"] != "1073741824" || v.body["numberOfReplicas"].(float64) != 2 {
		t.Errorf("created %s", v.raw)
	}
	actions := v.body["actions"].(map[string]any)
	for _, a := range []string{"recurringJobAdd", "recurringJobDelete", "recurringJobList"} {
		if actions[a] != e.base+"/v1/volumes/db?action="+a {
			t.Errorf("action %s link %v", a, actions[a])
		}
	}
	e.call(t, "POST", "/v1/volumes", `{"name":"plain","size":"2147483648"}`).expect(t, 200, `"numberOfReplicas":3`)
	eventually(t, 10*time.Second, "volumes listed", func() (bool, error) {
		return strings.Join(names(e.call(t, "GET", "/v1/volumes", "")), ",") == "db,plain", nil
	})

	list := e.call(t, "POST", "/v1/volumes/db?action=recurringJobList", "").expect(t, 200)
	if got := list.raw; !strings.Contains(got, `"name":"gold","isGroup":true`) || !strings.Contains(got, `"name":"nightly","isGroup":false`) {
		t.Errorf("list %s", got)
	}
	added := e.call(t, "POST", "/v1/volumes/plain?action=recurringJobAdd", `{"name":"nightly","isGroup":false}`).expect(t, 200)
	if got := names(added); strings.Join(got, ",") != "nightly" {
		t.Errorf("after add: %v (the default group must go)", got)
	}
	e.call(t, "POST", "/v1/volumes/plain?action=recurringJobAdd", `{"name":"silver","isGroup":true}`).expect(t, 200, "silver")
	e.call(t, "POST", "/v1/volumes/plain?action=recurringJobAdd", `{"name":"missing"}`).expect(t, 400, "missing", "does not exist")
	e.call(t, "POST", "/v1/volumes/plain?action=recurringJobDelete", `{"name":"silver","isGroup":true}`).expect(t, 200)
	removed := e.call(t, "POST", "/v1/volumes/plain?action=recurringJobDelete", `{"name":"nightly"}`).expect(t, 200)
	if got := names(removed); strings.Join(got, ",") != "default" {
		t.Errorf("after delete: %v (the default group must come back)", got)
	}
	e.call(t, "POST", "/v1/volumes/ghost?action=recurringJobAdd", `{"name":"nightly"}`).expect(t, 404, "ghost")
	e.call(t, "POST", "/v1/volumes/db?action=explode", `{}`).expect(t, 400, "action")
	e.call(t, "POST", "/v1/volumes/db?action=recurringJobAdd", `{"isGroup":true}`).expect(t, 400, "name: required")

	for _, c := range []struct{ body, fragment string }{
		{`{"name":"v2","size":"lots"}`, "size"},
		{`{"name":"v2","size":"-5"}`, "size"},
		{`{"name":"v2"}`, "size: required"},
		{`{"name":"v2","size":"1Gi","numberOfReplicas":21}`, "numberOfReplicas"},
		{`{"name":"v2","size":"1Gi","frontend":"floppy"}`, "frontend"},
		{`{"name":"V 2","size":"1Gi"}`, "name"},
		{`{"name":"db","size":"1Gi"}`, "already exists"},
		{`{"name":"v2","size":"1Gi","recurringJobSelector":[{"name":"missing"}]}`, "recurringJobSelector[0]"},
	} {
		e.call(t, "POST", "/v1/volumes", c.body).expect(t, 400, c.fragment)
	}

	e.call(t, "GET", "/v1/volumes/db", "").expect(t, 200, `"name":"db"`, `"size":"1073741824"`)
	e.call(t, "DELETE", "/v1/volumes/plain", "").expect(t, 204)
	e.call(t, "GET", "/v1/volumes/nope", "").expect(t, 404)
}

func TestAPISettingsAndNodes(t *testing.T) {
	t.Parallel()
	e := newAPIEnv(t)
	settings := e.call(t, "GET", "/v1/settings", "").expect(t, 200)
	// The project's settings, and Longhorn's data engine switches, read-only.
	if len(settings.body["data"].([]any)) != len(types.SettingNames())+2 {
		t.Errorf("settings %s", settings.raw)
	}
	e.call(t, "GET", "/v1/settings/v1-data-engine", "").expect(t, 200, `"value":"true"`, `"readOnly":true`)
	e.call(t, "PUT", "/v1/settings/v2-data-engine", `{"value":"true"}`).expect(t, 400, "read-only")
	e.call(t, "GET", "/v1/settings/recurring-job-max-retention", "").expect(t, 200, `"value":"100"`, `"max":250`)
	e.call(t, "PUT", "/v1/settings/recurring-job-max-retention", `{"value":"20"}`).expect(t, 200, `"value":"20"`)
	e.call(t, "PUT", "/v1/settings/recurring-job-max-retention", `{"value":"0"}`).expect(t, 400, "value", "between 1 and 250")
	e.call(t, "PUT", "/v1/settings/no-such-setting", `{"value":"1"}`).expect(t, 404)

	nodes := e.call(t, "GET", "/v1/nodes", "").expect(t, 200)
	if got := names(nodes); strings.Join(got, ",") != "node-1" {
		t.Errorf("nodes %v", got)
	}
	node := e.call(t, "GET", "/v1/nodes/node-1", "").expect(t, 200)
	// Conditions are keyed by type, as in Longhorn's API.
	eventually(t, 10*time.Second, "node-1 Ready", func() (bool, error) {
		node = e.call(t, "GET", "/v1/nodes/node-1", "").expect(t, 200)
		ready, _ := node.body["conditions"].(map[string]any)["Ready"].(map[string]any)
		return ready != nil && ready["status"] == "True", nil
	})
	disks := node.body["disks"].(map[string]any)
	if len(disks) != 1 {
		t.Fatalf("disks %v", disks)
	}
	for _, d := range disks {
		if d.(map[string]any)["storageMaximum"].(float64) <= 0 {
			t.Errorf("disk %v", d)
		}
		if _, ok := d.(map[string]any)["conditions"].(map[string]any); !ok {
			t.Errorf("disk conditions are not a map: %v", d)
		}
	}
	e.call(t, "GET", "/v1/nodes/node-9", "").expect(t, 404)

	metrics := e.call(t, "GET", "/metrics", "")
	for _, name := range []string{"longhorn_manager_api_requests_total", "longhorn_manager_api_request_duration_seconds", "longhorn_manager_reconcile_total", "longhorn_manager_workqueue_depth"} {
		if !strings.Contains(metrics.raw, name) {
			t.Errorf("/metrics lacks %s", name)
		}
	}
}

func (e *apiEnv) dial(t *testing.T, path string) *websocket.Conn {
	t.Helper()
	conn, resp, err := websocket.DefaultDialer.Dial("ws"+strings.TrimPrefix(e.base, "http")+path, nil)
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

// nextList reads stream messages until one satisfies cond.
func nextList(t *testing.T, conn *websocket.Conn, what string, cond func(names []string, raw string) bool) {
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
		if cond(names(apiResponse{body: body}), string(data)) {
			return
		}
	}
}

func TestAPIWebsocketSeesAJobAppearChangeAndDisappear(t *testing.T) {
	t.Parallel()
	e := newAPIEnv(t)
	conn := e.dial(t, "/v1/ws/recurringjobs")
	nextList(t, conn, "initial empty list", func(n []string, _ string) bool { return len(n) == 0 })
	slow := e.dial(t, "/v1/ws/1s/recurringjobs")
	nextList(t, slow, "initial list on the throttled stream", func(n []string, _ string) bool { return len(n) == 0 })
	// A throttled stream sends only lists that differ from its last one:
	// had the job come and gone within its first period, it would rightly
	// send nothing. Let the period pass, so it sends the job at once.
	time.Sleep(1100 * time.Millisecond)

	e.call(t, "POST", "/v1/recurringjobs", `{"name":"watched","task":"snapshot","cron":"@hourly","retain":1}`).expect(t, 200)
	nextList(t, conn, "job appears", func(n []string, _ string) bool { return len(n) == 1 && n[0] == "watched" })
	// The throttled stream sends once a period, and only a list that
	// differs from the last it sent: it sees the job before it goes.
	nextList(t, slow, "job appears on the throttled stream", func(n []string, _ string) bool { return len(n) == 1 })
	e.call(t, "PUT", "/v1/recurringjobs/watched", `{"cron":"@daily"}`).expect(t, 200)
	nextList(t, conn, "job changes", func(_ []string, raw string) bool { return strings.Contains(raw, `"cron":"@daily"`) })
	// The throttled stream sends the latest list once a period, and nothing
	// when it equals the last one sent: let it see the job before the
	// delete, or all three changes may fall in one period and cancel out.
	nextList(t, slow, "the throttled stream sees the job", func(_ []string, raw string) bool { return strings.Contains(raw, `"cron":"@daily"`) })
	e.call(t, "DELETE", "/v1/recurringjobs/watched", "").expect(t, 204)
	nextList(t, conn, "job disappears", func(n []string, _ string) bool { return len(n) == 0 })
	nextList(t, slow, "the throttled stream catches up", func(n []string, raw string) bool { return len(n) == 0 && !strings.Contains(raw, "watched") })

	e.call(t, "GET", "/v1/ws/forever/recurringjobs", "").expect(t, 400, "period")
	e.call(t, "GET", "/v1/ws/engines", "").expect(t, 404)
	vols := e.dial(t, "/v1/ws/0s/volumes")
	nextList(t, vols, "volume stream", func(n []string, _ string) bool { return len(n) == 0 })
	settings := e.dial(t, "/v1/ws/settings")
	// The project's settings and Longhorn's two read-only data engine ones.
	nextList(t, settings, "settings stream", func(n []string, _ string) bool { return len(n) == len(types.SettingNames())+2 })
	e.call(t, "PUT", "/v1/settings/backup-target", `{"value":"nfs://server:/export"}`).expect(t, 200)
	nextList(t, settings, "settings stream sees the change", func(_ []string, raw string) bool {
		return strings.Contains(raw, "nfs://server:/export")
	})
	nodes := e.dial(t, "/v1/ws/nodes")
	nextList(t, nodes, "nodes stream", func(n []string, _ string) bool { return len(n) == 1 && n[0] == "node-1" })

	// A page from another origin may not open a stream.
	_, resp, err := websocket.DefaultDialer.Dial("ws"+strings.TrimPrefix(e.base, "http")+"/v1/ws/nodes", http.Header{"Origin": {"http://evil.example"}})
	if err == nil || resp == nil || resp.StatusCode != http.StatusForbidden {
		t.Errorf("a cross-origin stream was not refused: %v", err)
	}
}
