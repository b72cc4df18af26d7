package backupverify

import (
	"testing"

	"github.com/sirupsen/logrus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubefake "k8s.io/client-go/kubernetes/fake"

	"github.com/cadence-storage/longhorn-manager/datastore"
	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	lhfake "github.com/cadence-storage/longhorn-manager/k8s/pkg/client/clientset/versioned/fake"
	"github.com/cadence-storage/longhorn-manager/types"
)

// TestANewTargetOwnerTakesTheDrillsAskedFor: when a target's owner
// changes (its node went down and another claimed it, as the target
// polling moves), the drills asked for of that target's backups are
// queued on the new owner, and only those: not another target's, not a
// drill already made. A status write that keeps the owner queues nothing.
func TestANewTargetOwnerTakesTheDrillsAskedFor(t *testing.T) {
	inDefault := backupObj("b-default", "2026-11-26T09:00:00Z")
	done := backupObj("b-done", "2026-11-26T08:00:00Z", func(b *longhorn.Backup) {
		b.Status.Verification = &longhorn.BackupVerification{RequestedAt: asked}
	})
	offsite := backupObj("b-offsite", "2026-11-26T09:00:00Z", func(b *longhorn.Backup) {
		b.Labels[types.LabelBackupTarget], b.Status.BackupTargetName = "offsite", "offsite"
	})
	lh := lhfake.NewSimpleClientset()
	kube := kubefake.NewSimpleClientset()
	inf := datastore.NewInformers(lh, kube, "ns", 0)
	for _, b := range []*longhorn.Backup{inDefault, done, offsite} {
		if err := inf.Longhorn.Longhorn().V1beta2().Backups().Informer().GetIndexer().Add(b); err != nil {
			t.Fatal(err)
		}
	}
	log := logrus.New()
	log.SetLevel(logrus.PanicLevel)
	c := NewController(logrus.NewEntry(log), nil, datastore.New("ns", lh, kube, inf), inf, "node-1", t.TempDir(), nil)
	t.Cleanup(c.Queue.ShutDown)

	was := ownedTarget(types.DefaultBackupTargetName, "file:///b")
	was.Status.OwnerID = "node-0"
	now := was.DeepCopy()
	now.Status.OwnerID = "node-1"
	now.Status.LastSyncedAt = metav1.Now()
	c.targetOwnerChanged(now, now) // a poll's write: the owner kept
	if n := c.Queue.Len(); n != 0 {
		t.Fatalf("%d keys queued for a write that kept the owner", n)
	}
	c.targetOwnerChanged(was, now)
	if n := c.Queue.Len(); n != 1 {
		t.Fatalf("%d keys queued, want the one drill asked for in default", n)
	}
	key, _ := c.Queue.Get()
	if key != "ns/b-default" {
		t.Errorf("queued %v, want ns/b-default", key)
	}
}
