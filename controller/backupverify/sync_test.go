package backupverify

import (
	"bytes"
	"context"
	"math/rand"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	kubefake "k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/record"

	"github.com/cadence-storage/longhorn-manager/datastore"
	"github.com/cadence-storage/longhorn-manager/engine/backupstore"
	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	lhfake "github.com/cadence-storage/longhorn-manager/k8s/pkg/client/clientset/versioned/fake"
	"github.com/cadence-storage/longhorn-manager/types"
)

var asked = metav1.NewTime(time.Date(2026, 11, 26, 10, 0, 0, 0, time.UTC))

func backupObj(name, created string, mutate ...func(*longhorn.Backup)) *longhorn.Backup {
	b := &longhorn.Backup{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", Labels: map[string]string{types.LabelBackupVolume: "vol"}},
		Spec:       longhorn.BackupSpec{VerifyRequestedAt: asked},
		Status:     longhorn.BackupStatus{State: longhorn.BackupStateCompleted, VolumeName: "vol", BackupCreatedAt: created},
	}
	for _, m := range mutate {
		m(b)
	}
	return b
}

func readyNode(name string) *longhorn.Node {
	return &longhorn.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns"},
		Status: longhorn.NodeStatus{Conditions: []longhorn.Condition{{Type: longhorn.ConditionTypeReady, Status: longhorn.ConditionStatusTrue}}}}
}

// removeBlock deletes the i-th block of the backup from the file://
// store at root, as rot would.
func removeBlock(backup string, i int) func(t *testing.T, store *backupstore.Store, root string) {
	return func(t *testing.T, store *backupstore.Store, root string) {
		info, err := store.Get("vol", backup)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.Remove(root + "/" + backupstore.BlockKey(info, info.Blocks[i])); err != nil {
			t.Fatal(err)
		}
	}
}

// ownedTarget is a BackupTarget at url that node-1 owns.
func ownedTarget(name, url string) *longhorn.BackupTarget {
	return &longhorn.BackupTarget{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns"},
		Spec: longhorn.BackupTargetSpec{BackupTargetURL: url}, Status: longhorn.BackupTargetStatus{OwnerID: "node-1"}}
}

// writes are the updates a sync made, as "update resource/subresource name".
func writes(actions []k8stesting.Action) []string {
	var out []string
	for _, a := range actions {
		if a.GetVerb() == "update" || a.GetVerb() == "create" || a.GetVerb() == "delete" {
			r := a.GetResource().Resource
			if a.GetSubresource() != "" {
				r += "/" + a.GetSubresource()
			}
			name := ""
			if u, ok := a.(k8stesting.UpdateAction); ok {
				name = " " + u.GetObject().(metav1.Object).GetName()
			}
			out = append(out, a.GetVerb()+" "+r+name)
		}
	}
	return out
}

// TestSync: what one sync of a Backup writes, on a real file:// target
// holding the volume's backups b-old and b-new (3 blocks each, shared).
func TestSync(t *testing.T) {
	for _, tc := range []struct {
		name    string
		backup  string // the key synced
		objects []runtime.Object
		// target changes the default BackupTarget, owned by node-1 and
		// holding the backups.
		target func(bt *longhorn.BackupTarget)
		damage func(t *testing.T, store *backupstore.Store, root string)
		writes []string
		result string // the Backup's verification result; "" for none
		// full: the verification says it answered a full request.
		full  bool
		event string // a fragment of the event
	}{{
		name:    "a drill not asked for writes nothing",
		backup:  "b-new",
		objects: []runtime.Object{backupObj("b-new", "2026-11-26T09:00:00Z", func(b *longhorn.Backup) { b.Spec.VerifyRequestedAt = metav1.Time{} })},
	}, {
		name:    "a drill already made writes nothing",
		backup:  "b-new",
		objects: []runtime.Object{backupObj("b-new", "2026-11-26T09:00:00Z", func(b *longhorn.Backup) { b.Status.Verification = &longhorn.BackupVerification{RequestedAt: asked} })},
	}, {
		name:    "the target's owner, another node that is up, drills: not this one",
		backup:  "b-new",
		objects: []runtime.Object{readyNode("node-0"), backupObj("b-new", "2026-11-26T09:00:00Z")},
		target:  func(bt *longhorn.BackupTarget) { bt.Status.OwnerID = "node-0" },
	}, {
		name:    "the target's owner is down: none drills until another node claims the target",
		backup:  "b-new",
		objects: []runtime.Object{backupObj("b-new", "2026-11-26T09:00:00Z")},
		target:  func(bt *longhorn.BackupTarget) { bt.Status.OwnerID = "node-0" },
	}, {
		name:    "a target no node owns yet: none drills",
		backup:  "b-new",
		objects: []runtime.Object{backupObj("b-new", "2026-11-26T09:00:00Z")},
		target:  func(bt *longhorn.BackupTarget) { bt.Status.OwnerID = "" },
	}, {
		name:   "a backup of another target is drilled by that target's owner, though default is another node's",
		backup: "b-new",
		objects: []runtime.Object{readyNode("node-0"), backupObj("b-new", "2026-11-26T09:00:00Z", func(b *longhorn.Backup) {
			b.Labels[types.LabelBackupTarget], b.Status.BackupTargetName = "offsite", "offsite"
		})},
		target: func(bt *longhorn.BackupTarget) {
			bt.Status.OwnerID = "node-0"
		},
		writes: []string{"update backups/status b-new", "update volumes/status vol"},
		result: longhorn.BackupVerificationPassed,
		event:  "Normal BackupVerified backup b-new in backup target offsite: every block read back whole",
	}, {
		name:    "the newest backup whole: Passed, on the Backup and the volume",
		backup:  "b-new",
		objects: []runtime.Object{backupObj("b-old", "2026-11-26T08:00:00Z"), backupObj("b-new", "2026-11-26T09:00:00Z")},
		writes:  []string{"update backups/status b-new", "update volumes/status vol"},
		result:  longhorn.BackupVerificationPassed,
		event:   "Normal BackupVerified backup b-new in backup target default: every block read back whole",
	}, {
		name:    "a block gone: Failed, and the event says the next backup is full",
		backup:  "b-new",
		objects: []runtime.Object{backupObj("b-new", "2026-11-26T09:00:00Z")},
		damage:  removeBlock("b-new", 1),
		writes:  []string{"update backups/status b-new", "update volumes/status vol"},
		result:  longhorn.BackupVerificationFailed,
		event:   "offset 2097152 missing; the volume's next backup will be full",
	}, {
		name:   "offsite's backup damaged, older than default's newest: recorded on the Backup, and the next backup to offsite is full",
		backup: "b-old",
		objects: []runtime.Object{backupObj("b-new", "2026-11-26T09:00:00Z"), backupObj("b-old", "2026-11-26T08:00:00Z", func(b *longhorn.Backup) {
			b.Labels[types.LabelBackupTarget], b.Status.BackupTargetName = "offsite", "offsite"
		})},
		damage: removeBlock("b-old", 0),
		writes: []string{"update backups/status b-old"},
		result: longhorn.BackupVerificationFailed,
		event:  "the volume's next backup will be full in backup target offsite",
	}, {
		name:    "a full drill of a backup whose blocks are damaged restores nothing: Failed by its blocks",
		backup:  "b-new",
		objects: []runtime.Object{backupObj("b-new", "2026-11-26T09:00:00Z", func(b *longhorn.Backup) { b.Spec.VerifyFull, b.Status.VolumeSize = true, "6291456" })},
		damage:  removeBlock("b-new", 0),
		writes:  []string{"update backups/status b-new", "update volumes/status vol"},
		result:  longhorn.BackupVerificationFailed,
		full:    true,
		event:   "offset 0 missing",
	}, {
		name:    "a full drill that cannot make its scratch volume is an Error, and creates nothing",
		backup:  "b-new",
		objects: []runtime.Object{backupObj("b-new", "2026-11-26T09:00:00Z", func(b *longhorn.Backup) { b.Spec.VerifyFull = true })},
		writes:  []string{"update backups/status b-new", "update volumes/status vol"},
		result:  longhorn.BackupVerificationError,
		full:    true,
		event:   `full drill: create scratch volume ` + ScratchVolumeName("b-new") + `: the backup's volume size "" is not a size`,
	}, {
		name:   "a full request that a drill of the blocks alone answered for the same time (an older manager kept the time) is drilled again, full",
		backup: "b-new",
		objects: []runtime.Object{backupObj("b-new", "2026-11-26T09:00:00Z", func(b *longhorn.Backup) {
			b.Spec.VerifyFull = true
			b.Status.Verification = &longhorn.BackupVerification{RequestedAt: asked, Result: longhorn.BackupVerificationPassed}
		})},
		writes: []string{"update backups/status b-new", "update volumes/status vol"},
		result: longhorn.BackupVerificationError,
		full:   true,
		event:  `full drill: create scratch volume ` + ScratchVolumeName("b-new"),
	}, {
		name:    "an older backup's drill is the Backup's alone",
		backup:  "b-old",
		objects: []runtime.Object{backupObj("b-old", "2026-11-26T08:00:00Z"), backupObj("b-new", "2026-11-26T09:00:00Z")},
		writes:  []string{"update backups/status b-old"},
		result:  longhorn.BackupVerificationPassed,
	}, {
		name:    "a backup not Completed: Error, naming its state",
		backup:  "b-new",
		objects: []runtime.Object{backupObj("b-new", "", func(b *longhorn.Backup) { b.Status.State = longhorn.BackupStateInProgress })},
		writes:  []string{"update backups/status b-new"},
		result:  longhorn.BackupVerificationError,
		event:   `only a Completed backup can be drilled; this one is "InProgress"`,
	}} {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			store, err := backupstore.Open("file://" + root)
			if err != nil {
				t.Fatal(err)
			}
			data := make([]byte, 3*backupstore.BlockSize)
			rand.New(rand.NewSource(1)).Read(data)
			for _, name := range []string{"b-old", "b-new"} {
				if _, _, err := store.Backup(backupstore.BackupRequest{Name: name, Volume: "vol", Snapshot: "s-" + name, Source: bytes.NewReader(data)}); err != nil {
					t.Fatal(err)
				}
			}
			if tc.damage != nil {
				tc.damage(t, store, root)
			}
			def := ownedTarget(types.DefaultBackupTargetName, "file://"+root)
			if tc.target != nil {
				tc.target(def)
			}
			objects := append([]runtime.Object{
				&longhorn.Setting{ObjectMeta: metav1.ObjectMeta{Name: string(types.SettingNameBackupTarget), Namespace: "ns"}, Value: "file://" + root},
				def, ownedTarget("offsite", "file://"+root),
				readyNode("node-1"),
				&longhorn.Volume{ObjectMeta: metav1.ObjectMeta{Name: "vol", Namespace: "ns"}},
			}, tc.objects...)
			lh := lhfake.NewSimpleClientset(objects...)
			kube := kubefake.NewSimpleClientset()
			inf := datastore.NewInformers(lh, kube, "ns", 0)
			lhi := inf.Longhorn.Longhorn().V1beta2()
			for _, obj := range objects {
				switch o := obj.(type) {
				case *longhorn.Backup:
					err = lhi.Backups().Informer().GetIndexer().Add(o)
				case *longhorn.Setting:
					err = lhi.Settings().Informer().GetIndexer().Add(o)
				case *longhorn.Node:
					err = lhi.Nodes().Informer().GetIndexer().Add(o)
				case *longhorn.Volume:
					err = lhi.Volumes().Informer().GetIndexer().Add(o)
				case *longhorn.BackupTarget:
					err = lhi.BackupTargets().Informer().GetIndexer().Add(o)
				}
				if err != nil {
					t.Fatal(err)
				}
			}
			log := logrus.New()
			log.SetLevel(logrus.PanicLevel)
			recorder := record.NewFakeRecorder(10)
			c := NewController(logrus.NewEntry(log), nil, datastore.New("ns", lh, kube, inf), inf, "node-1", t.TempDir(), recorder)
			t.Cleanup(c.Queue.ShutDown)
			lh.ClearActions()

			if _, err := c.sync(context.Background(), "ns/"+tc.backup); err != nil {
				t.Fatalf("sync: %v", err)
			}
			if got := writes(lh.Actions()); !slices.Equal(got, tc.writes) {
				t.Errorf("writes %v, want %v", got, tc.writes)
			}
			b, err := lh.LonghornV1beta2().Backups("ns").Get(context.Background(), tc.backup, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			switch v := b.Status.Verification; {
			case tc.result == "" && v != nil && v.RequestedAt != asked:
				t.Errorf("a verification written: %+v", v)
			case tc.result != "" && (v == nil || v.Result != tc.result || !v.RequestedAt.Equal(&asked) || v.RequestedFull != tc.full):
				t.Errorf("verification %+v, want %s answering %v (full %v)", v, tc.result, asked, tc.full)
			}
			if tc.event != "" {
				select {
				case ev := <-recorder.Events:
					if !strings.Contains(ev, tc.event) {
						t.Errorf("event %q, want %q", ev, tc.event)
					}
				default:
					t.Errorf("no event, want %q", tc.event)
				}
			}
		})
	}
}
