package backupverify

import (
	"context"
	"slices"
	"testing"

	"github.com/sirupsen/logrus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubefake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/record"

	"github.com/cadence-storage/longhorn-manager/datastore"
	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	lhfake "github.com/cadence-storage/longhorn-manager/k8s/pkg/client/clientset/versioned/fake"
	"github.com/cadence-storage/longhorn-manager/types"
)

// TestSyncScratch: what the sync of a scratch volume's key deletes, a
// leftover of a drill cut short, and never a volume without the label.
func TestSyncScratch(t *testing.T) {
	for _, tc := range []struct {
		name   string
		volume *longhorn.Volume
		active string
		writes []string
	}{{
		name: "a scratch volume this node's drill left is deleted",
		volume: &longhorn.Volume{ObjectMeta: metav1.ObjectMeta{Name: "drill-left", Namespace: "ns", OwnerReferences: backupOwner,
			Labels: map[string]string{types.LabelBackupVerifyScratch: "b1", types.LabelBackupVerifyNode: "node-1"}}},
		writes: []string{"delete volumes"},
	}, {
		name: "the scratch volume of the drill running stays",
		volume: &longhorn.Volume{ObjectMeta: metav1.ObjectMeta{Name: "drill-now", Namespace: "ns", OwnerReferences: backupOwner,
			Labels: map[string]string{types.LabelBackupVerifyScratch: "b1", types.LabelBackupVerifyNode: "node-1"}}},
		active: "drill-now",
	}, {
		name: "a user's volume labelled as a scratch volume, owned by no Backup, is never deleted",
		volume: &longhorn.Volume{ObjectMeta: metav1.ObjectMeta{Name: "drill-labelled", Namespace: "ns",
			Labels: map[string]string{types.LabelBackupVerifyScratch: "b1", types.LabelBackupVerifyNode: "node-1"}}},
	}, {
		name:   "a user's volume is never deleted, whatever its name",
		volume: &longhorn.Volume{ObjectMeta: metav1.ObjectMeta{Name: "drill-mine", Namespace: "ns", Labels: map[string]string{"app": "db"}}},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			node := readyNode("node-1")
			lh := lhfake.NewSimpleClientset(tc.volume, node)
			kube := kubefake.NewSimpleClientset()
			inf := datastore.NewInformers(lh, kube, "ns", 0)
			lhi := inf.Longhorn.Longhorn().V1beta2()
			if err := lhi.Volumes().Informer().GetIndexer().Add(tc.volume); err != nil {
				t.Fatal(err)
			}
			if err := lhi.Nodes().Informer().GetIndexer().Add(node); err != nil {
				t.Fatal(err)
			}
			log := logrus.New()
			log.SetLevel(logrus.PanicLevel)
			c := NewController(logrus.NewEntry(log), nil, datastore.New("ns", lh, kube, inf), inf, "node-1", t.TempDir(), record.NewFakeRecorder(10))
			t.Cleanup(c.Queue.ShutDown)
			c.setActive(tc.active)
			lh.ClearActions()
			if _, err := c.sync(context.Background(), scratchKey(tc.volume.Name)); err != nil {
				t.Fatalf("sync: %v", err)
			}
			if got := writes(lh.Actions()); !slices.Equal(got, tc.writes) {
				t.Errorf("writes %v, want %v", got, tc.writes)
			}
		})
	}
}
