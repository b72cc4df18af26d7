package api

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	k8stesting "k8s.io/client-go/testing"
)

// The apiserver's refusal while its admission has not loaded the
// RecurringJob CRD's schema yet (for seconds after a restart), built as its
// MutatingAdmissionPolicy dispatcher builds it.
var kindNotKnownYet = apierrors.NewServiceUnavailable("Resource kind longhorn.io/v1beta2, Kind=RecurringJob not found. There can be a delay between when CustomResourceDefinitions are created and when they are available.")

// A refusal that passes by itself is a 503 with Retry-After, which clients
// and the UI retry, not a 500 that says the manager failed.
func TestTransientApiserverRefusalIs503WithRetryAfter(t *testing.T) {
	for _, tc := range []struct {
		name       string
		err        error
		retryAfter string
	}{
		{"the admission's kind-not-found refusal", kindNotKnownYet, "2"},
		{"429 with the apiserver's delay", apierrors.NewTooManyRequests("slow down", 5), "5"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newTestServer(t)
			s.lh.PrependReactor("create", "recurringjobs", func(k8stesting.Action) (bool, runtime.Object, error) {
				return true, nil, tc.err
			})
			req := httptest.NewRequest("POST", "/v1/recurringjobs", strings.NewReader(`{"name":"job-1","task":"snapshot","cron":"@hourly","retain":1}`))
			req.Header.Set("Content-Type", "application/json")
			rec := httptest.NewRecorder()
			s.handler.ServeHTTP(rec, req)
			if rec.Code != http.StatusServiceUnavailable {
				t.Fatalf("answered %d %s, want 503", rec.Code, rec.Body)
			}
			if got := rec.Header().Get("Retry-After"); got != tc.retryAfter {
				t.Errorf("Retry-After %q, want %q", got, tc.retryAfter)
			}
			if body := rec.Body.String(); !strings.Contains(body, `"code":"Unavailable"`) || !strings.Contains(body, tc.err.Error()) {
				t.Errorf("body %s does not carry the code and the apiserver's message", body)
			}
		})
	}
}

// Answers the apiserver decided on the request stay what they were.
func TestPermanentApiserverRefusalsAreNot503(t *testing.T) {
	gr := schema.GroupResource{Group: "longhorn.io", Resource: "recurringjobs"}
	for _, err := range []error{
		apierrors.NewForbidden(gr, "j", errors.New("RBAC says no")),
		apierrors.NewInternalError(errors.New("boom")),
	} {
		s := newTestServer(t)
		s.lh.PrependReactor("create", "recurringjobs", func(k8stesting.Action) (bool, runtime.Object, error) { return true, nil, err })
		code, _, body := s.do(t, "POST", "/v1/recurringjobs", `{"name":"job-1","task":"snapshot","cron":"@hourly","retain":1}`)
		if code == http.StatusServiceUnavailable {
			t.Errorf("%v answered 503: %s", err, body)
		}
	}
}
