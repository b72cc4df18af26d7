// Package metrics exports what an operator of backups asks: did every
// recurring job run, when was every volume last backed up and snapshotted,
// which jobs protect it, how big and slow backups are, whether the backup
// target answers, and whether backing images have their copies. It reads
// the datastore's informer caches at scrape time, so a deleted object
// leaves no series, and counts the runs it sees end.
//
// Every manager serves the objects it owns (status.ownerID is its node),
// so the series of a cluster's managers add up without doubles.
package metrics

import (
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/sirupsen/logrus"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"

	"github.com/cadence-storage/longhorn-manager/controller/backup"
	"github.com/cadence-storage/longhorn-manager/datastore"
	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
)

// TargetHealthFunc is what the last poll of each backup target this node
// polls found, by target name.
type TargetHealthFunc func() map[string]backup.TargetHealth

// Collector is the prometheus.Collector of the backup metrics.
type Collector struct {
	log    *logrus.Entry
	ds     *datastore.DataStore
	nodeID string
	clock  clock.Clock
	// target is set once the controllers exist, while the API may
	// already serve scrapes.
	target atomic.Pointer[TargetHealthFunc]
	runs   runCounts
}

// New makes the collector and watches the RecurringJob informer for runs
// that end; it must be called before the informers start.
func New(log *logrus.Entry, ds *datastore.DataStore, inf datastore.Informers, nodeID string, clk clock.Clock) *Collector {
	c := &Collector{log: log.WithField("component", "metrics"), ds: ds, nodeID: nodeID, clock: clk}
	inf.Longhorn.Longhorn().V1beta2().RecurringJobs().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		UpdateFunc: c.jobChanged,
	})
	return c
}

// WatchTarget tells the collector where to read the backup target's health.
func (c *Collector) WatchTarget(f TargetHealthFunc) { c.target.Store(&f) }

// jobChanged counts the runs that ended between two versions of a job the
// node owns: the owner alone counts, so the cluster counts each run once.
func (c *Collector) jobChanged(oldObj, curObj any) {
	old, ok1 := oldObj.(*longhorn.RecurringJob)
	cur, ok2 := curObj.(*longhorn.RecurringJob)
	if !ok1 || !ok2 || old.ResourceVersion == cur.ResourceVersion || cur.Status.OwnerID != c.nodeID {
		return
	}
	runs := finishedRuns(&old.Status, &cur.Status, c.clock.Now())
	for _, r := range runs {
		c.log.WithFields(logrus.Fields{"recurringJob": cur.Name, "result": r.result}).Debug("Counted a tick of a recurring job")
	}
	c.runs.add(cur.Name, runs)
	if v, ok := newRunVolumes(old.Annotations, cur.Annotations); ok {
		c.runs.addVolumes(cur.Name, v)
	}
}

// Describe sends every metric's description.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range allDescs {
		ch <- d
	}
}

// Collect reads the caches and sends the series of the objects this node
// owns.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	now := c.clock.Now()
	jobs, err := c.ds.ListRecurringJobsRO()
	if err != nil {
		c.log.WithError(err).Warn("Cannot list recurring jobs for the metrics")
		return
	}
	c.collectJobs(ch, jobs, now)
	c.collectVolumes(ch, jobs, now)
	c.collectBackups(ch)
	c.collectBackingImages(ch)
}

var allDescs []*prometheus.Desc

func newDesc(name, help string, labels ...string) *prometheus.Desc {
	d := prometheus.NewDesc(name, help, labels, nil)
	allDescs = append(allDescs, d)
	return d
}

func gauge(ch chan<- prometheus.Metric, d *prometheus.Desc, v float64, labels ...string) {
	ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
}

func counter(ch chan<- prometheus.Metric, d *prometheus.Desc, v float64, labels ...string) {
	ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, v, labels...)
}

func boolValue(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// unixSeconds is t in seconds since the epoch, 0 for the zero time.
func unixSeconds(t time.Time) float64 {
	if t.IsZero() {
		return 0
	}
	return float64(t.UnixNano()) / 1e9
}

// parseTime reads the RFC 3339 times of statuses; zero when empty or bad.
func parseTime(s string) time.Time {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}
	}
	return t
}
