package setting

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/sirupsen/logrus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubefake "k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/record"

	"github.com/cadence-storage/longhorn-manager/datastore"
	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	lhfake "github.com/cadence-storage/longhorn-manager/k8s/pkg/client/clientset/versioned/fake"
	"github.com/cadence-storage/longhorn-manager/types"
)

// TestControllerSync: the writes and events one sync of a Setting makes.
func TestControllerSync(t *testing.T) {
	setting := func(name, value string, applied bool) *longhorn.Setting {
		return &longhorn.Setting{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns"}, Value: value, Status: longhorn.SettingStatus{Applied: applied}}
	}
	for _, tc := range []struct {
		name    string
		setting *longhorn.Setting
		writes  []string
		applied bool
		event   string
	}{
		{"a valid value is marked applied", setting(string(types.SettingNameBackupConcurrentLimit), "4", false), []string{"update settings/status"}, true, ""},
		{"an applied valid value writes nothing", setting(string(types.SettingNameBackupConcurrentLimit), "4", true), nil, true, ""},
		{"an invalid value is marked not applied, with a Warning naming the rule", setting(string(types.SettingNameBackupConcurrentLimit), "many", true), []string{"update settings/status"}, false, "Warning InvalidValue"},
		{"an invalid value already marked writes nothing, and warns again", setting(string(types.SettingNameBackupConcurrentLimit), "many", false), nil, false, "Warning InvalidValue"},
		{"a setting of another version is left alone", setting("no-such-setting", "x", false), nil, false, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lh := lhfake.NewSimpleClientset(tc.setting)
			kube := kubefake.NewSimpleClientset()
			inf := datastore.NewInformers(lh, kube, "ns", 0)
			if err := inf.Longhorn.Longhorn().V1beta2().Settings().Informer().GetIndexer().Add(tc.setting); err != nil {
				t.Fatal(err)
			}
			rec := record.NewFakeRecorder(10)
			log := logrus.New()
			log.SetLevel(logrus.PanicLevel)
			c := NewController(logrus.NewEntry(log), nil, datastore.New("ns", lh, kube, inf), inf, rec)
			t.Cleanup(c.Queue.ShutDown)
			lh.ClearActions()

			if _, err := c.sync(context.Background(), "ns/"+tc.setting.Name); err != nil {
				t.Fatalf("sync: %v", err)
			}
			var got []string
			for _, a := range lh.Actions() {
				if v := a.GetVerb(); v == "create" || v == "update" || v == "delete" {
					got = append(got, v+" "+resource(a))
				}
			}
			if !slices.Equal(got, tc.writes) {
				t.Errorf("writes %v, want %v", got, tc.writes)
			}
			s, err := lh.LonghornV1beta2().Settings("ns").Get(context.Background(), tc.setting.Name, metav1.GetOptions{})
			if err != nil || s.Status.Applied != tc.applied {
				t.Errorf("applied %v (%v), want %v", s.Status.Applied, err, tc.applied)
			}
			select {
			case ev := <-rec.Events:
				if tc.event == "" || !strings.HasPrefix(ev, tc.event) || !strings.Contains(ev, "default value is used") {
					t.Errorf("event %q, want %q", ev, tc.event)
				}
			default:
				if tc.event != "" {
					t.Errorf("no event, want %q", tc.event)
				}
			}
		})
	}
}

func resource(a k8stesting.Action) string {
	if a.GetSubresource() != "" {
		return a.GetResource().Resource + "/" + a.GetSubresource()
	}
	return a.GetResource().Resource
}
