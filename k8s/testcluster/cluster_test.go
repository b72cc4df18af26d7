package testcluster

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	lhclientset "github.com/cadence-storage/longhorn-manager/k8s/pkg/client/clientset/versioned"
)

// The control plane keeps its state in its data folder: objects created
// before a stop are there after a start, and the CRDs are Established.
func TestRestartKeepsObjects(t *testing.T) {
	SkipIfShort(t, "a control plane of its own")
	dir := t.TempDir()
	ctx := context.Background()

	started := time.Now()
	c, err := Start(ctx, Options{DataDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("control plane ready in %s", time.Since(started).Round(10*time.Millisecond))
	assertEtcdIsItsUsersAlone(t, c)
	kube := c.KubeClient(t)
	if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "keep"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	lh, err := lhclientset.NewForConfig(c.Config)
	if err != nil {
		t.Fatal(err)
	}
	setting := &longhorn.Setting{ObjectMeta: metav1.ObjectMeta{Name: "backup-target"}, Value: "nfs://server:/export"}
	if _, err := lh.LonghornV1beta2().Settings("keep").Create(ctx, setting, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	stopStart := time.Now()
	if err := c.Stop(); err != nil {
		t.Fatal(err)
	}
	t.Logf("control plane stopped in %s", time.Since(stopStart).Round(10*time.Millisecond))

	c, err = Start(ctx, Options{DataDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Stop()
	lh, err = lhclientset.NewForConfig(c.Config)
	if err != nil {
		t.Fatal(err)
	}
	got, err := lh.LonghornV1beta2().Settings("keep").Get(ctx, "backup-target", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("setting lost across a restart: %v", err)
	}
	if got.Value != "nfs://server:/export" {
		t.Errorf("setting value %q after restart", got.Value)
	}
}
