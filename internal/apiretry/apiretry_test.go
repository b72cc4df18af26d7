package apiretry

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	logtest "github.com/sirupsen/logrus/hooks/test"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// kindNotKnownYet is the apiserver's refusal, built as its
// MutatingAdmissionPolicy dispatcher builds it.
var kindNotKnownYet = apierrors.NewServiceUnavailable("Resource kind longhorn.io/v1beta2, Kind=RecurringJob not found. There can be a delay between when CustomResourceDefinitions are created and when they are available.")

var jobs = schema.GroupResource{Group: "longhorn.io", Resource: "recurringjobs"}

func TestTransientClassifiesApimachineryErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"the admission's kind-not-found refusal", kindNotKnownYet, true},
		{"the same, wrapped by a migrator", fmt.Errorf("volume v: create RecurringJob j: %w", kindNotKnownYet), true},
		{"the same message under another status", apierrors.NewInternalError(errors.New("Resource kind longhorn.io/v1beta2, Kind=Snapshot not found. There can be a delay between when CustomResourceDefinitions are created and when they are available.")), true},
		{"429 TooManyRequests", apierrors.NewTooManyRequests("the server has received too many requests", 1), true},
		{"503 ServiceUnavailable", apierrors.NewServiceUnavailable("etcd is not ready"), true},
		{"ServerTimeout", apierrors.NewServerTimeout(jobs, "create", 2), true},
		{"504 Timeout", apierrors.NewTimeoutError("request did not complete within 34s", 0), true},
		{"a generic 503 by code", apierrors.NewGenericServerResponse(http.StatusServiceUnavailable, "POST", jobs, "j", "", 0, true), true},

		{"nil", nil, false},
		{"invalid", apierrors.NewInvalid(schema.GroupKind{Group: "longhorn.io", Kind: "RecurringJob"}, "j", field.ErrorList{field.Invalid(field.NewPath("spec", "cron"), "x", "bad cron")}), false},
		{"conflict", apierrors.NewConflict(jobs, "j", errors.New("the object has been modified")), false},
		{"forbidden by RBAC", apierrors.NewForbidden(jobs, "j", errors.New(`User "system:serviceaccount:x:y" cannot create resource`)), false},
		{"unauthorized", apierrors.NewUnauthorized("no token"), false},
		{"not found", apierrors.NewNotFound(jobs, "j"), false},
		{"already exists", apierrors.NewAlreadyExists(jobs, "j"), false},
		{"bad request", apierrors.NewBadRequest("bad"), false},
		{"internal error", apierrors.NewInternalError(errors.New("boom")), false},
		{"our own cancellation", context.Canceled, false},
		{"our own deadline", fmt.Errorf("create: %w", context.DeadlineExceeded), false},
		{"a plain EOF, not a connection's", fmt.Errorf("decode: %w", errors.New("EOF")), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			why, got := Transient(tc.err)
			if got != tc.want {
				t.Fatalf("Transient(%v) = %v (%q), want %v", tc.err, got, why, tc.want)
			}
			if got && why == "" {
				t.Error("a transient error without a reason")
			}
		})
	}
	if why, _ := Transient(kindNotKnownYet); !strings.Contains(why, "kind") {
		t.Errorf("the kind-not-found refusal is explained as %q", why)
	}
}

// The errors client-go returns for answers and failures on the wire.
func TestTransientClassifiesClientGoErrors(t *testing.T) {
	status := func(code int, reason metav1.StatusReason, msg string, retryAfter int32) http.HandlerFunc {
		return func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(code)
			_ = json.NewEncoder(w).Encode(metav1.Status{
				TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}, Status: metav1.StatusFailure,
				Code: int32(code), Reason: reason, Message: msg, Details: &metav1.StatusDetails{RetryAfterSeconds: retryAfter},
			})
		}
	}
	get := func(t *testing.T, host string) error {
		t.Helper()
		client, err := kubernetes.NewForConfig(&rest.Config{Host: host, Timeout: 5 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		_, err = client.CoreV1().ConfigMaps("ns").Create(context.Background(), nil, metav1.CreateOptions{})
		return err
	}
	serve := func(t *testing.T, h http.Handler) string {
		t.Helper()
		s := httptest.NewServer(h)
		t.Cleanup(s.Close)
		return s.URL
	}

	t.Run("the admission's 503 as sent", func(t *testing.T) {
		err := get(t, serve(t, status(503, metav1.StatusReasonServiceUnavailable, kindNotKnownYet.Error(), 0)))
		if !IsTransient(err) {
			t.Fatalf("not transient: %v", err)
		}
		if d := RetryAfter(err); d != DefaultRetryAfter {
			t.Errorf("RetryAfter = %s, want the default %s", d, DefaultRetryAfter)
		}
	})
	t.Run("a 429 with the server's delay", func(t *testing.T) {
		err := get(t, serve(t, status(429, metav1.StatusReasonTooManyRequests, "slow down", 7)))
		if !IsTransient(err) {
			t.Fatalf("not transient: %v", err)
		}
		if d := RetryAfter(err); d != 7*time.Second {
			t.Errorf("RetryAfter = %s, want 7s", d)
		}
	})
	t.Run("a 422 Invalid", func(t *testing.T) {
		if err := get(t, serve(t, status(422, metav1.StatusReasonInvalid, "spec.cron: invalid", 0))); err == nil || IsTransient(err) {
			t.Fatalf("want a permanent error, got %v", err)
		}
	})
	t.Run("a 403 Forbidden", func(t *testing.T) {
		if err := get(t, serve(t, status(403, metav1.StatusReasonForbidden, "forbidden", 0))); err == nil || IsTransient(err) {
			t.Fatalf("want a permanent error, got %v", err)
		}
	})
	t.Run("connection refused", func(t *testing.T) {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := l.Addr().String()
		l.Close()
		err = get(t, "http://"+addr)
		if why, ok := Transient(err); !ok || !strings.Contains(why, "connection refused") {
			t.Fatalf("Transient(%v) = %v, %q", err, ok, why)
		}
	})
	t.Run("connection closed mid-request", func(t *testing.T) {
		err := get(t, serve(t, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			conn, _, err := w.(http.Hijacker).Hijack()
			if err == nil {
				conn.Close()
			}
		})))
		if !IsTransient(err) {
			t.Fatalf("not transient: %v", err)
		}
	})
}

func TestDoRetriesTransientRefusalsWithBackoff(t *testing.T) {
	log, hook := logtest.NewNullLogger()
	var calls atomic.Int32
	var at []time.Time
	err := Do(context.Background(), Policy{Initial: 10 * time.Millisecond, Max: 40 * time.Millisecond, Timeout: 5 * time.Second},
		log.WithField("test", t.Name()), "create RecurringJob j", func(context.Context) error {
			at = append(at, time.Now())
			if calls.Add(1) < 5 {
				return kindNotKnownYet
			}
			return nil
		})
	if err != nil {
		t.Fatal(err)
	}
	if calls.Load() != 5 {
		t.Fatalf("%d calls, want 5", calls.Load())
	}
	// 10, 20, 40, 40 ms: doubling, capped.
	for i, want := range []time.Duration{10, 20, 40, 40} {
		if gap := at[i+1].Sub(at[i]); gap < want*time.Millisecond {
			t.Errorf("wait %d was %s, want at least %dms", i+1, gap, want)
		}
	}
	if len(hook.AllEntries()) != 4 {
		t.Fatalf("%d log lines, want one per retry (4)", len(hook.AllEntries()))
	}
	e := hook.AllEntries()[0]
	if e.Level != logrus.WarnLevel || e.Data["operation"] != "create RecurringJob j" || !strings.Contains(fmt.Sprint(e.Data["reason"]), "kind") || e.Data["attempt"] != 1 {
		t.Errorf("retry logged as %v %q %v", e.Level, e.Message, e.Data)
	}
}

func TestDoReturnsPermanentErrorsAtOnce(t *testing.T) {
	calls := 0
	invalid := apierrors.NewInvalid(schema.GroupKind{Kind: "RecurringJob"}, "j", nil)
	err := Do(context.Background(), Policy{Initial: time.Millisecond}, nil, "create", func(context.Context) error {
		calls++
		return invalid
	})
	if err != invalid || calls != 1 {
		t.Fatalf("got %v after %d calls, want the Invalid error after 1", err, calls)
	}
}

func TestDoGivesUpAtTheDeadlineSayingWhat(t *testing.T) {
	start := time.Now()
	calls := 0
	err := Do(context.Background(), Policy{Initial: 20 * time.Millisecond, Max: 50 * time.Millisecond, Timeout: 300 * time.Millisecond}, nil,
		"create RecurringJob snapshot-3-x", func(context.Context) error { calls++; return kindNotKnownYet })
	took := time.Since(start)
	var gaveUp *GaveUpError
	if !errors.As(err, &gaveUp) {
		t.Fatalf("want a GaveUpError, got %v", err)
	}
	if !apierrors.IsServiceUnavailable(err) {
		t.Error("the error does not wrap the last refusal")
	}
	if took < 300*time.Millisecond || took > 2*time.Second {
		t.Errorf("gave up after %s, want about the 300ms deadline", took)
	}
	for _, want := range []string{"create RecurringJob snapshot-3-x", "still refused", fmt.Sprintf("%d tries", calls), "does not know", "There can be a delay"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
}

func TestDoStopsWithItsContext(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	err := Do(ctx, Policy{Initial: 10 * time.Millisecond, Timeout: time.Minute}, nil, "create", func(context.Context) error { return kindNotKnownYet })
	if err == nil || !strings.Contains(err.Error(), "stopped while retrying") || !apierrors.IsServiceUnavailable(err) {
		t.Fatalf("got %v", err)
	}
}
