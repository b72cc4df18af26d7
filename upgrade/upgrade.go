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
	"k8s.io/client-go/util/retry"

	"github.com/cadence-storage/longhorn-manager/internal/apiretry"
	"github.com/cadence-storage/longhorn-manager/types"
	"github.com/cadence-storage/longhorn-manager/upgrade/step"
	"github.com/cadence-storage/longhorn-manager/upgrade/v110to120"
	"github.com/cadence-storage/longhorn-manager/upgrade/v120to180"
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
	{Version: "v1.8.0", Name: "v120to180: the default BackupTarget from the backup settings", Migrate: v120to180.Migrate},
}

// Run migrates under the upgrade Lease. identity names this manager in the
// Lease; managers that start at once wait for the holder and then find
// nothing left to do. A Lease lost midway (the apiserver restarted, so it
// could not be renewed in time) is taken again and the migration run
// again, which the migrators' idempotence allows, until c.Retry's
// deadline.
func Run(ctx context.Context, c step.Clients, identity string) error {
	timeout := c.Retry.Timeout
	if timeout <= 0 {
		timeout = apiretry.DefaultTimeout
	}
	deadline := time.Now().Add(timeout)
	for lost := 1; ; lost++ {
		lostLease, err := runLeading(ctx, c, identity)
		if !lostLease {
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("lost the upgrade lease %s while migrating %d times in %s, the last time with: %w", LeaseName, lost, timeout, err)
		}
		c.Log.WithFields(logrus.Fields{"lease": LeaseName, "times": lost}).WithError(err).
			Warn("Lost the upgrade lease while migrating (could the apiserver be restarting?); taking it again to finish")
	}
}

// runLeading takes the Lease and migrates once. lostLease is true when
// the migration failed because the Lease was lost while it ran.
func runLeading(ctx context.Context, c step.Clients, identity string) (lostLease bool, err error) {
	lock := &resourcelock.LeaseLock{
		LeaseMeta:  metav1.ObjectMeta{Name: LeaseName, Namespace: c.Namespace},
		Client:     c.Kube.CoordinationV1(),
		LockConfig: resourcelock.ResourceLockConfig{Identity: identity + "-" + rand.String(6)},
	}
	leCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	var result error
	lost := false
	done := make(chan struct{})
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
			OnStartedLeading: func(leading context.Context) {
				defer close(done)
				result = migrate(leading, c)
				// The leading context ends before ours only when the
				// Lease could not be renewed.
				lost = leading.Err() != nil && leCtx.Err() == nil
				cancel()
			},
			OnStoppedLeading: func() {},
		},
	})
	// RunOrDie returns before the callback ends when the Lease is lost,
	// and may return as it ends: wait for it. Unless ctx ended, the Lease
	// was taken, so the callback runs.
	if ctx.Err() == nil {
		<-done
		ran = true
	} else {
		select {
		case <-done:
			ran = true
		case <-time.After(renewDeadline):
		}
	}
	if !ran {
		if err := ctx.Err(); err != nil {
			return false, fmt.Errorf("stopped while waiting for the upgrade lease: %w", err)
		}
		return false, fmt.Errorf("lost the upgrade lease before migrating")
	}
	return result != nil && lost, result
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
	var cm *corev1.ConfigMap
	err := c.Call(ctx, "get ConfigMap "+VersionConfigMap, func(ctx context.Context) (err error) {
		cm, err = c.Kube.CoreV1().ConfigMaps(c.Namespace).Get(ctx, VersionConfigMap, metav1.GetOptions{})
		return err
	})
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
	// Read afresh on each try: a write that timed out may have been
	// applied, and then the next create or update meets it.
	err := c.Call(ctx, "record data version in ConfigMap "+VersionConfigMap, func(ctx context.Context) error {
		return retry.OnError(retry.DefaultRetry, func(err error) bool { return apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err) }, func() error {
			cm, err := cms.Get(ctx, VersionConfigMap, metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				_, err = cms.Create(ctx, &corev1.ConfigMap{
					ObjectMeta: metav1.ObjectMeta{Name: VersionConfigMap, Labels: map[string]string{types.LabelManagedBy: types.ManagedByValue}},
					Data:       map[string]string{versionKey: v},
				}, metav1.CreateOptions{})
				return err
			}
			if err != nil {
				return err
			}
			cm.Data = map[string]string{versionKey: v}
			_, err = cms.Update(ctx, cm, metav1.UpdateOptions{})
			return err
		})
	})
	if err != nil {
		return fmt.Errorf("record data version %s in ConfigMap %s: %w", v, VersionConfigMap, err)
	}
	return nil
}
