//go:build e2e

package api

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	"github.com/cadence-storage/longhorn-manager/test/e2e/framework"
	"github.com/cadence-storage/longhorn-manager/types"
)

func TestAPIDiscovery(t *testing.T) {
	t.Parallel()
	e := framework.NewAPIEnv(t)
	root := e.Call(t, "GET", "/v1", "").Expect(t, 200)
	if root.Header.Get("X-API-Schemas") != e.Base+"/v1/schemas" {
		t.Errorf("X-API-Schemas %q", root.Header.Get("X-API-Schemas"))
	}
	all := e.Call(t, "GET", "/v1/schemas", "").Expect(t, 200)
	ids := map[string]map[string]any{}
	for _, item := range all.Body["data"].([]any) {
		sc := item.(map[string]any)
		ids[sc["id"].(string)] = sc
	}
	for _, id := range []string{"recurringJob", "volume", "volumeRecurringJobInput", "setting", "node", "error"} {
		if ids[id] == nil {
			t.Errorf("schema %s missing", id)
		}
	}
	vol := e.Call(t, "GET", "/v1/schemas/volume", "").Expect(t, 200).Body
	if vol["links"].(map[string]any)["collection"] != e.Base+"/v1/volumes" {
		t.Errorf("volume collection link %v", vol["links"])
	}
	add := vol["resourceActions"].(map[string]any)["recurringJobAdd"].(map[string]any)
	if add["input"] != "volumeRecurringJobInput" {
		t.Errorf("recurringJobAdd input %v", add)
	}
	task := ids["recurringJob"]["resourceFields"].(map[string]any)["task"].(map[string]any)
	if task["type"] != "enum" || fmt.Sprint(task["options"]) != fmt.Sprint(longhorn.RecurringJobTypes) {
		t.Errorf("task field %v, want the options %v", task, longhorn.RecurringJobTypes)
	}
	verify := ids["backupVolume"]["resourceActions"].(map[string]any)["backupVerify"].(map[string]any)
	if verify["input"] != "backupVerifyInput" || verify["output"] != "backup" || ids["backupVerification"] == nil {
		t.Errorf("backupVerify action %v", verify)
	}
	e.Call(t, "GET", "/v1/schemas/nothing", "").Expect(t, 404, "nothing")
	e.Call(t, "GET", "/v1/nowhere", "").Expect(t, 404)
	e.Call(t, "PATCH", "/v1/recurringjobs", "").Expect(t, 405)
}

func TestAPIRecurringJobs(t *testing.T) {
	t.Parallel()
	e := framework.NewAPIEnv(t)
	created := e.Call(t, "POST", "/v1/recurringjobs", `{"name":"snap-b","task":"snapshot","cron":"0 * * * *","retain":3,"groups":["gold"],"labels":{"team":"db"}}`).Expect(t, 200)
	if created.Body["concurrency"].(float64) != 10 || created.Body["id"] != "snap-b" || created.Body["type"] != "recurringJob" {
		t.Errorf("created %s", created.Raw)
	}
	if created.Body["links"].(map[string]any)["self"] != e.Base+"/v1/recurringjobs/snap-b" {
		t.Errorf("self link %v", created.Body["links"])
	}
	// Longhorn's clients send keys in any case.
	e.Call(t, "POST", "/v1/recurringjobs", `{"Name":"back-a","Task":"backup","Cron":"@daily","Retain":2,"Concurrency":1}`).Expect(t, 200)
	// Reads come from the informer cache, which follows writes closely.
	framework.Eventually(t, 10*time.Second, "list sorted by name", func() (bool, error) {
		return strings.Join(framework.Names(e.Call(t, "GET", "/v1/recurringjobs", "").Expect(t, 200)), ",") == "back-a,snap-b", nil
	})
	e.Call(t, "GET", "/v1/recurringjobs/snap-b", "").Expect(t, 200, `"cron":"0 * * * *"`)

	updated := e.Call(t, "PUT", "/v1/recurringjobs/snap-b", `{"cron":"*/30 * * * *","retain":5,"concurrency":2,"groups":[],"labels":{"team":"ops"}}`).Expect(t, 200)
	if updated.Body["cron"] != "*/30 * * * *" || updated.Body["retain"].(float64) != 5 || len(updated.Body["groups"].([]any)) != 0 {
		t.Errorf("updated %s", updated.Raw)
	}
	// The controller records the new schedule in the job's status: wait
	// until it has and the job stays put, so only the PUT below can write.
	var before *longhorn.RecurringJob
	framework.Eventually(t, 10*time.Second, "the controller has settled the updated job", func() (bool, error) {
		job, err := e.LH.LonghornV1beta2().RecurringJobs(e.NS).Get(context.Background(), "snap-b", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		settled := before != nil && before.ResourceVersion == job.ResourceVersion &&
			job.Status.ObservedSchedule != nil && job.Status.ObservedSchedule.Cron == "*/30 * * * *"
		before = job
		time.Sleep(200 * time.Millisecond)
		return settled, nil
	})
	e.Call(t, "PUT", "/v1/recurringjobs/snap-b", `{"cron":"*/30 * * * *","retain":5}`).Expect(t, 200)
	after, _ := e.LH.LonghornV1beta2().RecurringJobs(e.NS).Get(context.Background(), "snap-b", metav1.GetOptions{})
	if after.ResourceVersion != before.ResourceVersion {
		t.Errorf("an unchanged PUT wrote the job: resourceVersion %s -> %s", before.ResourceVersion, after.ResourceVersion)
	}
	e.Call(t, "PUT", "/v1/recurringjobs/snap-b", `{"task":"backup"}`).Expect(t, 400, "task", "cannot change")
	e.Call(t, "PUT", "/v1/recurringjobs/snap-b", `{"cron":"0 0 30 2 *"}`).Expect(t, 400, "spec.cron", "never fires")
	e.Call(t, "PUT", "/v1/recurringjobs/nope", `{"cron":"@daily"}`).Expect(t, 404)

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
			e.Call(t, "POST", "/v1/recurringjobs", c.body).Expect(t, c.status, c.fragments...)
		})
	}
	// Fields the project has no concept of are ignored, as Longhorn's API
	// ignores them: its UI's form sends forceCreate and parameters.
	lenient := e.Call(t, "POST", "/v1/recurringjobs", `{"name":"x-lenient","task":"snapshot","cron":"@daily","retain":1,"forceCreate":true,"parameters":{"full-backup-interval":"0"},"color":["red"]}`).Expect(t, 200)
	if lenient.Body["color"] != nil || lenient.Body["forceCreate"] != nil {
		t.Errorf("ignored fields came back: %s", lenient.Raw)
	}
	e.Call(t, "DELETE", "/v1/recurringjobs/x-lenient", "").Expect(t, 204)
	huge := `{"name":"big","task":"snapshot","cron":"@daily","retain":1,"labels":{"a":"` + strings.Repeat("x", 2<<20) + `"}}`
	e.Call(t, "POST", "/v1/recurringjobs", huge).Expect(t, 413, "larger than")
	e.Call(t, "POST", "/v1/recurringjobs", `name=x`, "Content-Type", "application/x-www-form-urlencoded").Expect(t, 415, "application/json")

	e.Call(t, "DELETE", "/v1/recurringjobs/snap-b", "").Expect(t, 204)
	framework.Eventually(t, 15*time.Second, "deleted job gone", func() (bool, error) {
		_, err := e.LH.LonghornV1beta2().RecurringJobs(e.NS).Get(context.Background(), "snap-b", metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	e.Call(t, "DELETE", "/v1/recurringjobs/snap-b", "").Expect(t, 404)
}

func TestAPIVolumesAndTheirRecurringJobs(t *testing.T) {
	t.Parallel()
	e := framework.NewAPIEnv(t)
	e.Call(t, "POST", "/v1/recurringjobs", `{"name":"nightly","task":"backup","cron":"@daily","retain":2}`).Expect(t, 200)
	framework.Eventually(t, 10*time.Second, "job in the cache", func() (bool, error) {
		return e.Call(t, "GET", "/v1/recurringjobs/nightly", "").Status == 200, nil
	})

	v := e.Call(t, "POST", "/v1/volumes", `{"name":"db","size":"1Gi","numberOfReplicas":2,"frontend":"blockdev","recurringJobSelector":[{"name":"nightly","isGroup":false},{"name":"gold","isGroup":true}]}`).Expect(t, 200)
	if v.Body["size"] != "1073741824" || v.Body["numberOfReplicas"].(float64) != 2 {
		t.Errorf("created %s", v.Raw)
	}
	actions := v.Body["actions"].(map[string]any)
	for _, a := range []string{"recurringJobAdd", "recurringJobDelete", "recurringJobList"} {
		if actions[a] != e.Base+"/v1/volumes/db?action="+a {
			t.Errorf("action %s link %v", a, actions[a])
		}
	}
	e.Call(t, "POST", "/v1/volumes", `{"name":"plain","size":"2147483648"}`).Expect(t, 200, `"numberOfReplicas":3`)
	framework.Eventually(t, 10*time.Second, "volumes listed", func() (bool, error) {
		return strings.Join(framework.Names(e.Call(t, "GET", "/v1/volumes", "")), ",") == "db,plain", nil
	})

	list := e.Call(t, "POST", "/v1/volumes/db?action=recurringJobList", "").Expect(t, 200)
	if got := list.Raw; !strings.Contains(got, `"name":"gold","isGroup":true`) || !strings.Contains(got, `"name":"nightly","isGroup":false`) {
		t.Errorf("list %s", got)
	}
	added := e.Call(t, "POST", "/v1/volumes/plain?action=recurringJobAdd", `{"name":"nightly","isGroup":false}`).Expect(t, 200)
	if got := framework.Names(added); strings.Join(got, ",") != "nightly" {
		t.Errorf("after add: %v (the default group must go)", got)
	}
	e.Call(t, "POST", "/v1/volumes/plain?action=recurringJobAdd", `{"name":"silver","isGroup":true}`).Expect(t, 200, "silver")
	e.Call(t, "POST", "/v1/volumes/plain?action=recurringJobAdd", `{"name":"missing"}`).Expect(t, 400, "missing", "does not exist")
	e.Call(t, "POST", "/v1/volumes/plain?action=recurringJobDelete", `{"name":"silver","isGroup":true}`).Expect(t, 200)
	removed := e.Call(t, "POST", "/v1/volumes/plain?action=recurringJobDelete", `{"name":"nightly"}`).Expect(t, 200)
	if got := framework.Names(removed); strings.Join(got, ",") != "default" {
		t.Errorf("after delete: %v (the default group must come back)", got)
	}
	e.Call(t, "POST", "/v1/volumes/ghost?action=recurringJobAdd", `{"name":"nightly"}`).Expect(t, 404, "ghost")
	e.Call(t, "POST", "/v1/volumes/db?action=explode", `{}`).Expect(t, 400, "action")
	e.Call(t, "POST", "/v1/volumes/db?action=recurringJobAdd", `{"isGroup":true}`).Expect(t, 400, "name: required")

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
		e.Call(t, "POST", "/v1/volumes", c.body).Expect(t, 400, c.fragment)
	}

	e.Call(t, "GET", "/v1/volumes/db", "").Expect(t, 200, `"name":"db"`, `"size":"1073741824"`)
	e.Call(t, "DELETE", "/v1/volumes/plain", "").Expect(t, 204)
	e.Call(t, "GET", "/v1/volumes/nope", "").Expect(t, 404)
}

func TestAPISettingsAndNodes(t *testing.T) {
	t.Parallel()
	e := framework.NewAPIEnv(t)
	settings := e.Call(t, "GET", "/v1/settings", "").Expect(t, 200)
	// The project's settings, and Longhorn's data engine switches, read-only.
	if len(settings.Body["data"].([]any)) != len(types.SettingNames())+2 {
		t.Errorf("settings %s", settings.Raw)
	}
	e.Call(t, "GET", "/v1/settings/v1-data-engine", "").Expect(t, 200, `"value":"true"`, `"readOnly":true`)
	e.Call(t, "PUT", "/v1/settings/v2-data-engine", `{"value":"true"}`).Expect(t, 400, "read-only")
	e.Call(t, "GET", "/v1/settings/recurring-job-max-retention", "").Expect(t, 200, `"value":"100"`, `"max":250`)
	e.Call(t, "PUT", "/v1/settings/recurring-job-max-retention", `{"value":"20"}`).Expect(t, 200, `"value":"20"`)
	e.Call(t, "PUT", "/v1/settings/recurring-job-max-retention", `{"value":"0"}`).Expect(t, 400, "value", "between 1 and 250")
	e.Call(t, "PUT", "/v1/settings/no-such-setting", `{"value":"1"}`).Expect(t, 404)

	nodes := e.Call(t, "GET", "/v1/nodes", "").Expect(t, 200)
	if got := framework.Names(nodes); strings.Join(got, ",") != "node-1" {
		t.Errorf("nodes %v", got)
	}
	node := e.Call(t, "GET", "/v1/nodes/node-1", "").Expect(t, 200)
	// Conditions are keyed by type, as in Longhorn's API.
	framework.Eventually(t, 10*time.Second, "node-1 Ready", func() (bool, error) {
		node = e.Call(t, "GET", "/v1/nodes/node-1", "").Expect(t, 200)
		ready, _ := node.Body["conditions"].(map[string]any)["Ready"].(map[string]any)
		return ready != nil && ready["status"] == "True", nil
	})
	disks := node.Body["disks"].(map[string]any)
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
	e.Call(t, "GET", "/v1/nodes/node-9", "").Expect(t, 404)

	metrics := e.Call(t, "GET", "/metrics", "")
	for _, name := range []string{"longhorn_manager_api_requests_total", "longhorn_manager_api_request_duration_seconds", "longhorn_manager_reconcile_total", "longhorn_manager_workqueue_depth"} {
		if !strings.Contains(metrics.Raw, name) {
			t.Errorf("/metrics lacks %s", name)
		}
	}
}

func TestAPIWebsocketSeesAJobAppearChangeAndDisappear(t *testing.T) {
	t.Parallel()
	e := framework.NewAPIEnv(t)
	conn := e.Dial(t, "/v1/ws/recurringjobs")
	framework.NextList(t, conn, "initial empty list", func(n []string, _ string) bool { return len(n) == 0 })
	slow := e.Dial(t, "/v1/ws/1s/recurringjobs")
	framework.NextList(t, slow, "initial list on the throttled stream", func(n []string, _ string) bool { return len(n) == 0 })
	// A throttled stream sends only lists that differ from its last one:
	// had the job come and gone within its first period, it would rightly
	// send nothing. Let the period pass, so it sends the job at once.
	time.Sleep(1100 * time.Millisecond)

	e.Call(t, "POST", "/v1/recurringjobs", `{"name":"watched","task":"snapshot","cron":"@hourly","retain":1}`).Expect(t, 200)
	framework.NextList(t, conn, "job appears", func(n []string, _ string) bool { return len(n) == 1 && n[0] == "watched" })
	// The throttled stream sends once a period, and only a list that
	// differs from the last it sent: it sees the job before it goes.
	framework.NextList(t, slow, "job appears on the throttled stream", func(n []string, _ string) bool { return len(n) == 1 })
	e.Call(t, "PUT", "/v1/recurringjobs/watched", `{"cron":"@daily"}`).Expect(t, 200)
	framework.NextList(t, conn, "job changes", func(_ []string, raw string) bool { return strings.Contains(raw, `"cron":"@daily"`) })
	// The throttled stream sends the latest list once a period, and nothing
	// when it equals the last one sent: let it see the job before the
	// delete, or all three changes may fall in one period and cancel out.
	framework.NextList(t, slow, "the throttled stream sees the job", func(_ []string, raw string) bool { return strings.Contains(raw, `"cron":"@daily"`) })
	e.Call(t, "DELETE", "/v1/recurringjobs/watched", "").Expect(t, 204)
	framework.NextList(t, conn, "job disappears", func(n []string, _ string) bool { return len(n) == 0 })
	framework.NextList(t, slow, "the throttled stream catches up", func(n []string, raw string) bool { return len(n) == 0 && !strings.Contains(raw, "watched") })

	e.Call(t, "GET", "/v1/ws/forever/recurringjobs", "").Expect(t, 400, "period")
	e.Call(t, "GET", "/v1/ws/engines", "").Expect(t, 404)
	vols := e.Dial(t, "/v1/ws/0s/volumes")
	framework.NextList(t, vols, "volume stream", func(n []string, _ string) bool { return len(n) == 0 })
	settings := e.Dial(t, "/v1/ws/settings")
	// The project's settings and Longhorn's two read-only data engine ones.
	framework.NextList(t, settings, "settings stream", func(n []string, _ string) bool { return len(n) == len(types.SettingNames())+2 })
	e.Call(t, "PUT", "/v1/settings/backup-target", `{"value":"nfs://server:/export"}`).Expect(t, 200)
	framework.NextList(t, settings, "settings stream sees the change", func(_ []string, raw string) bool {
		return strings.Contains(raw, "nfs://server:/export")
	})
	nodes := e.Dial(t, "/v1/ws/nodes")
	framework.NextList(t, nodes, "nodes stream", func(n []string, _ string) bool { return len(n) == 1 && n[0] == "node-1" })

	// A page from another origin may not open a stream.
	_, resp, err := websocket.DefaultDialer.Dial("ws"+strings.TrimPrefix(e.Base, "http")+"/v1/ws/nodes", http.Header{"Origin": {"http://evil.example"}})
	if err == nil || resp == nil || resp.StatusCode != http.StatusForbidden {
		t.Errorf("a cross-origin stream was not refused: %v", err)
	}
}
