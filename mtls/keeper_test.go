package mtls

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	clocktesting "k8s.io/utils/clock/testing"
)

func newKeeper(kube *fake.Clientset, clk *clocktesting.FakeClock, dir string, secret bool) *Keeper {
	return &Keeper{Kube: kube, Namespace: "longhorn-system", Log: logrus.NewEntry(logrus.StandardLogger()),
		Clock: clk, ServerDir: dir, ServerSecret: secret}
}

func writes(kube *fake.Clientset) (n int) {
	for _, a := range kube.Actions() {
		if a.GetVerb() != "get" && a.GetVerb() != "list" && a.GetVerb() != "watch" {
			n++
		}
	}
	return n
}

func TestKeeperMakesTheCAOnceAndEveryManagerSharesIt(t *testing.T) {
	ctx := context.Background()
	kube := fake.NewClientset()
	clk := clocktesting.NewFakeClock(t0)
	first, second := newKeeper(kube, clk, t.TempDir(), true), newKeeper(kube, clk, "", true)
	if err := first.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	// Created: the CA Secret, the servers' two Secrets and the ConfigMap
	// of the CA's certificates.
	if n := writes(kube); n != 4 {
		t.Fatalf("%d writes on first start, want 4", n)
	}
	if err := second.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if n := writes(kube); n != 4 {
		t.Fatalf("a second manager wrote %d times", n-4)
	}
	// Each manager's leaf verifies with the other's bundle.
	a, _ := kube.CoreV1().Secrets("longhorn-system").Get(ctx, CASecretName, metav1.GetOptions{})
	auth, err := DecodeBundle(a.Data[CAFile], a.Data[CAKeyFile])
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []*Keeper{first, second} {
		if auth.NeedsRenewal(k.Identity().Leaf(), t0) {
			t.Error("a manager's leaf is not of the shared CA")
		}
	}
	// The servers' folder and Secret hold a leaf of it too, and no key of
	// the CA.
	dirID, err := LoadDir(first.ServerDir, first.Log)
	if err != nil || auth.NeedsRenewal(dirID.Leaf(), t0) {
		t.Errorf("servers' folder: %v", err)
	}
	s, _ := kube.CoreV1().Secrets("longhorn-system").Get(ctx, ServerSecretName, metav1.GetOptions{})
	if _, ok := s.Data[CAKeyFile]; ok || auth.NeedsRenewal(leafOf(s.Data[CertFile]), t0) {
		t.Errorf("servers' Secret: keys %v", s.Data)
	}
	// The ConfigMap holds the CA's certificates and nothing else.
	cm, err := kube.CoreV1().ConfigMaps("longhorn-system").Get(ctx, CAConfigMapName, metav1.GetOptions{})
	if err != nil || len(cm.Data) != 1 || cm.Data[CAFile] != string(a.Data[CAFile]) || strings.Contains(cm.Data[CAFile], "PRIVATE KEY") {
		t.Errorf("the CA ConfigMap: %v, %v", cm, err)
	}
	// A restart with everything in place writes nothing.
	kube.ClearActions()
	if err := newKeeper(kube, clk, first.ServerDir, true).Sync(ctx); err != nil || writes(kube) != 0 {
		t.Errorf("a restart wrote %d times: %v", writes(kube), err)
	}
}

func TestKeeperRenewsLeavesAndRotatesTheCABeforeTheyExpire(t *testing.T) {
	ctx := context.Background()
	kube := fake.NewClientset()
	clk := clocktesting.NewFakeClock(t0)
	k := newKeeper(kube, clk, t.TempDir(), true)
	if err := k.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	firstLeaf := k.Identity().Leaf()
	kube.ClearActions()
	clk.Step(LeafLifetime - LeafRenewBefore + time.Hour)
	if err := k.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if k.Identity().Leaf().Equal(firstLeaf) {
		t.Error("the manager's leaf is not renewed")
	}
	if n := writes(kube); n != 2 {
		t.Errorf("%d writes to renew the leaves, want 2 (the servers' Secrets)", n)
	}
	// Near the CA's end a new CA joins; the leaves follow the new bundle.
	clk.SetTime(t0.Add(CALifetime - CARotateBefore + time.Hour))
	if err := k.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	a, _ := kube.CoreV1().Secrets("longhorn-system").Get(ctx, CASecretName, metav1.GetOptions{})
	auth, err := DecodeBundle(a.Data[CAFile], a.Data[CAKeyFile])
	if err != nil || len(auth.CAs) != 2 {
		t.Fatalf("after rotation: %v CAs, %v", auth, err)
	}
	s, _ := kube.CoreV1().Secrets("longhorn-system").Get(ctx, ServerSecretName, metav1.GetOptions{})
	if string(s.Data[CAFile]) != string(a.Data[CAFile]) {
		t.Error("the servers' Secret does not trust the new CA")
	}
}

func TestKeeperRefusesABrokenCASecretRatherThanReplaceIt(t *testing.T) {
	ctx := context.Background()
	kube := fake.NewClientset()
	clk := clocktesting.NewFakeClock(t0)
	k := newKeeper(kube, clk, "", false)
	if err := k.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	s, _ := kube.CoreV1().Secrets("longhorn-system").Get(ctx, CASecretName, metav1.GetOptions{})
	s.Data[CAKeyFile] = []byte("edited by hand")
	kube.CoreV1().Secrets("longhorn-system").Update(ctx, s, metav1.UpdateOptions{})
	kube.ClearActions()
	if err := newKeeper(kube, clk, "", false).Sync(ctx); err == nil {
		t.Fatal("a broken CA Secret is accepted")
	}
	if n := writes(kube); n != 0 {
		t.Errorf("a broken CA Secret was written %d times", n)
	}
}

// The data sources' leaf is of their narrow role, the managers' of none;
// a leaf of the wrong role where a role is wanted (a component's put in
// the data sources' Secret by hand, say) is replaced at the next sync.
func TestKeeperSignsTheDataSourcesLeafOfItsRole(t *testing.T) {
	ctx := context.Background()
	kube := fake.NewClientset()
	clk := clocktesting.NewFakeClock(t0)
	k := newKeeper(kube, clk, "", true)
	if err := k.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	role := func(name string) string {
		s, err := kube.CoreV1().Secrets("longhorn-system").Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return RoleOf(leafOf(s.Data[CertFile]))
	}
	if got := role(DataSourceSecretName); got != RoleDataSource {
		t.Errorf("the data sources' leaf is of role %q", got)
	}
	if got := role(ServerSecretName); got != RoleComponent {
		t.Errorf("the managers' leaf is of role %q", got)
	}
	// A component's leaf in the data sources' Secret.
	comp, _ := kube.CoreV1().Secrets("longhorn-system").Get(ctx, ServerSecretName, metav1.GetOptions{})
	ds, _ := kube.CoreV1().Secrets("longhorn-system").Get(ctx, DataSourceSecretName, metav1.GetOptions{})
	ds.Data = comp.Data
	if _, err := kube.CoreV1().Secrets("longhorn-system").Update(ctx, ds, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := k.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if got := role(DataSourceSecretName); got != RoleDataSource {
		t.Errorf("a component's leaf in the data sources' Secret was kept: role %q", got)
	}
}
