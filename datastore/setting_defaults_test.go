package datastore

import (
	"context"
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
	created, err := ds.CreateDefaultSettings(ctx)
	if err != nil || len(created) != len(types.SettingNames()) {
		t.Fatalf("first start created %d settings (%v), want %d", len(created), err, len(types.SettingNames()))
	}
	seen := len(lh.Actions())
	if created, err := ds.CreateDefaultSettings(ctx); err != nil || len(created) != 0 {
		t.Fatalf("a restart created %v (%v)", created, err)
	}
	for _, a := range lh.Actions()[seen:] {
		if a.GetVerb() != "list" {
			t.Errorf("a restart sent %s %s", a.GetVerb(), a.GetResource().Resource)
		}
	}
}
