package backup

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	corev1 "k8s.io/api/core/v1"
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
// names a target, and whose clock is now.
type fixture struct {
	c     *TargetController
	lh    *lhfake.Clientset
	inf   datastore.Informers
	root  string // of a file:// target
	path  string // in the bucket, of an s3:// target
	store *backupstore.Store
	now   time.Time
}

// newFixture makes a file:// target hold the backups given as
// volume/name, and the cluster the objects given (besides the setting
// and a Ready node).
func newFixture(t testing.TB, target []string, objects ...runtime.Object) *fixture {
	t.Helper()
	root := t.TempDir()
	f := newFixtureAt(t, "file://"+root, nil, objects...)
	f.root = root
	for _, vb := range target {
		vol, name, _ := strings.Cut(vb, "/")
		if _, _, err := f.store.Backup(backupstore.BackupRequest{Name: name, Volume: vol, Snapshot: "s-" + name, Source: bytes.NewReader([]byte(vb))}); err != nil {
			t.Fatal(err)
		}
	}
	return f
}

// newFixtureAt is a fixture on any target; cred, when set, is the data
// of the credential Secret the settings name.
func newFixtureAt(t testing.TB, target string, cred map[string]string, objects ...runtime.Object) *fixture {
	t.Helper()
	store, err := backupstore.OpenWithCredential(target, cred)
	if err != nil {
		t.Fatal(err)
	}
	objects = append(objects,
		&longhorn.Setting{ObjectMeta: metav1.ObjectMeta{Name: string(types.SettingNameBackupTarget), Namespace: "ns"}, Value: target},
		// Owned by this node already, as controller/backuptarget's claim
		// leaves it.
		&longhorn.BackupTarget{ObjectMeta: metav1.ObjectMeta{Name: datastore.DefaultBackupTargetName, Namespace: "ns"},
			Spec: longhorn.BackupTargetSpec{BackupTargetURL: target}, Status: longhorn.BackupTargetStatus{OwnerID: "node-1"}},
		&longhorn.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-1", Namespace: "ns"},
			Status: longhorn.NodeStatus{Conditions: []longhorn.Condition{{Type: longhorn.ConditionTypeReady, Status: longhorn.ConditionStatusTrue}}}},
	)
	var kubeObjects []runtime.Object
	if cred != nil {
		objects = append(objects, &longhorn.Setting{ObjectMeta: metav1.ObjectMeta{Name: string(types.SettingNameBackupTargetCredentialSecret), Namespace: "ns"}, Value: "s3-secret"})
		secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "s3-secret", Namespace: "ns"}, Data: map[string][]byte{}}
		for k, v := range cred {
			secret.Data[k] = []byte(v)
		}
		kubeObjects = append(kubeObjects, secret)
	}
	lh := lhfake.NewSimpleClientset(objects...)
	kube := kubefake.NewSimpleClientset(kubeObjects...)
	inf := datastore.NewInformers(lh, kube, "ns", 0)
	f := &fixture{lh: lh, inf: inf, store: store, now: time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)}
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
func (f *fixture) cache(t testing.TB, obj runtime.Object) {
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
	case *longhorn.BackupTarget:
		indexer = lhi.BackupTargets().Informer().GetIndexer()
	default:
		t.Fatalf("no cache for %T", obj)
	}
	if err := indexer.Update(obj); err != nil {
		t.Fatal(err)
	}
}

// cacheWrites puts what the controller wrote in the caches, as the
// watches would.
func (f *fixture) cacheWrites(t testing.TB) {
	t.Helper()
	for _, a := range f.lh.Actions() {
		if obj, ok := a.(interface{ GetObject() runtime.Object }); ok {
			f.cache(t, obj.GetObject())
		}
	}
}
