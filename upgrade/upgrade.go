// Package upgrade migrates the manager's data in the cluster to the shape
// this version expects. At daemon start, before any controller runs, Run
// takes the upgrade Lease, applies every migrator newer than the version
// recorded in the cluster, in order, records each version as it finishes,
// and releases the Lease. Every migrator is idempotent: running it again,
// or after a crash at any point, ends in the same state.
package upgrade

import (
	"context"
	"fmt"
	"time"

	"github.com/sirupsen/logrus"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/apimachinery/pkg/util/version"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"

	"github.com/cadence-storage/longhorn-manager/types"
	"github.com/cadence-storage/longhorn-manager/upgrade/step"
	"github.com/cadence-storage/longhorn-manager/upgrade/v110to120"
)

const (
	// LeaseName is the Lease held while a manager migrates.
	LeaseName = "longhorn-manager-upgrade"
	// VersionConfigMap records the version the data was last migrated to.
	VersionConfigMap = "longhorn-manager-data-version"
	versionKey       = "version"

	leaseDuration = 20 * time.Second
	renewDeadline = 10 * time.Second
	retryPeriod   = 2 * time.Second
)

// Migrator moves the data to one version.
type Migrator struct {
	// Version is the data version after the migrator has run.
	Version string
	Name    string
	Migrate func(ctx context.Context, c step.Clients) error
}

// Migrators are every migration, oldest first.
var Migrators = []Migrator{
	{Version: "v1.2.0", Name: "v110to120: per-volume recurring jobs become RecurringJobs and labels", Migrate: v110to120.Migrate},
}

// Run migrates under the upgrade Lease. identity names this manager in the
// Lease; managers that start at once wait for the holder and then find
// nothing left to do.
func Run(ctx context.Context, c step.Clients, identity string) error {
	lock := &resourcelock.LeaseLock{
		LeaseMeta:  metav1.ObjectMeta{Name: LeaseName, Namespace: c.Namespace},
		Client:     c.Kube.CoordinationV1(),
		LockConfig: resourcelock.ResourceLockConfig{Identity: identity + "-" + rand.String(6)},
	}
	leCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	var result error
	ran := false
	log := c.Log.WithField("lease", LeaseName)
	log.Info("Waiting for the upgrade lease")
	leaderelection.RunOrDie(leCtx, leaderelection.LeaderElectionConfig{
		Lock:            lock,
		LeaseDuration:   leaseDuration,
		RenewDeadline:   renewDeadline,
		RetryPeriod:     retryPeriod,
		ReleaseOnCancel: true,
		Name:            LeaseName,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(ctx context.Context) {
				result = migrate(ctx, c)
				ran = true
				cancel()
			},
			OnStoppedLeading: func() {},
		},
	})
	if !ran {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("stopped while waiting for the upgrade lease: %w", err)
		}
		return fmt.Errorf("lost the upgrade lease before migrating")
	}
	return result
}

// migrate applies the migrators newer than the recorded version.
func migrate(ctx context.Context, c step.Clients) error {
	recorded, err := recordedVersion(ctx, c)
	if err != nil {
		return err
	}
	log := c.Log.WithField("recordedVersion", recorded)
	applied := 0
	for _, m := range Migrators {
		if recorded != "" && !version.MustParseSemantic(m.Version).GreaterThan(version.MustParseSemantic(recorded)) {
			continue
		}
		start := time.Now()
		log.WithField("migrator", m.Name).Info("Running migrator")
		if err := m.Migrate(ctx, c); err != nil {
			return fmt.Errorf("upgrade to %s (%s) failed: %w", m.Version, m.Name, err)
		}
		if err := recordVersion(ctx, c, m.Version); err != nil {
			return err
		}
		if err := c.Step("record version " + m.Version); err != nil {
			return err
		}
		log.WithFields(logrus.Fields{"migrator": m.Name, "version": m.Version, "took": time.Since(start).Round(time.Millisecond)}).Info("Migrator finished")
		applied++
	}
	if applied == 0 {
		log.Info("Data is up to date; nothing to migrate")
	}
	return nil
}

// CurrentVersion is the data version this manager writes.
func CurrentVersion() string { return Migrators[len(Migrators)-1].Version }

func recordedVersion(ctx context.Context, c step.Clients) (string, error) {
	cm, err := c.Kube.CoreV1().ConfigMaps(c.Namespace).Get(ctx, VersionConfigMap, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("read the data version from ConfigMap %s: %w", VersionConfigMap, err)
	}
	v := cm.Data[versionKey]
	if _, err := version.ParseSemantic(v); err != nil {
		return "", fmt.Errorf("ConfigMap %s holds data version %q, which is not a version: %w", VersionConfigMap, v, err)
	}
	return v, nil
}

func recordVersion(ctx context.Context, c step.Clients, v string) error {
	cms := c.Kube.CoreV1().ConfigMaps(c.Namespace)
	cm, err := cms.Get(ctx, VersionConfigMap, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		_, err = cms.Create(ctx, &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: VersionConfigMap, Labels: map[string]string{types.LabelManagedBy: types.ManagedByValue}},
			Data:       map[string]string{versionKey: v},
		}, metav1.CreateOptions{})
	} else if err == nil {
		cm.Data = map[string]string{versionKey: v}
		_, err = cms.Update(ctx, cm, metav1.UpdateOptions{})
	}
	if err != nil {
		return fmt.Errorf("record data version %s in ConfigMap %s: %w", v, VersionConfigMap, err)
	}
	return nil
}
