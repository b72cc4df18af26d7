package recurringjob

import (
	"context"
	"fmt"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
)

// leaderTerms lets the runner wait for the end of a leadership term.
// client-go starts OnStartedLeading in a goroutine of its own and returns
// from Run without waiting for it: without this, the next term could
// begin (and another manager take the Lease) while the last term's runs
// are still stopping.
type leaderTerms struct {
	mu      sync.Mutex
	current chan struct{}
}

// begin starts a term for the leader context ctx; it returns false, and
// no term, when ctx has already ended (the elector returned before the
// callback ran). end must be called when the term's work has stopped.
func (l *leaderTerms) begin(ctx context.Context) (ok bool, end func()) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if ctx.Err() != nil {
		return false, func() {}
	}
	done := make(chan struct{})
	l.current = done
	return true, func() { close(done) }
}

// wait returns once the term begun last, if any, has ended. It is called
// after the elector returned, when the leader context has ended: a term
// not begun by then never begins.
func (l *leaderTerms) wait() {
	l.mu.Lock()
	done := l.current
	l.current = nil
	l.mu.Unlock()
	if done != nil {
		<-done
	}
}

// releaseLease gives up the Lease name if identity still holds it, so the
// next manager need not wait for it to expire. It is called only once
// this manager's runs have stopped; the update is guarded by the Lease's
// resourceVersion, so a Lease another manager took meanwhile is left alone.
func releaseLease(kube kubernetes.Interface, namespace, name, identity string, now time.Time) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	leases := kube.CoordinationV1().Leases(namespace)
	lease, err := leases.Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("read Lease %s to release it: %w", name, err)
	}
	if lease.Spec.HolderIdentity == nil || *lease.Spec.HolderIdentity != identity {
		return nil
	}
	t := metav1.NewMicroTime(now)
	lease.Spec = coordinationv1.LeaseSpec{HolderIdentity: ptr.To(""), LeaseDurationSeconds: ptr.To[int32](1), AcquireTime: &t, RenewTime: &t,
		LeaseTransitions: lease.Spec.LeaseTransitions}
	if _, err := leases.Update(ctx, lease, metav1.UpdateOptions{}); err != nil && !apierrors.IsConflict(err) {
		return fmt.Errorf("release Lease %s: %w", name, err)
	}
	return nil
}
