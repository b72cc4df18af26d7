package app

// The daemon starts only on an apiserver that takes its writes. A control
// plane that has just started (or restarted) refuses some for a few
// seconds: its admission has not loaded the CRDs' schemas yet, and the
// MutatingAdmissionPolicies answer a create of a kind they match with
// 503 "Resource kind ... not found. There can be a delay between when
// CustomResourceDefinitions are created and when they are available".

import (
	"context"
	"fmt"
	"time"

	"github.com/sirupsen/logrus"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cadence-storage/longhorn-manager/internal/apiretry"
	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	lhclientset "github.com/cadence-storage/longhorn-manager/k8s/pkg/client/clientset/versioned"
)

// DefaultStartupRetryTimeout is how long the daemon waits, by default,
// for the apiserver to take its writes at start (--startup-retry-timeout).
const DefaultStartupRetryTimeout = apiretry.DefaultTimeout

// writeProbeName names every probe object. Nothing is stored: each create
// is a server-side dry run.
const writeProbeName = "longhorn-write-probe"

// writeProbe is a create of one Longhorn kind.
type writeProbe struct {
	kind   string
	create func(ctx context.Context, opts metav1.CreateOptions) error
}

// writeProbes are a create of every Longhorn kind the manager writes,
// each a valid object, so each passes the admission chain (the mutating
// policies among it), the schema and the validating policies as the
// manager's own writes must.
func writeProbes(lh lhclientset.Interface, ns string) []writeProbe {
	c := lh.LonghornV1beta2()
	meta := func() metav1.ObjectMeta { return metav1.ObjectMeta{Name: writeProbeName, Namespace: ns} }
	created := func(_ any, err error) error { return err }
	disk := func() (string, string, string) { return "probe-node", "probe-disk-uuid", "/var/lib/longhorn" }
	return []writeProbe{
		{"Setting", func(ctx context.Context, o metav1.CreateOptions) error {
			return created(c.Settings(ns).Create(ctx, &longhorn.Setting{ObjectMeta: meta(), Value: "probe"}, o))
		}},
		{"Node", func(ctx context.Context, o metav1.CreateOptions) error {
			return created(c.Nodes(ns).Create(ctx, &longhorn.Node{ObjectMeta: meta(), Spec: longhorn.NodeSpec{Name: writeProbeName}}, o))
		}},
		{"Volume", func(ctx context.Context, o metav1.CreateOptions) error {
			return created(c.Volumes(ns).Create(ctx, &longhorn.Volume{ObjectMeta: meta(), Spec: longhorn.VolumeSpec{Size: 1 << 30, NumberOfReplicas: 1}}, o))
		}},
		{"Engine", func(ctx context.Context, o metav1.CreateOptions) error {
			return created(c.Engines(ns).Create(ctx, &longhorn.Engine{ObjectMeta: meta()}, o))
		}},
		{"Replica", func(ctx context.Context, o metav1.CreateOptions) error {
			return created(c.Replicas(ns).Create(ctx, &longhorn.Replica{ObjectMeta: meta()}, o))
		}},
		{"Snapshot", func(ctx context.Context, o metav1.CreateOptions) error {
			return created(c.Snapshots(ns).Create(ctx, &longhorn.Snapshot{ObjectMeta: meta(), Spec: longhorn.SnapshotSpec{Volume: writeProbeName}}, o))
		}},
		{"RecurringJob", func(ctx context.Context, o metav1.CreateOptions) error {
			return created(c.RecurringJobs(ns).Create(ctx, &longhorn.RecurringJob{ObjectMeta: meta(), Spec: longhorn.RecurringJobSpec{
				Name: writeProbeName, Task: longhorn.RecurringJobTypeSnapshot, Cron: "@hourly", Retain: 1, Concurrency: 1}}, o))
		}},
		{"Backup", func(ctx context.Context, o metav1.CreateOptions) error {
			return created(c.Backups(ns).Create(ctx, &longhorn.Backup{ObjectMeta: meta()}, o))
		}},
		{"BackupVolume", func(ctx context.Context, o metav1.CreateOptions) error {
			return created(c.BackupVolumes(ns).Create(ctx, &longhorn.BackupVolume{ObjectMeta: meta()}, o))
		}},
		{"BackingImage", func(ctx context.Context, o metav1.CreateOptions) error {
			return created(c.BackingImages(ns).Create(ctx, &longhorn.BackingImage{ObjectMeta: meta(), Spec: longhorn.BackingImageSpec{
				SourceType: longhorn.BackingImageDataSourceTypeUpload}}, o))
		}},
		{"BackingImageDataSource", func(ctx context.Context, o metav1.CreateOptions) error {
			node, uuid, path := disk()
			return created(c.BackingImageDataSources(ns).Create(ctx, &longhorn.BackingImageDataSource{ObjectMeta: meta(), Spec: longhorn.BackingImageDataSourceSpec{
				UUID: "probe", NodeID: node, DiskUUID: uuid, DiskPath: path, SourceType: longhorn.BackingImageDataSourceTypeUpload}}, o))
		}},
		{"BackingImageManager", func(ctx context.Context, o metav1.CreateOptions) error {
			node, uuid, path := disk()
			return created(c.BackingImageManagers(ns).Create(ctx, &longhorn.BackingImageManager{ObjectMeta: meta(), Spec: longhorn.BackingImageManagerSpec{
				NodeID: node, DiskUUID: uuid, DiskPath: path}}, o))
		}},
	}
}

// waitForWrites waits until the apiserver takes a create of every
// Longhorn kind: a server-side dry run of each, retried while the
// apiserver refuses it for now (apiretry.Transient) until the deadline of
// p. A refusal that no wait changes (RBAC, a schema) fails at once,
// naming the kind.
func waitForWrites(ctx context.Context, log *logrus.Entry, lh lhclientset.Interface, ns string, p apiretry.Policy) error {
	start := time.Now()
	dryRun := metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}
	probes := writeProbes(lh, ns)
	passed := 0
	err := apiretry.Do(ctx, p, log, "a create of every Longhorn kind (a dry run)", func(ctx context.Context) error {
		// Kinds that went through stay through: a retry starts at the
		// first that did not.
		for ; passed < len(probes); passed++ {
			pr := probes[passed]
			// A kind that exists under the probe's name went through
			// admission to meet it.
			if err := pr.create(ctx, dryRun); err != nil && !apierrors.IsAlreadyExists(err) {
				return fmt.Errorf("a create of a %s is refused: %w", pr.kind, err)
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("the Kubernetes API does not take the manager's writes: %w", err)
	}
	log.WithFields(logrus.Fields{"kinds": len(probes), "took": time.Since(start).Round(time.Millisecond)}).Info("The apiserver takes writes of every Longhorn kind")
	return nil
}
