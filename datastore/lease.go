package datastore

import (
	"context"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

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
