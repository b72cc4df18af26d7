package datastore

import (
	"context"
	"fmt"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/utils/ptr"

	"github.com/cadence-storage/longhorn-manager/types"
)

// HeartbeatLeaseName is the Lease a node's manager renews to show it runs.
func HeartbeatLeaseName(node string) string { return "longhorn-manager-" + node }

// RenewHeartbeat creates or renews the node's heartbeat Lease.
func (ds *DataStore) RenewHeartbeat(ctx context.Context, node string, duration time.Duration, now time.Time) error {
	leases := ds.kubeClient.CoordinationV1().Leases(ds.namespace)
	name := HeartbeatLeaseName(node)
	renew := metav1.NewMicroTime(now)
	seconds := int32(duration / time.Second)
	return RetryOnConflict(func() error {
		lease, err := leases.Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			_, err = leases.Create(ctx, &coordinationv1.Lease{
				ObjectMeta: metav1.ObjectMeta{
					Name:   name,
					Labels: map[string]string{types.LabelManagedBy: types.ManagedByValue, types.LabelNode: node},
				},
				Spec: coordinationv1.LeaseSpec{
					HolderIdentity:       &node,
					LeaseDurationSeconds: &seconds,
					AcquireTime:          &renew,
					RenewTime:            &renew,
				},
			}, metav1.CreateOptions{})
			return err
		}
		if err != nil {
			return err
		}
		lease.Spec.HolderIdentity = &node
		lease.Spec.LeaseDurationSeconds = &seconds
		lease.Spec.RenewTime = &renew
		_, err = leases.Update(ctx, lease, metav1.UpdateOptions{})
		return err
	})
}

// GetHeartbeatRO returns the node's cached heartbeat Lease.
func (ds *DataStore) GetHeartbeatRO(node string) (*coordinationv1.Lease, error) {
	return ds.leaseLister.Leases(ds.namespace).Get(HeartbeatLeaseName(node))
}

// ReleaseLease gives up the Lease name if identity still holds it, so the
// next holder need not wait for it to expire. The caller has stopped the
// work the Lease guarded; the update is guarded by the Lease's
// resourceVersion, so a Lease another holder took meanwhile is left alone.
func (ds *DataStore) ReleaseLease(name, identity string, now time.Time) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	leases := ds.kubeClient.CoordinationV1().Leases(ds.namespace)
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

// LeaseLock is the leader-election lock on the Lease name for identity.
func (ds *DataStore) LeaseLock(name, identity string) resourcelock.Interface {
	return &resourcelock.LeaseLock{
		LeaseMeta:  metav1.ObjectMeta{Namespace: ds.namespace, Name: name},
		Client:     ds.kubeClient.CoordinationV1(),
		LockConfig: resourcelock.ResourceLockConfig{Identity: identity},
	}
}
