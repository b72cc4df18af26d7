package v120to180

import (
	"context"
	"slices"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"

	"github.com/cadence-storage/longhorn-manager/datastore"
	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	lhfake "github.com/cadence-storage/longhorn-manager/k8s/pkg/client/clientset/versioned/fake"
	"github.com/cadence-storage/longhorn-manager/types"
	"github.com/cadence-storage/longhorn-manager/upgrade/step"
)

func setting(name types.SettingName, value string) *longhorn.Setting {
	return &longhorn.Setting{ObjectMeta: metav1.ObjectMeta{Name: string(name), Namespace: "ns"}, Value: value}
}

func creates(actions []k8stesting.Action) []string {
	var out []string
	for _, a := range actions {
		if a.GetVerb() != "get" && a.GetVerb() != "list" && a.GetVerb() != "watch" {
			out = append(out, a.GetVerb()+" "+a.GetResource().Resource)
		}
	}
	return out
}

func TestMigrate(t *testing.T) {
	existing := &longhorn.BackupTarget{ObjectMeta: metav1.ObjectMeta{Name: "default", Namespace: "ns"},
		Spec: longhorn.BackupTargetSpec{BackupTargetURL: "file:///mine"}}
	for _, tc := range []struct {
		name    string
		objects []runtime.Object
		writes  []string
		want    longhorn.BackupTargetSpec
	}{
		{
			name: "settings alone: default is made from them, recorded as agreed",
			objects: []runtime.Object{setting(types.SettingNameBackupTarget, "s3://backups@us-east-1/"),
				setting(types.SettingNameBackupTargetCredentialSecret, "s3-secret"), setting(types.SettingNameBackupstorePollInterval, "600")},
			writes: []string{"create backuptargets"},
			want:   longhorn.BackupTargetSpec{BackupTargetURL: "s3://backups@us-east-1/", CredentialSecret: "s3-secret", PollInterval: metav1.Duration{Duration: 10 * time.Minute}},
		},
		{
			name:   "a new cluster, no settings yet: default from the settings' defaults",
			writes: []string{"create backuptargets"},
			want:   longhorn.BackupTargetSpec{PollInterval: metav1.Duration{Duration: 300 * time.Second}},
		},
		{
			name:    "a setting whose value breaks its rule: its default",
			objects: []runtime.Object{setting(types.SettingNameBackupTarget, "ftp://x"), setting(types.SettingNameBackupstorePollInterval, "-1")},
			writes:  []string{"create backuptargets"},
			want:    longhorn.BackupTargetSpec{PollInterval: metav1.Duration{Duration: 300 * time.Second}},
		},
		{
			name:    "default exists: left as it is, nothing written",
			objects: []runtime.Object{existing, setting(types.SettingNameBackupTarget, "s3://backups@us-east-1/")},
			want:    existing.Spec,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lh := lhfake.NewSimpleClientset(tc.objects...)
			c := step.Clients{Namespace: "ns", Longhorn: lh}
			if err := Migrate(context.Background(), c); err != nil {
				t.Fatal(err)
			}
			if got := creates(lh.Actions()); !slices.Equal(got, tc.writes) {
				t.Errorf("writes %v, want %v", got, tc.writes)
			}
			bt, err := lh.LonghornV1beta2().BackupTargets("ns").Get(context.Background(), "default", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if bt.Spec != tc.want {
				t.Errorf("spec %+v, want %+v", bt.Spec, tc.want)
			}
			if tc.writes != nil {
				agreed := datastore.DecodeBackupTargetAgreement(bt)
				if agreed[types.SettingNameBackupTarget] != tc.want.BackupTargetURL {
					t.Errorf("agreement %v", agreed)
				}
			}
			// Idempotent: a second run writes nothing.
			lh.ClearActions()
			if err := Migrate(context.Background(), c); err != nil {
				t.Fatal(err)
			}
			if got := creates(lh.Actions()); len(got) != 0 {
				t.Errorf("a second run wrote %v", got)
			}
		})
	}
}
