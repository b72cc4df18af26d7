package datastore

import (
	"context"
	"strings"
	"testing"

	kubefake "k8s.io/client-go/kubernetes/fake"

	lhfake "github.com/cadence-storage/longhorn-manager/k8s/pkg/client/clientset/versioned/fake"
	"github.com/cadence-storage/longhorn-manager/types"
)

// The first start creates every default setting; a restart, with them in
// place, writes nothing (not even creates the apiserver would refuse).
func TestDefaultSettingsAreCreatedOnceAndARestartWritesNothing(t *testing.T) {
	lh := lhfake.NewSimpleClientset()
	ds := New("ns", lh, kubefake.NewSimpleClientset(), NewInformers(lh, kubefake.NewSimpleClientset(), "ns", 0))
	ctx := context.Background()
	created, err := ds.CreateDefaultSettings(ctx, map[types.SettingName]string{types.SettingNameReplicaSoftAntiAffinity: "true"})
	if err != nil || len(created) != len(types.SettingNames()) {
		t.Fatalf("first start created %d settings (%v), want %d", len(created), err, len(types.SettingNames()))
	}
	if v, err := ds.GetSettingFresh(ctx, types.SettingNameReplicaSoftAntiAffinity); err != nil || v.Value != "true" {
		t.Fatalf("the setting given a value at the first start: %+v, %v", v, err)
	}
	seen := len(lh.Actions())
	if created, err := ds.CreateDefaultSettings(ctx, map[types.SettingName]string{types.SettingNameReplicaSoftAntiAffinity: "false"}); err != nil || len(created) != 0 {
		t.Fatalf("a restart created %v (%v)", created, err)
	}
	for _, a := range lh.Actions()[seen:] {
		if a.GetVerb() != "list" {
			t.Errorf("a restart sent %s %s", a.GetVerb(), a.GetResource().Resource)
		}
	}
}

func TestParseInitialSettingsNamesTheBadOne(t *testing.T) {
	if got, err := ParseInitialSettings([]string{"replica-soft-anti-affinity=true"}); err != nil || got[types.SettingNameReplicaSoftAntiAffinity] != "true" {
		t.Fatalf("ParseInitialSettings = %v, %v", got, err)
	}
	for _, bad := range []string{"replica-soft-anti-affinity", "no-such-setting=1", "replica-soft-anti-affinity=maybe"} {
		if _, err := ParseInitialSettings([]string{bad}); err == nil || !strings.Contains(err.Error(), bad) {
			t.Errorf("ParseInitialSettings(%q) = %v, want an error naming it", bad, err)
		}
	}
}
