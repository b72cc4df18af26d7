package backup

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	kubefake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"

	"github.com/cadence-storage/longhorn-manager/datastore"
	"github.com/cadence-storage/longhorn-manager/engine/backupstore"
	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	lhfake "github.com/cadence-storage/longhorn-manager/k8s/pkg/client/clientset/versioned/fake"
	"github.com/cadence-storage/longhorn-manager/types"
)

// fixture is a controller on fake clientsets whose backup-target setting
// names a file:// target in root, and whose clock is now.
type fixture struct {
	c     *TargetController
	lh    *lhfake.Clientset
	inf   datastore.Informers
	root  string
	store *backupstore.Store
	now   time.Time
}

// newFixture makes the target hold the backups given as volume/name, and
// the cluster the objects given (besides the setting and a Ready node).
func newFixture(t *testing.T, target []string, objects ...runtime.Object) *fixture {
	t.Helper()
	root := t.TempDir()
	store, err := backupstore.Open("file://" + root)
	if err != nil {
		t.Fatal(err)
	}
	for _, vb := range target {
		vol, name, _ := strings.Cut(vb, "/")
		if _, _, err := store.Backup(backupstore.BackupRequest{Name: name, Volume: vol, Snapshot: "s-" + name, Source: bytes.NewReader([]byte(vb))}); err != nil {
			t.Fatal(err)
		}
	}
	objects = append(objects,
		&longhorn.Setting{ObjectMeta: metav1.ObjectMeta{Name: string(types.SettingNameBackupTarget), Namespace: "ns"}, Value: "file://" + root},
		&longhorn.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-1", Namespace: "ns"},
			Status: longhorn.NodeStatus{Conditions: []longhorn.Condition{{Type: longhorn.ConditionTypeReady, Status: longhorn.ConditionStatusTrue}}}},
	)
	lh := lhfake.NewSimpleClientset(objects...)
	kube := kubefake.NewSimpleClientset()
	inf := datastore.NewInformers(lh, kube, "ns", 0)
	f := &fixture{lh: lh, inf: inf, root: root, store: store, now: time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)}
	for _, obj := range objects {
		f.cache(t, obj)
	}
	log := logrus.New()
	log.SetLevel(logrus.PanicLevel)
	f.c = NewTargetController(logrus.NewEntry(log), nil, datastore.New("ns", lh, kube, inf), inf, "node-1", record.NewFakeRecorder(100))
	f.c.now = func() time.Time { return f.now }
	t.Cleanup(f.c.Queue.ShutDown)
	return f
}

// cache puts an object in the informers' caches, as a watch would.
func (f *fixture) cache(t *testing.T, obj runtime.Object) {
	t.Helper()
	lhi := f.inf.Longhorn.Longhorn().V1beta2()
	var indexer cache.Indexer
	switch obj.(type) {
	case *longhorn.Backup:
		indexer = lhi.Backups().Informer().GetIndexer()
	case *longhorn.BackupVolume:
		indexer = lhi.BackupVolumes().Informer().GetIndexer()
	case *longhorn.Setting:
		indexer = lhi.Settings().Informer().GetIndexer()
	case *longhorn.Node:
		indexer = lhi.Nodes().Informer().GetIndexer()
	case *longhorn.Engine:
		indexer = lhi.Engines().Informer().GetIndexer()
	default:
		t.Fatalf("no cache for %T", obj)
	}
	if err := indexer.Update(obj); err != nil {
		t.Fatal(err)
	}
}
