// Package jobrun is one run of a recurring job: what
// `longhorn-manager recurring-job <name>` does in a CronJob pod. It reads
// the job, selects its volumes by label, and runs the job's task on each,
// at most `concurrency` at a time, through the manager's API.
package jobrun

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sirupsen/logrus"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/record"

	"github.com/cadence-storage/longhorn-manager/client"
	"github.com/cadence-storage/longhorn-manager/datastore"
	"github.com/cadence-storage/longhorn-manager/internal/panics"
	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	lhclientset "github.com/cadence-storage/longhorn-manager/k8s/pkg/client/clientset/versioned"
	"github.com/cadence-storage/longhorn-manager/types"
)

const (
	// snapshotPrefixLength cuts the job name in snapshot names, as
	// Longhorn does, to stay within name limits.
	snapshotPrefixLength = 8
)

// Executor performs one run of a recurring job: its volumes selected and
// its task done on each. The manager runner (controller/recurringjob/managerrunner.Runner,
// which decides when a job fires) and a CronJob pod both run jobs with it.
type Executor struct {
	Namespace string
	Longhorn  lhclientset.Interface
	Kube      kubernetes.Interface
	API       *client.Client
	Log       *logrus.Entry
	// RetryFor bounds retries of the apiserver at start.
	RetryFor time.Duration
	// Tick is the schedule time this run is for.
	Tick time.Time
	// BackupTimeout bounds the wait for one backup to complete.
	BackupTimeout time.Duration
	// Decided is set by the manager runner, which has decided already
	// that this tick runs (and may be finishing a run another manager
	// started); the checks a CronJob pod needs (a skipped tick, a
	// suspended job, a tick of a replaced schedule) are then not made.
	Decided bool
	// LeaveRecord is set by the manager runner, which writes the run's
	// Result.Record in the write that ends the run (one write fewer
	// than the run's own, and no conflict with it); a CronJob pod writes
	// it itself.
	LeaveRecord bool
	// Cache, when set, is read for the job and its volumes instead of the
	// apiserver: the manager runner has them in its informers. Neither is
	// modified.
	Cache *datastore.DataStore
	// BeforeVolume, when set, is called before each volume's work; tests
	// use it to hold a run in the middle.
	BeforeVolume func(ctx context.Context, job, volume string)
	// AfterAttach, when set, is called once a volume is attached for the
	// run, before the task; tests use it to change the volume's
	// attachment while the run holds it.
	AfterAttach func(ctx context.Context, job, volume string)
	// Recorder, when set, records the run's Events (the manager runner's
	// recorder, with its aggregation and rate limits). A CronJob pod,
	// which exits right after its run, has none: its one Event is
	// written before the run returns.
	Recorder record.EventRecorder
}

// Result counts the volumes of a run.
type Result struct {
	Succeeded, Failed, Skipped int
	// MaxInFlight is the most volumes worked on at once.
	MaxInFlight int
	// Record is what the run did to its volumes, for the job's last-run
	// annotation; nil when the run did not happen (the job is gone, or
	// the tick is not to run).
	Record *types.RecurringJobRunVolumes
}

// ErrVolumesFailed is wrapped by Result.Err when some volume failed.
var ErrVolumesFailed = errors.New("volumes failed")

// Err is the run's outcome as an error: nil when no volume failed. A run
// where a volume failed is a failed run (its CronJob's Job fails, and the
// manager runner does not count it as successful), even though the other
// volumes were done.
func (res Result) Err() error {
	if res.Failed == 0 {
		return nil
	}
	return fmt.Errorf("%w: %d of %d (%d succeeded, %d skipped); the job's events and this log say why",
		ErrVolumesFailed, res.Failed, res.Failed+res.Succeeded+res.Skipped, res.Succeeded, res.Skipped)
}

// Run runs job once. It returns an error only when the run could not
// happen at all; failures of single volumes are counted and reported.
func (r *Executor) Run(ctx context.Context, name string) (Result, error) {
	log := r.Log.WithFields(logrus.Fields{"recurringJob": name, "tick": r.Tick.UTC().Format(time.RFC3339)})
	var job *longhorn.RecurringJob
	err := wait.PollUntilContextTimeout(ctx, time.Second, r.RetryFor, true, func(ctx context.Context) (bool, error) {
		var err error
		if r.Cache != nil {
			job, err = r.Cache.GetRecurringJobRO(name)
			return err == nil || apierrors.IsNotFound(err), err
		}
		job, err = r.Longhorn.LonghornV1beta2().RecurringJobs(r.Namespace).Get(ctx, name, metav1.GetOptions{})
		if err == nil || apierrors.IsNotFound(err) || apierrors.IsForbidden(err) {
			return true, err
		}
		log.WithError(err).Warn("Cannot read the recurring job yet; retrying")
		return false, nil
	})
	if apierrors.IsNotFound(err) {
		log.Info("The recurring job no longer exists; nothing to do")
		return Result{}, nil
	}
	if err != nil {
		return Result{}, fmt.Errorf("read recurring job %s: %w", name, err)
	}
	if !r.Decided {
		if reason := notThisTick(job, r.Tick); reason != "" {
			log.Info(reason + "; nothing to do")
			return Result{}, nil
		}
	}
	maxRetention := 250
	if v, err := r.setting(ctx, types.SettingNameRecurringJobMaxRetention); err == nil {
		fmt.Sscanf(v, "%d", &maxRetention)
	} else {
		return Result{}, fmt.Errorf("the manager API cannot be reached: %w", err)
	}
	warning, err := datastore.CheckRecurringJobToRun(job, maxRetention, time.Now())
	if err != nil {
		r.event(ctx, job, corev1.EventTypeWarning, "InvalidSpec", "not run: "+err.Error())
		return Result{}, fmt.Errorf("recurring job %s is invalid: %w", name, err)
	}
	if warning != "" {
		log.Warn(warning)
	}
	if job.Spec.Task == longhorn.RecurringJobTypeSystemBackup {
		// A system backup is of the cluster, not of the job's volumes.
		res := r.runSystemBackup(ctx, job, log)
		r.record(ctx, job, &res)
		return res, nil
	}
	volumes, err := r.selectVolumes(ctx, job)
	if err != nil {
		return Result{}, err
	}
	allowDetached := false
	if v, err := r.setting(ctx, types.SettingNameAllowRecurringJobWhileVolumeDetached); err == nil {
		allowDetached = v == "true"
	}
	log.WithFields(logrus.Fields{"task": job.Spec.Task, "volumes": len(volumes), "concurrency": job.Spec.Concurrency}).Info("Running recurring job")

	var (
		res      Result
		mu       sync.Mutex
		inFlight atomic.Int32
		wg       sync.WaitGroup
		slots    = make(chan struct{}, max(job.Spec.Concurrency, 1))
	)
	for _, v := range volumes {
		if ctx.Err() != nil {
			break // stopping: the rest is left to a retry of the run
		}
		wg.Add(1)
		slots <- struct{}{}
		go func(v *longhorn.Volume) {
			defer wg.Done()
			defer func() { <-slots }()
			n := int(inFlight.Add(1))
			defer inFlight.Add(-1)
			vlog := log.WithField("volume", v.Name)
			// A panic in one volume's work fails that volume only.
			outcome, err := func() (outcome string, err error) {
				defer panics.Recover(vlog, &err)
				if r.BeforeVolume != nil {
					r.BeforeVolume(ctx, job.Name, v.Name)
				}
				return r.runVolume(ctx, job, v, allowDetached)
			}()
			mu.Lock()
			defer mu.Unlock()
			res.MaxInFlight = max(res.MaxInFlight, n)
			switch {
			case err != nil:
				res.Failed++
				vlog.WithError(err).Error("Volume failed")
			case outcome != "":
				res.Skipped++
				vlog.WithField("reason", outcome).Info("Volume skipped")
			default:
				res.Succeeded++
				vlog.Info("Volume done")
			}
		}(v)
	}
	wg.Wait()
	msg := fmt.Sprintf("run for %s: %d volumes succeeded, %d failed, %d skipped", r.Tick.UTC().Format(time.RFC3339), res.Succeeded, res.Failed, res.Skipped)
	kind, reason := corev1.EventTypeNormal, "Completed"
	if res.Failed > 0 {
		kind, reason = corev1.EventTypeWarning, "VolumesFailed"
	}
	r.event(ctx, job, kind, reason, msg)
	r.record(ctx, job, &res)
	log.WithFields(logrus.Fields{"succeeded": res.Succeeded, "failed": res.Failed, "skipped": res.Skipped, "maxInFlight": res.MaxInFlight}).Info("Recurring job run finished")
	return res, nil
}

// record keeps what the run did in res.Record, and on the job unless the
// manager runner writes it.
func (r *Executor) record(ctx context.Context, job *longhorn.RecurringJob, res *Result) {
	res.Record = &types.RecurringJobRunVolumes{Tick: r.Tick.UTC().Format(time.RFC3339),
		Succeeded: res.Succeeded, Failed: res.Failed, Skipped: res.Skipped}
	if !r.LeaveRecord {
		r.recordVolumes(ctx, job.Name, *res.Record)
	}
}

// setting reads a setting's value: from the cache in the manager runner
// (the same value the API answers with, without a request to it per run),
// else from the manager's API.
func (r *Executor) setting(ctx context.Context, name types.SettingName) (string, error) {
	if r.Cache != nil {
		return r.Cache.GetSettingValue(name)
	}
	return r.API.Setting(ctx, string(name))
}

// notThisTick says why a CronJob pod's run for tick must do nothing, or
// "": the tick was skipped or forbidden (not after lastSkipped), the job
// is suspended, or the tick belongs to the schedule before the last change.
func notThisTick(job *longhorn.RecurringJob, tick time.Time) string {
	if t := job.Status.LastSkipped; t != nil && !tick.After(t.Time) {
		return "This tick was skipped (lastSkipped " + t.UTC().Format(time.RFC3339) + ")"
	}
	if job.Spec.Suspend {
		return "The recurring job is suspended"
	}
	if o := job.Status.ObservedSchedule; o != nil && o.Since != nil && !tick.After(o.Since.Time) {
		return "This tick belongs to the schedule before the change at " + o.Since.UTC().Format(time.RFC3339)
	}
	return ""
}

// selectVolumes lists the volumes labelled with the job or one of its
// groups, each once, sorted by name.
func (r *Executor) selectVolumes(ctx context.Context, job *longhorn.RecurringJob) ([]*longhorn.Volume, error) {
	keys := []string{types.RecurringJobLabelKey(job.Name)}
	for _, g := range job.Spec.Groups {
		keys = append(keys, types.RecurringJobGroupLabelKey(g))
	}
	seen := map[string]*longhorn.Volume{}
	for _, key := range keys {
		if r.Cache != nil {
			list, err := r.Cache.ListVolumesRO(labels.SelectorFromSet(labels.Set{key: types.LabelValueEnabled}))
			if err != nil {
				return nil, fmt.Errorf("list the volumes of %s: %w", key, err)
			}
			for _, v := range list {
				seen[v.Name] = v
			}
			continue
		}
		list, err := r.Longhorn.LonghornV1beta2().Volumes(r.Namespace).List(ctx, metav1.ListOptions{LabelSelector: key + "=" + types.LabelValueEnabled})
		if err != nil {
			return nil, fmt.Errorf("list the volumes of %s: %w", key, err)
		}
		for i := range list.Items {
			seen[list.Items[i].Name] = &list.Items[i]
		}
	}
	out := make([]*longhorn.Volume, 0, len(seen))
	for _, v := range seen {
		out = append(out, v)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

func (r *Executor) event(ctx context.Context, job *longhorn.RecurringJob, kind, reason, msg string) {
	if r.Recorder != nil {
		r.Recorder.Event(job, kind, reason, msg)
		return
	}
	now := metav1.NewTime(time.Now())
	_, err := r.Kube.CoreV1().Events(r.Namespace).Create(ctx, &corev1.Event{
		ObjectMeta: metav1.ObjectMeta{GenerateName: job.Name + "-"},
		InvolvedObject: corev1.ObjectReference{
			APIVersion: longhorn.SchemeGroupVersion.String(), Kind: "RecurringJob", Namespace: r.Namespace, Name: job.Name, UID: job.UID,
		},
		Type: kind, Reason: reason, Message: msg, FirstTimestamp: now, LastTimestamp: now, Count: 1,
		Source: corev1.EventSource{Component: "longhorn-recurring-job"},
	}, metav1.CreateOptions{})
	if err != nil {
		r.Log.WithError(err).Warn("Cannot record the run's event")
	}
}

// snapshotName is <job, cut to 8>-c-<random id>.
func snapshotName(job string) string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	prefix := job
	if len(prefix) > snapshotPrefixLength {
		prefix = prefix[:snapshotPrefixLength]
	}
	return prefix + "-c-" + hex.EncodeToString(b[:])
}
