package app

import (
	"maps"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/rest"
)

// Requests are counted by method, resource and response code: a write
// refused for a stale copy (409) is told apart from one that landed.
func TestKubeRequestsAreCountedByCode(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPut {
			w.WriteHeader(http.StatusConflict)
			return
		}
		w.WriteHeader(http.StatusOK)
	}))
	defer srv.Close()
	reg := prometheus.NewRegistry()
	client, err := rest.HTTPClientFor(countKubeRequests(&rest.Config{Host: srv.URL}, reg))
	if err != nil {
		t.Fatal(err)
	}
	path := srv.URL + "/apis/longhorn.io/v1beta2/namespaces/ns/recurringjobs/daily/status"
	for _, method := range []string{http.MethodGet, http.MethodPut, http.MethodPut} {
		req, err := http.NewRequest(method, path, nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, f := range families {
		for _, m := range f.GetMetric() {
			var labels []string
			for _, l := range m.GetLabel() {
				labels = append(labels, l.GetName()+"="+l.GetValue())
			}
			got[strings.Join(labels, ",")] = m.GetCounter().GetValue()
		}
	}
	want := map[string]float64{
		"code=200,method=GET,resource=recurringjobs/status": 1,
		"code=409,method=PUT,resource=recurringjobs/status": 2,
	}
	if !maps.Equal(got, want) {
		t.Fatalf("counted %v, want %v", got, want)
	}
}
