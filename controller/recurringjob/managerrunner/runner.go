package managerrunner

import (
	"context"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/sirupsen/logrus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"

	"github.com/cadence-storage/longhorn-manager/controller/kit"
	"github.com/cadence-storage/longhorn-manager/datastore"
	"github.com/cadence-storage/longhorn-manager/types"
)

// Lease is the Lease held by the one manager that fires
// recurring jobs when the manager runner is chosen.
const Lease = "longhorn-recurring-job-runner"

// RunFunc runs job once for tick: what a CronJob pod does with
// `longhorn-manager recurring-job`, done in the manager. It returns what
// the run did to its volumes, for the job's last-run annotation (nil if
// the run did not happen), which the Runner writes as the run ends, and
// an error when the run could not happen at all or some volume failed.
type RunFunc func(ctx context.Context, job string, tick time.Time) (*types.RecurringJobRunVolumes, error)

// Config tunes the manager runner.
type Config struct {
	// Identity names this manager in the Lease and in status.active.
	Identity string
	// MaxConcurrentRuns bounds the runs executing at once; runs beyond it
	// wait (they are fired, and active, already).
	MaxConcurrentRuns int
	// LeaseDuration, RenewDeadline and RetryPeriod tune the Lease; zero
	// means 15 s, 10 s and 2 s.
	LeaseDuration, RenewDeadline, RetryPeriod time.Duration
	// SkipImmediatelyDefault is skipImmediately for jobs that leave it
	// out (the daemon's --recurring-job-skip-immediately).
	SkipImmediatelyDefault bool
	// OnFire, when set, is told of every run fired and how late; the
	// benchmarks use it.
	OnFire func(job string, tick time.Time, lateness time.Duration)
}

// Runner is the manager runner: while this manager holds the
// runner Lease, it decides for every job when a tick is due (the pure
// schedule.Decide), records the run in the job's status before starting
// it, runs it in this process, and records its end. A run is identified by
// its job and tick: the status write that starts it is guarded by the
// job's resourceVersion, so no tick is started twice, and a run that was
// recorded but whose manager stopped is finished by the next Lease holder.
type Runner struct {
	logger   *logrus.Entry
	metrics  *kit.Metrics
	ds       *datastore.DataStore
	recorder record.EventRecorder
	clock    clock.Clock
	cfg      Config
	run      RunFunc
	synced   []cache.InformerSynced
	lateness prometheus.Histogram

	mu sync.Mutex
	// base is the queue of the current leadership term; nil while this
	// manager does not hold the Lease.
	base    *kit.Base
	runs    *runTable
	wg      sync.WaitGroup
	slots   chan struct{}
	leading bool
	terms   leaderTerms
}

// New wires the runner to the RecurringJob informer.
func New(logger *logrus.Entry, metrics *kit.Metrics, registry prometheus.Registerer, ds *datastore.DataStore, inf datastore.Informers,
	recorder record.EventRecorder, clk clock.Clock, cfg Config, run RunFunc) *Runner {
	if cfg.MaxConcurrentRuns <= 0 {
		cfg.MaxConcurrentRuns = 20
	}
	jobs := inf.Longhorn.Longhorn().V1beta2().RecurringJobs().Informer()
	r := &Runner{
		logger: logger.WithField("controller", "longhorn-recurring-job-runner"), metrics: metrics,
		ds: ds, recorder: recorder, clock: clk, cfg: cfg, run: run,
		synced: []cache.InformerSynced{jobs.HasSynced},
		lateness: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "longhorn_recurring_job_fire_lateness_seconds",
			Help:    "How long after its tick the manager runner started a run.",
			Buckets: []float64{.01, .05, .1, .25, .5, 1, 2, 5, 10, 30, 60},
		}),
		runs:  newRunTable(),
		slots: make(chan struct{}, cfg.MaxConcurrentRuns),
	}
	if registry != nil {
		registry.MustRegister(r.lateness)
	}
	jobs.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: r.enqueue,
		UpdateFunc: func(old, cur any) {
			// The runner keeps its own timers: a resync (same object)
			// brings nothing new.
			if o, ok := old.(metav1.Object); ok {
				if c, ok := cur.(metav1.Object); ok && o.GetResourceVersion() == c.GetResourceVersion() {
					return
				}
			}
			r.enqueue(cur)
		},
		DeleteFunc: r.enqueue,
	})
	return r
}

func (r *Runner) enqueue(obj any) {
	r.mu.Lock()
	base := r.base
	r.mu.Unlock()
	if base != nil {
		base.Enqueue(obj)
	}
}

// Leading reports whether this manager holds the runner Lease.
func (r *Runner) Leading() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.leading
}

// Run competes for the runner Lease until ctx ends; while it holds it, it
// fires jobs with workers workers.
func (r *Runner) Run(ctx context.Context, workers int) error {
	leaseDuration, renew, retry := r.cfg.LeaseDuration, r.cfg.RenewDeadline, r.cfg.RetryPeriod
	if leaseDuration <= 0 {
		leaseDuration, renew, retry = 15*time.Second, 10*time.Second, 2*time.Second
	}
	for ctx.Err() == nil {
		// A suffix tells two processes of one node apart (a restart
		// before the old Lease expired).
		identity := r.cfg.Identity + "-" + rand.String(5)
		elector, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
			Lock: r.ds.LeaseLock(Lease, identity), Name: Lease,
			LeaseDuration: leaseDuration, RenewDeadline: renew, RetryPeriod: retry,
			// client-go would release the Lease as soon as renewing stops,
			// before this term's runs have stopped; it is released below,
			// after them, so two managers never run at once.
			ReleaseOnCancel: false,
			Callbacks: leaderelection.LeaderCallbacks{
				OnStartedLeading: func(ctx context.Context) {
					ok, end := r.terms.begin(ctx)
					if !ok {
						return
					}
					defer end()
					r.lead(ctx, workers)
				},
				OnStoppedLeading: func() { r.logger.Info("No longer holds the recurring-job runner Lease") },
			},
		})
		if err != nil {
			return err
		}
		elector.Run(ctx)
		r.terms.wait()
		if err := r.ds.ReleaseLease(Lease, identity, r.clock.Now()); err != nil {
			r.logger.WithError(err).Warn("Cannot release the recurring-job runner Lease; it expires by itself")
		}
	}
	return nil
}

// lead is one leadership term: a fresh queue holding every job, workers,
// and at the end a wait for this term's runs to stop.
func (r *Runner) lead(ctx context.Context, workers int) {
	r.logger.WithField("identity", r.cfg.Identity).Info("Holds the recurring-job runner Lease; firing recurring jobs")
	base := kit.NewBase("longhorn-recurring-job-runner", r.logger, nil, r.sync, r.synced...)
	base.CountIn(r.metrics)
	r.mu.Lock()
	r.base, r.leading = base, true
	r.mu.Unlock()
	if jobs, err := r.ds.ListRecurringJobsRO(); err == nil {
		for _, job := range jobs {
			base.Enqueue(job)
		}
	}
	_ = base.Run(ctx, workers)
	r.mu.Lock()
	if r.base == base {
		r.base, r.leading = nil, false
	}
	r.mu.Unlock()
	r.wg.Wait()
}

// requeue looks at the job again after d, in the current term.
func (r *Runner) requeue(key string, d time.Duration) {
	r.mu.Lock()
	base := r.base
	r.mu.Unlock()
	if base != nil {
		base.Queue.AddAfter(key, d)
	}
}
