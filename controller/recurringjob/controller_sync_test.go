package recurringjob

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	batchv1 "k8s.io/api/batch/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	kubefake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/record"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"github.com/cadence-storage/longhorn-manager/controller/kit"
	"github.com/cadence-storage/longhorn-manager/controller/recurringjob/jobstate"
	"github.com/cadence-storage/longhorn-manager/datastore"
	"github.com/cadence-storage/longhorn-manager/internal/synctable"
	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	lhfake "github.com/cadence-storage/longhorn-manager/k8s/pkg/client/clientset/versioned/fake"
	"github.com/cadence-storage/longhorn-manager/types"
)

// syncNow is the clock of the sync table.
var syncNow = time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC)

// syncJob is a valid daily snapshot job as the controller last left it:
// finalizer, owner and observed suspend set.
func syncJob(mutate ...func(*longhorn.RecurringJob)) *longhorn.RecurringJob {
	job := &longhorn.RecurringJob{
		ObjectMeta: metav1.ObjectMeta{Name: "daily", Namespace: "ns", UID: "uid-daily", Generation: 1, Finalizers: []string{types.LonghornFinalizer}},
		Spec:       longhorn.RecurringJobSpec{Name: "daily", Task: longhorn.RecurringJobTypeSnapshot, Cron: "0 3 * * *", Retain: 3, Concurrency: 1, Groups: []string{"gold"}},
		Status:     longhorn.RecurringJobStatus{OwnerID: "node-1", ObservedSuspend: ptr.To(false)},
	}
	for _, m := range mutate {
		m(job)
	}
	return job
}

// newSyncJob is syncJob as first seen: no finalizer, owner or observed
// suspend.
func newSyncJob(mutate ...func(*longhorn.RecurringJob)) *longhorn.RecurringJob {
	return syncJob(append([]func(*longhorn.RecurringJob){func(j *longhorn.RecurringJob) {
		j.Finalizers, j.Status = nil, longhorn.RecurringJobStatus{}
	}}, mutate...)...)
}

func syncNode(name string, ready bool) *longhorn.Node {
	status := longhorn.ConditionStatusFalse
	if ready {
		status = longhorn.ConditionStatusTrue
	}
	return &longhorn.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns"},
		Status: longhorn.NodeStatus{Conditions: []longhorn.Condition{{Type: longhorn.ConditionTypeReady, Status: status}}}}
}

func syncCronJob(labels map[string]string) *batchv1.CronJob {
	return &batchv1.CronJob{ObjectMeta: metav1.ObjectMeta{Name: "daily", Namespace: "ns", Labels: labels}}
}

// TestControllerSync is the recurring job controller's sync decision by
// decision, on fake clientsets (the control-plane suite proves the whole
// loop): each case starts from the cache holding objects, syncs the job
// once, and checks the writes made and what they left.
func TestControllerSync(t *testing.T) {
	ready := func(reason string) func(*testing.T, *longhorn.RecurringJob) {
		return func(t *testing.T, job *longhorn.RecurringJob) {
			t.Helper()
			if c := kit.GetCondition(job.Status.Conditions, longhorn.ConditionTypeReady); c.Reason != reason {
				t.Errorf("Ready condition %+v, want reason %s", c, reason)
			}
		}
	}
	targetFound := func(status longhorn.ConditionStatus, fragment string) func(*testing.T, *longhorn.RecurringJob) {
		return func(t *testing.T, job *longhorn.RecurringJob) {
			t.Helper()
			c := kit.GetCondition(job.Status.Conditions, longhorn.RecurringJobConditionTypeBackupTargetFound)
			if c.Status != status || !strings.Contains(c.Message, fragment) {
				t.Errorf("BackupTargetFound %+v, want %s saying %q", c, status, fragment)
			}
			ready(longhorn.RecurringJobConditionReasonScheduled)(t, job)
			if job.Spec.BackupTargetName != "" && job.Spec.BackupTargetName != "offsite" {
				t.Errorf("spec.backupTargetName changed to %q", job.Spec.BackupTargetName)
			}
		}
	}
	toOffsite := func(j *longhorn.RecurringJob) {
		j.Spec.Task, j.Spec.BackupTargetName = longhorn.RecurringJobTypeBackup, "offsite"
	}
	offsite := &longhorn.BackupTarget{ObjectMeta: metav1.ObjectMeta{Name: "offsite", Namespace: "ns"}, Spec: longhorn.BackupTargetSpec{BackupTargetURL: "file:///offsite"}}
	for _, tc := range []struct {
		name    string
		objects []runtime.Object // Longhorn objects
		kube    []runtime.Object // Kubernetes objects
		runner  longhorn.RecurringJobRunner
		writes  []string
		check   func(*testing.T, *longhorn.RecurringJob)
		cronJob *bool  // whether the job's CronJob exists after the sync
		written string // the resourceVersion the controller's last write returned
	}{
		{
			name:    "a new job (CronJob runner): the finalizer, owner and observed suspend in one sync, then its CronJob and Ready",
			objects: []runtime.Object{newSyncJob(), syncNode("node-1", true)},
			writes:  []string{"create cronjobs", "update recurringjobs", "update recurringjobs/status", "update recurringjobs/status"},
			check: func(t *testing.T, job *longhorn.RecurringJob) {
				if !kit.HasFinalizer(job) || job.Status.OwnerID != "node-1" || !jobstate.SuspendObserved(job) {
					t.Errorf("finalizer %v, owner %q, observed suspend %v", job.Finalizers, job.Status.OwnerID, job.Status.ObservedSuspend)
				}
				ready(longhorn.RecurringJobConditionReasonScheduled)(t, job)
			},
			cronJob: ptr.To(true),
		},
		{
			name:    "a new job (manager runner): the finalizer, then one status write with owner, schedule and Ready; its time is the runner's",
			objects: []runtime.Object{newSyncJob(), syncNode("node-1", true)},
			runner:  longhorn.RecurringJobRunnerManager,
			writes:  []string{"update recurringjobs", "update recurringjobs/status"},
			check: func(t *testing.T, job *longhorn.RecurringJob) {
				if !kit.HasFinalizer(job) || job.Status.OwnerID != "node-1" || !jobstate.ScheduleObserved(job) ||
					job.Status.ObservedSuspend != nil || job.Status.NextScheduleTime != nil {
					t.Errorf("finalizer %v, status %+v", job.Finalizers, job.Status)
				}
				ready(longhorn.RecurringJobConditionReasonScheduled)(t, job)
			},
			cronJob: ptr.To(false),
		},
		{
			name:    "no owner: this node claims it before making the CronJob",
			objects: []runtime.Object{syncJob(func(j *longhorn.RecurringJob) { j.Status.OwnerID = "" }), syncNode("node-1", true)},
			writes:  []string{"create cronjobs", "update recurringjobs/status", "update recurringjobs/status"},
			check: func(t *testing.T, job *longhorn.RecurringJob) {
				if job.Status.OwnerID != "node-1" {
					t.Errorf("owner %q", job.Status.OwnerID)
				}
				ready(longhorn.RecurringJobConditionReasonScheduled)(t, job)
			},
		},
		{
			name:    "no owner, manager runner: claimed in the status write that makes it Ready",
			objects: []runtime.Object{syncJob(func(j *longhorn.RecurringJob) { j.Status.OwnerID = "" }), syncNode("node-1", true)},
			runner:  longhorn.RecurringJobRunnerManager,
			writes:  []string{"update recurringjobs/status"},
			check: func(t *testing.T, job *longhorn.RecurringJob) {
				if job.Status.OwnerID != "node-1" {
					t.Errorf("owner %q", job.Status.OwnerID)
				}
				ready(longhorn.RecurringJobConditionReasonScheduled)(t, job)
			},
		},
		{
			name:    "the cache holds a copy older than the controller's own last write: nothing (the write's event brings the job back)",
			objects: []runtime.Object{newSyncJob(func(j *longhorn.RecurringJob) { j.ResourceVersion = "5" }), syncNode("node-1", true)},
			written: "7",
			writes:  nil,
		},
		{
			name:    "owned by a peer that is up: left alone",
			objects: []runtime.Object{syncJob(func(j *longhorn.RecurringJob) { j.Status.OwnerID = "node-2" }), syncNode("node-1", true), syncNode("node-2", true)},
			writes:  nil,
		},
		{
			name:    "owned by a peer that is down: taken over",
			objects: []runtime.Object{syncJob(func(j *longhorn.RecurringJob) { j.Status.OwnerID = "node-2" }), syncNode("node-1", true), syncNode("node-2", false)},
			runner:  longhorn.RecurringJobRunnerManager,
			writes:  []string{"update recurringjobs/status"},
			check: func(t *testing.T, job *longhorn.RecurringJob) {
				if job.Status.OwnerID != "node-1" {
					t.Errorf("owner %q", job.Status.OwnerID)
				}
			},
		},
		{
			name:    "a valid job: its CronJob is made and the job is Ready, Scheduled",
			objects: []runtime.Object{syncJob(), syncNode("node-1", true)},
			writes:  []string{"create cronjobs", "update recurringjobs/status"},
			check: func(t *testing.T, job *longhorn.RecurringJob) {
				ready(longhorn.RecurringJobConditionReasonScheduled)(t, job)
				if o := job.Status.ObservedSchedule; o == nil || o.Cron != "0 3 * * *" {
					t.Errorf("observed schedule %+v", o)
				}
			},
			cronJob: ptr.To(true),
		},
		{
			name:    "an invalid cron: Ready=False InvalidSpec, and no CronJob",
			objects: []runtime.Object{syncJob(func(j *longhorn.RecurringJob) { j.Spec.Cron = "every day" }), syncNode("node-1", true)},
			writes:  []string{"update recurringjobs/status"},
			check: func(t *testing.T, job *longhorn.RecurringJob) {
				ready(longhorn.RecurringJobConditionReasonInvalidSpec)(t, job)
			},
			cronJob: ptr.To(false),
		},
		{
			name:    "an invalid spec deletes the CronJob of the earlier valid one",
			objects: []runtime.Object{syncJob(func(j *longhorn.RecurringJob) { j.Spec.Cron = "every day" }), syncNode("node-1", true)},
			kube:    []runtime.Object{syncCronJob(map[string]string{types.LabelManagedBy: types.ManagedByValue, types.RecurringJobLabel: "daily"})},
			writes:  []string{"delete cronjobs", "update recurringjobs/status"},
			cronJob: ptr.To(false),
		},
		{
			name:    "a CronJob of the name that is not the manager's: Ready=False CronJobNameTaken, left alone",
			objects: []runtime.Object{syncJob(), syncNode("node-1", true)},
			kube:    []runtime.Object{syncCronJob(map[string]string{"app": "theirs"})},
			writes:  []string{"update recurringjobs/status"},
			check:   ready(longhorn.RecurringJobConditionReasonCronJobNameTaken),
			cronJob: ptr.To(true),
		},
		{
			name:    "the manager runner: no CronJob, and a leftover one is deleted",
			objects: []runtime.Object{syncJob(), syncNode("node-1", true)},
			kube:    []runtime.Object{syncCronJob(map[string]string{types.LabelManagedBy: types.ManagedByValue, types.RecurringJobLabel: "daily"})},
			runner:  longhorn.RecurringJobRunnerManager,
			writes:  []string{"delete cronjobs", "update recurringjobs/status"},
			check:   ready(longhorn.RecurringJobConditionReasonScheduled),
			cronJob: ptr.To(false),
		},
		{
			name: "a deleted job: its labels leave the volumes (a group another job lists stays), then the finalizer",
			objects: []runtime.Object{
				syncJob(func(j *longhorn.RecurringJob) { j.DeletionTimestamp = &metav1.Time{Time: syncNow} }),
				&longhorn.RecurringJob{ObjectMeta: metav1.ObjectMeta{Name: "other", Namespace: "ns"}, Spec: longhorn.RecurringJobSpec{Groups: []string{"silver"}}},
				&longhorn.Volume{ObjectMeta: metav1.ObjectMeta{Name: "vol", Namespace: "ns", Labels: map[string]string{
					types.RecurringJobLabelKey("daily"): "enabled", types.RecurringJobGroupLabelKey("gold"): "enabled",
				}}},
				syncNode("node-1", true),
			},
			writes: []string{"update volumes", "update volumes", "update recurringjobs"},
			check: func(t *testing.T, job *longhorn.RecurringJob) {
				if kit.HasFinalizer(job) {
					t.Error("the finalizer is still there")
				}
			},
		},
		{
			name:    "a backup job whose target was deleted: BackupTargetFound False naming it, still Ready, its spec left",
			objects: []runtime.Object{syncJob(toOffsite), syncNode("node-1", true)},
			runner:  longhorn.RecurringJobRunnerManager,
			writes:  []string{"update recurringjobs/status"},
			check:   targetFound(longhorn.ConditionStatusFalse, `BackupTarget "offsite" does not exist`),
		},
		{
			name:    "a backup job whose target exists: BackupTargetFound True",
			objects: []runtime.Object{syncJob(toOffsite), syncNode("node-1", true), offsite},
			runner:  longhorn.RecurringJobRunnerManager,
			writes:  []string{"update recurringjobs/status"},
			check:   targetFound(longhorn.ConditionStatusTrue, ""),
		},
		{
			name: "a job that no longer names a target loses the condition",
			objects: []runtime.Object{syncJob(func(j *longhorn.RecurringJob) {
				j.Status.Conditions = []longhorn.Condition{{Type: longhorn.RecurringJobConditionTypeBackupTargetFound, Status: longhorn.ConditionStatusFalse}}
			}), syncNode("node-1", true)},
			runner: longhorn.RecurringJobRunnerManager,
			writes: []string{"update recurringjobs/status"},
			check: func(t *testing.T, job *longhorn.RecurringJob) {
				if c := kit.GetCondition(job.Status.Conditions, longhorn.RecurringJobConditionTypeBackupTargetFound); c.Status != longhorn.ConditionStatusUnknown {
					t.Errorf("BackupTargetFound %+v, want none", c)
				}
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lh := lhfake.NewSimpleClientset(tc.objects...)
			kube := kubefake.NewSimpleClientset(tc.kube...)
			inf := datastore.NewInformers(lh, kube, "ns", 0)
			lhi := inf.Longhorn.Longhorn().V1beta2()
			for _, obj := range tc.objects {
				var err error
				switch o := obj.(type) {
				case *longhorn.RecurringJob:
					err = lhi.RecurringJobs().Informer().GetIndexer().Add(o)
				case *longhorn.Node:
					err = lhi.Nodes().Informer().GetIndexer().Add(o)
				case *longhorn.Volume:
					err = lhi.Volumes().Informer().GetIndexer().Add(o)
				case *longhorn.BackupTarget:
					err = lhi.BackupTargets().Informer().GetIndexer().Add(o)
				}
				if err != nil {
					t.Fatal(err)
				}
			}
			for _, obj := range tc.kube {
				if err := inf.Kube.Batch().V1().CronJobs().Informer().GetIndexer().Add(obj); err != nil {
					t.Fatal(err)
				}
			}
			c := newSyncTestController(t, lh, kube, inf, tc.runner)
			c.written.Remember("ns/daily", tc.written)
			lh.ClearActions()
			kube.ClearActions()

			if _, err := c.sync(context.Background(), "ns/daily"); err != nil {
				t.Fatalf("sync: %v", err)
			}

			got := append(synctable.Writes(kube.Actions()), synctable.Writes(lh.Actions())...)
			if !slices.Equal(got, tc.writes) {
				t.Errorf("writes %v, want %v", got, tc.writes)
			}
			job, err := lh.LonghornV1beta2().RecurringJobs("ns").Get(context.Background(), "daily", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if tc.check != nil {
				tc.check(t, job)
			}
			if tc.cronJob != nil {
				_, err := kube.BatchV1().CronJobs("ns").Get(context.Background(), "daily", metav1.GetOptions{})
				if exists := err == nil; exists != *tc.cronJob {
					t.Errorf("CronJob exists: %v (%v), want %v", exists, err, *tc.cronJob)
				} else if err != nil && !apierrors.IsNotFound(err) {
					t.Fatal(err)
				}
			}
		})
	}
}

// newSyncTestController is the controller of node-1 on fake clientsets
// and caches filled by the test, at syncNow, with runner firing the jobs.
func newSyncTestController(t *testing.T, lh *lhfake.Clientset, kube *kubefake.Clientset, inf datastore.Informers, runner longhorn.RecurringJobRunner) *Controller {
	t.Helper()
	ds := datastore.New("ns", lh, kube, inf)
	log := logrus.New()
	log.SetLevel(logrus.PanicLevel)
	c := &Controller{ds: ds, recorder: record.NewFakeRecorder(10), clock: clocktesting.NewFakeClock(syncNow),
		ownership: kit.Ownership{NodeID: "node-1", IsUp: ds.IsNodeUp},
		cfg:       CronJobConfig{ManagerImage: "longhorn-manager:test", ManagerURL: "http://manager:9500", Runner: runner}}
	c.Base = kit.NewBase("test", logrus.NewEntry(log), nil, c.sync)
	t.Cleanup(c.Queue.ShutDown)
	return c
}
