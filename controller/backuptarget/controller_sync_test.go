package backuptarget

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	kubefake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/record"

	"github.com/cadence-storage/longhorn-manager/controller/kit"
	"github.com/cadence-storage/longhorn-manager/datastore"
	"github.com/cadence-storage/longhorn-manager/internal/synctable"
	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	lhfake "github.com/cadence-storage/longhorn-manager/k8s/pkg/client/clientset/versioned/fake"
	"github.com/cadence-storage/longhorn-manager/types"
)

const (
	urlA = "s3://backups@us-east-1/"
	urlB = "file:///var/backups"
)

func syncSetting(name types.SettingName, value string) *longhorn.Setting {
	return &longhorn.Setting{ObjectMeta: metav1.ObjectMeta{Name: string(name), Namespace: "ns"}, Value: value}
}

// syncSettings are the three settings as agreed with syncTarget().
func syncSettings() []runtime.Object {
	return []runtime.Object{
		syncSetting(types.SettingNameBackupTarget, urlA),
		syncSetting(types.SettingNameBackupTargetCredentialSecret, "s3-secret"),
		syncSetting(types.SettingNameBackupstorePollInterval, "300"),
	}
}

// syncTarget is default as the controller last left it: in step with
// syncSettings, recorded as agreed, owned by node-1.
func syncTarget(mutate ...func(*longhorn.BackupTarget)) *longhorn.BackupTarget {
	bt, err := datastore.NewDefaultBackupTarget(map[types.SettingName]string{
		types.SettingNameBackupTarget: urlA, types.SettingNameBackupTargetCredentialSecret: "s3-secret", types.SettingNameBackupstorePollInterval: "300",
	})
	if err != nil {
		panic(err)
	}
	bt.Namespace = "ns"
	bt.Status.OwnerID = "node-1"
	for _, m := range mutate {
		m(bt)
	}
	return bt
}

func syncNode(name string, ready bool) *longhorn.Node {
	status := longhorn.ConditionStatusFalse
	if ready {
		status = longhorn.ConditionStatusTrue
	}
	return &longhorn.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns"},
		Status: longhorn.NodeStatus{Conditions: []longhorn.Condition{{Type: longhorn.ConditionTypeReady, Status: status}}}}
}

// objects are the settings with overrides, default (nil for none) and
// the nodes.
func objects(bt *longhorn.BackupTarget, settings ...*longhorn.Setting) []runtime.Object {
	out := []runtime.Object{syncNode("node-1", true), syncNode("node-2", true)}
	byName := map[string]*longhorn.Setting{}
	for _, s := range settings {
		byName[s.Name] = s
	}
	for _, o := range syncSettings() {
		s := o.(*longhorn.Setting)
		if override, ok := byName[s.Name]; ok {
			if override.Value == "<missing>" {
				continue
			}
			s = override
		}
		out = append(out, s)
	}
	if bt != nil {
		out = append(out, bt)
	}
	return out
}

type fixture struct {
	lh       *lhfake.Clientset
	inf      datastore.Informers
	c        *Controller
	recorder *record.FakeRecorder
}

func newFixture(t *testing.T, objs []runtime.Object) *fixture {
	t.Helper()
	lh := lhfake.NewSimpleClientset(objs...)
	kube := kubefake.NewSimpleClientset()
	inf := datastore.NewInformers(lh, kube, "ns", 0)
	f := &fixture{lh: lh, inf: inf, recorder: record.NewFakeRecorder(10)}
	f.load(t, objs)
	ds := datastore.New("ns", lh, kube, inf)
	log := logrus.New()
	log.SetLevel(logrus.PanicLevel)
	f.c = &Controller{ds: ds, recorder: f.recorder, ownership: kit.Ownership{NodeID: "node-1", IsUp: ds.IsNodeUp}}
	f.c.Base = kit.NewBase("test", logrus.NewEntry(log), nil, f.c.sync)
	t.Cleanup(f.c.Queue.ShutDown)
	lh.ClearActions()
	return f
}

// load puts objs in the informers' caches.
func (f *fixture) load(t *testing.T, objs []runtime.Object) {
	t.Helper()
	lhi := f.inf.Longhorn.Longhorn().V1beta2()
	for _, obj := range objs {
		var err error
		switch o := obj.(type) {
		case *longhorn.BackupTarget:
			err = lhi.BackupTargets().Informer().GetIndexer().Update(o)
		case *longhorn.Setting:
			err = lhi.Settings().Informer().GetIndexer().Update(o)
		case *longhorn.Node:
			err = lhi.Nodes().Informer().GetIndexer().Update(o)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}

// catchUp brings the caches to what the fake apiserver holds, as the
// informers would.
func (f *fixture) catchUp(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	var objs []runtime.Object
	settings, err := f.lh.LonghornV1beta2().Settings("ns").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range settings.Items {
		objs = append(objs, &settings.Items[i])
	}
	targets, err := f.lh.LonghornV1beta2().BackupTargets("ns").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range targets.Items {
		objs = append(objs, &targets.Items[i])
	}
	f.load(t, objs)
}

func (f *fixture) setting(t *testing.T, name types.SettingName) string {
	t.Helper()
	s, err := f.lh.LonghornV1beta2().Settings("ns").Get(context.Background(), string(name), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return s.Value
}

func (f *fixture) target(t *testing.T) *longhorn.BackupTarget {
	t.Helper()
	bt, err := f.lh.LonghornV1beta2().BackupTargets("ns").Get(context.Background(), "default", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return bt
}

func (f *fixture) sync(t *testing.T) []string {
	t.Helper()
	f.lh.ClearActions()
	if _, err := f.c.sync(context.Background(), "ns/default"); err != nil {
		t.Fatalf("sync: %v", err)
	}
	return synctable.Writes(f.lh.Actions())
}

// inStep checks that default's spec and the settings hold url, secret
// and interval, and that the agreement records them.
func inStep(url, secret string, interval time.Duration) func(*testing.T, *fixture) {
	return func(t *testing.T, f *fixture) {
		t.Helper()
		bt := f.target(t)
		want := longhorn.BackupTargetSpec{BackupTargetURL: url, CredentialSecret: secret, PollInterval: metav1.Duration{Duration: interval}}
		if bt.Spec != want {
			t.Errorf("spec %+v, want %+v", bt.Spec, want)
		}
		got := []string{f.setting(t, types.SettingNameBackupTarget), f.setting(t, types.SettingNameBackupTargetCredentialSecret), f.setting(t, types.SettingNameBackupstorePollInterval)}
		wantSettings := []string{url, secret, datastore.BackupTargetSpecValue(want, types.SettingNameBackupstorePollInterval)}
		if !slices.Equal(got, wantSettings) {
			t.Errorf("settings %v, want %v", got, wantSettings)
		}
		agreed := datastore.DecodeBackupTargetAgreement(bt)
		if agreed[types.SettingNameBackupTarget] != url || agreed[types.SettingNameBackupTargetCredentialSecret] != secret ||
			agreed[types.SettingNameBackupstorePollInterval] != wantSettings[2] {
			t.Errorf("agreement %v, want %v", agreed, wantSettings)
		}
	}
}

// TestControllerSync is the settings/default sync decision by decision,
// on fake clientsets: each case starts from the cache holding objects,
// syncs default once, and checks the exact writes and what they left.
func TestControllerSync(t *testing.T) {
	for _, tc := range []struct {
		name    string
		objects []runtime.Object
		written map[string]string // queue key -> resourceVersion the controller last wrote
		writes  []string
		check   func(*testing.T, *fixture)
	}{
		{
			name:    "in step and agreed: nothing is written",
			objects: objects(syncTarget()),
			check:   inStep(urlA, "s3-secret", 300*time.Second),
		},
		{
			name:    "the backup-target setting changed: copied into default's spec, one write",
			objects: objects(syncTarget(), syncSetting(types.SettingNameBackupTarget, urlB)),
			writes:  []string{"update backuptargets"},
			check:   inStep(urlB, "s3-secret", 300*time.Second),
		},
		{
			name:    "the poll interval setting changed: default's pollInterval is its seconds as a duration",
			objects: objects(syncTarget(), syncSetting(types.SettingNameBackupstorePollInterval, "0")),
			writes:  []string{"update backuptargets"},
			check:   inStep(urlA, "s3-secret", 0),
		},
		{
			name:    "default's URL changed (kubectl, API): copied into the setting, then the agreement recorded",
			objects: objects(syncTarget(func(bt *longhorn.BackupTarget) { bt.Spec.BackupTargetURL = urlB })),
			writes:  []string{"update settings", "update backuptargets"},
			check:   inStep(urlB, "s3-secret", 300*time.Second),
		},
		{
			name: "default's pollInterval changed to 10m: the setting becomes 600",
			objects: objects(syncTarget(func(bt *longhorn.BackupTarget) {
				bt.Spec.PollInterval = metav1.Duration{Duration: 10 * time.Minute}
			})),
			writes: []string{"update settings", "update backuptargets"},
			check:  inStep(urlA, "s3-secret", 10*time.Minute),
		},
		{
			name: "a setting and another field of default changed at once: each copied its way",
			objects: objects(syncTarget(func(bt *longhorn.BackupTarget) { bt.Spec.CredentialSecret = "other-secret" }),
				syncSetting(types.SettingNameBackupTarget, urlB)),
			writes: []string{"update settings", "update backuptargets"},
			check:  inStep(urlB, "other-secret", 300*time.Second),
		},
		{
			name:    "the same field changed on both sides: the setting wins (it is what backups use)",
			objects: objects(syncTarget(func(bt *longhorn.BackupTarget) { bt.Spec.BackupTargetURL = "file:///elsewhere" }), syncSetting(types.SettingNameBackupTarget, urlB)),
			writes:  []string{"update backuptargets"},
			check:   inStep(urlB, "s3-secret", 300*time.Second),
		},
		{
			name: "no agreement recorded (default made by hand) and a field differs: the settings win",
			objects: objects(syncTarget(func(bt *longhorn.BackupTarget) {
				bt.Annotations = nil
				bt.Spec.BackupTargetURL = urlB
			})),
			writes: []string{"update backuptargets"},
			check:  inStep(urlA, "s3-secret", 300*time.Second),
		},
		{
			name:    "no agreement recorded and in step: the agreement alone is recorded",
			objects: objects(syncTarget(func(bt *longhorn.BackupTarget) { bt.Annotations = nil })),
			writes:  []string{"update backuptargets"},
			check:   inStep(urlA, "s3-secret", 300*time.Second),
		},
		{
			name:    "default's URL changed to one the setting's rule refuses: nothing is written, a Warning names the field and the rule",
			objects: objects(syncTarget(func(bt *longhorn.BackupTarget) { bt.Spec.BackupTargetURL = "s3://no-region" })),
			check: func(t *testing.T, f *fixture) {
				if got := f.setting(t, types.SettingNameBackupTarget); got != urlA {
					t.Errorf("backup-target %q, want it kept at %q", got, urlA)
				}
				if got := f.target(t).Spec.BackupTargetURL; got != "s3://no-region" {
					t.Errorf("default's URL %q, want the user's value kept", got)
				}
				select {
				case e := <-f.recorder.Events:
					if !strings.Contains(e, ReasonInvalidSpec) || !strings.Contains(e, "spec.backupTargetURL") || !strings.Contains(e, "s3://<bucket>@<region>") {
						t.Errorf("event %q", e)
					}
				default:
					t.Error("no Warning event")
				}
			},
		},
		{
			name:    "an invalid setting value is not copied into default",
			objects: objects(syncTarget(), syncSetting(types.SettingNameBackupTarget, "ftp://nowhere")),
			check: func(t *testing.T, f *fixture) {
				if got := f.target(t).Spec.BackupTargetURL; got != urlA {
					t.Errorf("default's URL %q, want %q", got, urlA)
				}
			},
		},
		{
			name:    "a setting that does not exist: its field of default is left as it is",
			objects: objects(syncTarget(func(bt *longhorn.BackupTarget) { bt.Spec.CredentialSecret = "" }), syncSetting(types.SettingNameBackupTargetCredentialSecret, "<missing>")),
			check: func(t *testing.T, f *fixture) {
				if got := f.target(t).Spec.CredentialSecret; got != "" {
					t.Errorf("credentialSecret %q", got)
				}
			},
		},
		{
			name:    "no owner: this node claims default, and the sync ends there",
			objects: objects(syncTarget(func(bt *longhorn.BackupTarget) { bt.Status.OwnerID = "" }), syncSetting(types.SettingNameBackupTarget, urlB)),
			writes:  []string{"update backuptargets/status"},
			check: func(t *testing.T, f *fixture) {
				if bt := f.target(t); bt.Status.OwnerID != "node-1" || bt.Spec.BackupTargetURL != urlA {
					t.Errorf("owner %q, URL %q", bt.Status.OwnerID, bt.Spec.BackupTargetURL)
				}
			},
		},
		{
			name:    "owned by a peer that is up: left alone",
			objects: objects(syncTarget(func(bt *longhorn.BackupTarget) { bt.Status.OwnerID = "node-2" }), syncSetting(types.SettingNameBackupTarget, urlB)),
		},
		{
			name:    "default deleted: made again from the settings, recorded as agreed",
			objects: objects(nil, syncSetting(types.SettingNameBackupTarget, urlB)),
			writes:  []string{"create backuptargets"},
			check:   inStep(urlB, "s3-secret", 300*time.Second),
		},
		{
			name: "a setting's cached copy is older than the controller's own write: nothing (its event brings default back)",
			objects: objects(syncTarget(func(bt *longhorn.BackupTarget) { bt.Spec.BackupTargetURL = urlB }),
				&longhorn.Setting{ObjectMeta: metav1.ObjectMeta{Name: string(types.SettingNameBackupTarget), Namespace: "ns", ResourceVersion: "5"}, Value: "file:///old"}),
			written: map[string]string{"ns/setting/backup-target": "7"},
		},
		{
			name:    "default's cached copy is older than the controller's own write: nothing",
			objects: objects(syncTarget(func(bt *longhorn.BackupTarget) { bt.ResourceVersion = "5" }), syncSetting(types.SettingNameBackupTarget, urlB)),
			written: map[string]string{"ns/default": "7"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, tc.objects)
			for k, rv := range tc.written {
				f.c.written.Remember(k, rv)
			}
			if got := f.sync(t); !slices.Equal(got, tc.writes) {
				t.Errorf("writes %v, want %v", got, tc.writes)
			}
			if tc.check != nil {
				tc.check(t, f)
			}
		})
	}
}

// TestNoPingPong changes one side, then syncs with the caches caught up
// after every sync, as the informers' events would: the change is copied
// once, and the sync its own write brings back writes nothing.
func TestNoPingPong(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(t *testing.T, f *fixture)
		writes [][]string // per sync, until one writes nothing
		check  func(*testing.T, *fixture)
	}{
		{
			name: "a setting changed",
			change: func(t *testing.T, f *fixture) {
				s := syncSetting(types.SettingNameBackupTarget, urlB)
				if _, err := f.lh.LonghornV1beta2().Settings("ns").Update(context.Background(), s, metav1.UpdateOptions{}); err != nil {
					t.Fatal(err)
				}
			},
			writes: [][]string{{"update backuptargets"}, nil},
			check:  inStep(urlB, "s3-secret", 300*time.Second),
		},
		{
			name: "default's spec changed",
			change: func(t *testing.T, f *fixture) {
				bt := f.target(t)
				bt.Spec.PollInterval = metav1.Duration{Duration: time.Minute}
				bt.Spec.CredentialSecret = ""
				if _, err := f.lh.LonghornV1beta2().BackupTargets("ns").Update(context.Background(), bt, metav1.UpdateOptions{}); err != nil {
					t.Fatal(err)
				}
			},
			writes: [][]string{{"update settings", "update settings", "update backuptargets"}, nil},
			check:  inStep(urlA, "", time.Minute),
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, objects(syncTarget()))
			tc.change(t, f)
			f.catchUp(t)
			var got [][]string
			for range 5 {
				w := f.sync(t)
				got = append(got, w)
				f.catchUp(t)
				if len(w) == 0 {
					break
				}
			}
			if len(got) != len(tc.writes) {
				t.Fatalf("writes per sync %v, want %v", got, tc.writes)
			}
			for i := range got {
				if !slices.Equal(got[i], tc.writes[i]) {
					t.Errorf("sync %d wrote %v, want %v", i+1, got[i], tc.writes[i])
				}
			}
			tc.check(t, f)
		})
	}
}
