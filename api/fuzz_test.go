package api

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
)

// FuzzCreateAndUpdateHandlers sends arbitrary bodies to every handler that
// takes one. Whatever arrives, the answer is a JSON body with a status
// below 500: bad input is the caller's error, never the server's.
func FuzzCreateAndUpdateHandlers(f *testing.F) {
	for _, seed := range []string{
		`{"name":"job-1","task":"snapshot","cron":"0 * * * *","retain":3}`,
		`{"name":"job-1","task":"backup","cron":"@every 1h","retain":3,"concurrency":2,"groups":["g"],"labels":{"a":"b"}}`,
		`{"Name":"X","Task":"snapshot-cleanup","Cron":"0 0 30 2 *","Retain":0}`,
		`{"cron":"*/5 * * * *","retain":-1,"concurrency":0}`,
		`{"name":"vol","size":"1Gi","numberOfReplicas":3,"recurringJobSelector":[{"name":"job-1","isGroup":false}]}`,
		`{"name":"vol","size":"99999999999999999999Ei"}`,
		`{"name":"existing","isGroup":true}`,
		`{"value":"true"}`,
		`{"name":"img","sourceType":"download","parameters":{"url":"http://h/x"},"disks":["disk-a"],"minNumberOfCopies":2}`,
		`{"name":"img","sourceType":"export-from-volume","parameters":{"volume-name":"vol","export-type":"qcow2"}}`,
		`{"name":"up","sourceType":"upload","expectedChecksum":"00"}`,
		`{"disks":["disk-a","disk-b"]}`, `{"disks":[""]}`, `{"disks":null}`,
		`{"hostId":"node-1","disableFrontend":true,"attachedBy":"recurring-job/snap/20261122T010000Z"}`,
		`{"size":"2Gi"}`, `{"size":"0.03125Gi"}`, `{"size":"-1"}`, `{"size":"9223372036854775807"}`, `{"size":1}`,
		`{"hostId":"node-1"}`, `{"attachedBy":"recurring-job/snap/20261122T010000Z"}`, `{"attachedBy":"-"}`, ``,
		`[]`, `null`, `{"name":`, `{"retain":1e400}`, "\x00", `{"labels":{"":""}}`,
	} {
		f.Add(seed)
	}
	existing := &longhorn.RecurringJob{
		ObjectMeta: metav1.ObjectMeta{Name: "existing", Namespace: testNamespace},
		Spec:       longhorn.RecurringJobSpec{Task: "snapshot", Cron: "@hourly", Retain: 2, Concurrency: 1},
	}
	volume := &longhorn.Volume{ObjectMeta: metav1.ObjectMeta{Name: "vol-0", Namespace: testNamespace}}
	setting := &longhorn.Setting{ObjectMeta: metav1.ObjectMeta{Name: "recurring-job-max-retention", Namespace: testNamespace}, Value: "100"}
	s := newTestServer(f, append(backingImageObjects(), existing, volume, setting)...)
	requests := []struct{ method, path string }{
		{http.MethodPost, "/v1/recurringjobs"},
		{http.MethodPut, "/v1/recurringjobs/existing"},
		{http.MethodPost, "/v1/volumes"},
		{http.MethodPost, "/v1/volumes/vol-0?action=recurringJobAdd"},
		{http.MethodPost, "/v1/volumes/vol-0?action=recurringJobDelete"},
		{http.MethodPost, "/v1/volumes/vol-0?action=attach"},
		{http.MethodPost, "/v1/volumes/vol-0?action=detach"},
		{http.MethodPost, "/v1/volumes/vol-0?action=expand"},
		{http.MethodPut, "/v1/settings/recurring-job-max-retention"},
		{http.MethodPost, "/v1/backingimages"},
		{http.MethodPost, "/v1/backingimages/base?action=backingImageCleanup"},
		{http.MethodPost, "/v1/backingimages/up?action=upload&size=4"},
		{http.MethodPost, "/v1/backingimages/base?action=upload&size=4"},
	}
	f.Fuzz(func(t *testing.T, body string) {
		for _, r := range requests {
			req := httptest.NewRequest(r.method, r.path, strings.NewReader(body))
			req.Header.Set("Content-Type", "application/json")
			rec := httptest.NewRecorder()
			s.handler.ServeHTTP(rec, req)
			if rec.Code >= 500 {
				t.Fatalf("%s %s with %q answered %d: %s", r.method, r.path, body, rec.Code, rec.Body.String())
			}
			if rec.Code != http.StatusNoContent && !json.Valid(rec.Body.Bytes()) {
				t.Fatalf("%s %s with %q answered non-JSON: %q", r.method, r.path, body, rec.Body.String())
			}
		}
	})
}
