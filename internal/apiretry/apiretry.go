// Package apiretry tells a transient refusal of the Kubernetes apiserver,
// one that passes by itself while the control plane warms up, restarts or
// sheds load, from an answer that no retry changes (a validation error, a
// conflict, a refusal by RBAC), and retries the transient ones with capped
// exponential backoff until a deadline.
//
// It is the one place that decides what is transient: the upgrade, the
// daemon's writes at start and the API's 503 all ask Transient.
package apiretry

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
	"time"

	"github.com/sirupsen/logrus"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	utilnet "k8s.io/apimachinery/pkg/util/net"
)

// crdKindNotKnownYet is what the apiserver's MutatingAdmissionPolicy
// dispatcher answers (503 ServiceUnavailable) for a create of a custom
// kind whose schema it has not loaded yet: for some seconds after the
// apiserver starts or a CRD is created.
const crdKindNotKnownYet = "There can be a delay between when CustomResourceDefinitions are created and when they are available"

// Transient reports whether err is a refusal that passes by itself, with
// why in a few words for a log line or an API message. nil, the caller's
// own cancellation or deadline, and every answer the apiserver decided on
// the request itself (invalid, conflict, not found, forbidden,
// unauthorized, already exists, bad request, internal error) are not
// transient.
func Transient(err error) (why string, ok bool) {
	if err == nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return "", false
	}
	var status apierrors.APIStatus
	if errors.As(err, &status) {
		switch {
		case strings.Contains(status.Status().Message, crdKindNotKnownYet):
			return "the apiserver's admission does not know the custom resource's kind yet (it is still starting)", true
		case apierrors.IsTooManyRequests(err):
			return "the apiserver is shedding load (429 TooManyRequests)", true
		case apierrors.IsServiceUnavailable(err):
			return "the apiserver is unavailable for now (503 ServiceUnavailable)", true
		case apierrors.IsServerTimeout(err):
			return "the apiserver timed out serving the request (ServerTimeout)", true
		case apierrors.IsTimeout(err):
			return "the request timed out in the apiserver (504 Timeout)", true
		}
		return "", false
	}
	// Transport errors: client-go wraps each in a *url.Error. Other
	// errors that read like these (a decoder's io.EOF) are not the
	// connection's.
	var urlErr *url.Error
	if !errors.As(err, &urlErr) {
		return "", false
	}
	switch {
	case utilnet.IsConnectionRefused(err):
		return "the apiserver is not listening (connection refused; it may be restarting)", true
	case utilnet.IsConnectionReset(err), utilnet.IsProbableEOF(err):
		return "the apiserver closed the connection (it may be restarting)", true
	}
	var netErr net.Error
	if errors.As(err, &netErr) && netErr.Timeout() {
		return "the apiserver did not answer in time", true
	}
	return "", false
}

// IsTransient is Transient without the reason.
func IsTransient(err error) bool {
	_, ok := Transient(err)
	return ok
}

// DefaultRetryAfter is what RetryAfter suggests when the apiserver did
// not say: the admission's warm-up takes a few seconds.
const DefaultRetryAfter = 2 * time.Second

// RetryAfter is how long a client should wait before trying again after
// err: the apiserver's own Retry-After when it gave one, else
// DefaultRetryAfter.
func RetryAfter(err error) time.Duration {
	if s, ok := apierrors.SuggestsClientDelay(err); ok && s > 0 {
		return time.Duration(s) * time.Second
	}
	return DefaultRetryAfter
}

// Policy is how Do retries. The zero value is DefaultPolicy.
type Policy struct {
	// Initial is the first wait; each next one doubles, up to Max.
	Initial time.Duration
	Max     time.Duration
	// Timeout is how long Do keeps trying in all, from its first call.
	Timeout time.Duration
}

// DefaultTimeout is how long Do retries by default: long enough for a
// control plane to restart and warm up, short enough that a cluster that
// stays broken is reported while someone is still watching.
const DefaultTimeout = 3 * time.Minute

// DefaultPolicy waits 200 ms, doubling up to 5 s, for DefaultTimeout.
var DefaultPolicy = Policy{Initial: 200 * time.Millisecond, Max: 5 * time.Second, Timeout: DefaultTimeout}

func (p Policy) withDefaults() Policy {
	if p.Initial <= 0 {
		p.Initial = DefaultPolicy.Initial
	}
	if p.Max <= 0 {
		p.Max = DefaultPolicy.Max
	}
	if p.Max < p.Initial {
		p.Max = p.Initial
	}
	if p.Timeout <= 0 {
		p.Timeout = DefaultPolicy.Timeout
	}
	return p
}

// Do calls fn until it returns nil or an error that is not transient,
// waiting between calls with capped exponential backoff (or the wait the
// apiserver asked for, when longer), for at most p.Timeout. what names
// the operation and its object ("create RecurringJob snapshot-3-…"); each
// retry is logged on log with it and the reason. When the deadline comes
// first, the error says what kept failing, how often and for how long,
// and wraps the last refusal. An error that is not transient is returned
// as fn returned it.
func Do(ctx context.Context, p Policy, log logrus.FieldLogger, what string, fn func(context.Context) error) error {
	p = p.withDefaults()
	start := time.Now()
	deadline := start.Add(p.Timeout)
	wait := p.Initial
	for attempt := 1; ; attempt++ {
		err := fn(ctx)
		why, transient := Transient(err)
		if !transient {
			return err
		}
		if ctxErr := ctx.Err(); ctxErr != nil {
			return fmt.Errorf("%s: stopped while retrying (%s): %w", what, why, err)
		}
		now := time.Now()
		if !now.Before(deadline) {
			return &GaveUpError{What: what, Why: why, Attempts: attempt, For: now.Sub(start).Round(time.Millisecond), Err: err}
		}
		if s, ok := apierrors.SuggestsClientDelay(err); ok && time.Duration(s)*time.Second > wait {
			wait = time.Duration(s) * time.Second
		}
		// The last try is at the deadline.
		sleep := min(wait, deadline.Sub(now))
		if log != nil {
			log.WithFields(logrus.Fields{"operation": what, "attempt": attempt, "reason": why, "retryIn": sleep}).WithError(err).
				Warn("The apiserver refused for now; retrying")
		}
		timer := time.NewTimer(sleep)
		select {
		case <-ctx.Done():
			timer.Stop()
			return fmt.Errorf("%s: stopped while retrying (%s): %w", what, why, err)
		case <-timer.C:
		}
		wait = min(2*wait, p.Max)
	}
}

// GaveUpError is Do's error when the refusals outlasted its deadline.
type GaveUpError struct {
	What     string
	Why      string
	Attempts int
	For      time.Duration
	// Err is the last refusal.
	Err error
}

func (e *GaveUpError) Error() string {
	return fmt.Sprintf("%s: still refused after %d tries over %s: %s: %v", e.What, e.Attempts, e.For, e.Why, e.Err)
}

func (e *GaveUpError) Unwrap() error { return e.Err }
