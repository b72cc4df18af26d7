//go:build e2e

package snapshot

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	"github.com/cadence-storage/longhorn-manager/k8s/testcluster"
	"github.com/cadence-storage/longhorn-manager/test/e2e/framework"
)

// The admission policy of k8s/crds/policies keeps a Snapshot's link to
// its Volume once set, through kubectl as a user would try; no manager
// runs, so only the apiserver answers.
func TestSnapshotVolumeLinkIsImmutableOnceSet(t *testing.T) {
	t.Parallel()
	cluster := testcluster.Get(t)
	// No manager runs here to release Longhorn's finalizer, which the
	// manager namespace's admission policy would add.
	ns := cluster.NewPlainNamespace(t)
	lh := framework.LHClient(t, cluster.Config)
	ctx := context.Background()
	vol, err := lh.LonghornV1beta2().Volumes(ns).Create(ctx, &longhorn.Volume{
		ObjectMeta: metav1.ObjectMeta{Name: "vol"},
		Spec:       longhorn.VolumeSpec{Size: 1 << 20, NumberOfReplicas: 1},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	kubectl := func(args ...string) (string, error) {
		return cluster.TryKubectl("", append([]string{"-n", ns}, args...)...)
	}
	owner := fmt.Sprintf(`{"apiVersion":"longhorn.io/v1beta2","kind":"Volume","name":"vol","uid":%q}`, vol.UID)
	cluster.Kubectl(t, fmt.Sprintf(`apiVersion: longhorn.io/v1beta2
kind: Snapshot
metadata:
  name: linked
  labels: {longhornvolume: vol}
  ownerReferences: [%s]
spec: {volume: vol}
---
apiVersion: longhorn.io/v1beta2
kind: Snapshot
metadata: {name: unlinked}
spec: {volume: vol}
---
apiVersion: longhorn.io/v1beta2
kind: Snapshot
metadata:
  name: mislabelled
  labels: {longhornvolume: another}
spec: {volume: vol}
`, owner), "-n", ns, "apply", "-f", "-")

	refused := func(what, rule string, args ...string) {
		t.Helper()
		// A new policy takes a moment to reach the apiserver's admission:
		// wait with dry runs, which admission sees but nothing keeps.
		framework.Eventually(t, 20*time.Second, what+" refused", func() (bool, error) {
			_, err := kubectl(append(args, "--dry-run=server")...)
			return err != nil, nil
		})
		_, err := kubectl(args...)
		if err == nil {
			t.Fatalf("%s was allowed", what)
		}
		out := err.Error()
		t.Logf("%s: %s", what, out)
		for _, want := range []string{"longhorn-snapshot-volume-link", "immutable once set", rule} {
			if !strings.Contains(out, want) {
				t.Errorf("%s: the refusal does not say %q:\n%s", what, want, out)
			}
		}
	}
	refused("changing the volume label", "snapshot-volume-label", "label", "lhsnap", "linked", "longhornvolume=other", "--overwrite")
	refused("removing the volume label", "snapshot-volume-label", "label", "lhsnap", "linked", "longhornvolume-")
	refused("moving a wrong volume label to a third volume", "snapshot-volume-label", "label", "lhsnap", "mislabelled", "longhornvolume=third", "--overwrite")
	refused("removing the owner reference", "snapshot-volume-owner",
		"patch", "lhsnap", "linked", "--type=json", "-p", `[{"op":"remove","path":"/metadata/ownerReferences"}]`)
	refused("pointing the owner reference at another volume", "snapshot-volume-owner",
		"patch", "lhsnap", "linked", "--type=merge", "-p",
		`{"metadata":{"ownerReferences":[{"apiVersion":"longhorn.io/v1beta2","kind":"Volume","name":"vol","uid":"00000000-0000-0000-0000-000000000000"}]}}`)

	// Other labels change freely, and a missing link may be added, or a
	// wrong label corrected to the snapshot's volume, as the manager does.
	for _, args := range [][]string{
		{"label", "lhsnap", "linked", "purpose=test"},
		{"label", "lhsnap", "unlinked", "longhornvolume=vol"},
		{"label", "lhsnap", "mislabelled", "longhornvolume=vol", "--overwrite"},
		{"patch", "lhsnap", "unlinked", "--type=merge", "-p", `{"metadata":{"ownerReferences":[` + owner + `]}}`},
	} {
		if _, err := kubectl(args...); err != nil {
			t.Errorf("kubectl %s: %v", strings.Join(args, " "), err)
		}
	}

	// Deleting one works, and the garbage collector deletes the other
	// with its volume.
	if _, err := kubectl("delete", "lhsnap", "linked"); err != nil {
		t.Fatal(err)
	}
	if err := lh.LonghornV1beta2().Volumes(ns).Delete(ctx, "vol", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, 90*time.Second, "the owned snapshot collected with its volume", func() (bool, error) {
		_, err := lh.LonghornV1beta2().Snapshots(ns).Get(ctx, "unlinked", metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
}
