package datastore

import (
	"context"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
)

// GetRecurringJobRO returns the cached RecurringJob; the caller must not
// modify it.
func (ds *DataStore) GetRecurringJobRO(name string) (*longhorn.RecurringJob, error) {
	return ds.recurringJobLister.RecurringJobs(ds.namespace).Get(name)
}

// GetRecurringJobFresh reads a RecurringJob from the API: for a request
// that may come right after the job's creation, before the cache has it.
func (ds *DataStore) GetRecurringJobFresh(ctx context.Context, name string) (*longhorn.RecurringJob, error) {
	return ds.lhClient.LonghornV1beta2().RecurringJobs(ds.namespace).Get(ctx, name, metav1.GetOptions{})
}

// ListRecurringJobsRO returns every cached RecurringJob.
func (ds *DataStore) ListRecurringJobsRO() ([]*longhorn.RecurringJob, error) {
	return ds.recurringJobLister.RecurringJobs(ds.namespace).List(labels.Everything())
}

// CreateRecurringJob creates a RecurringJob.
func (ds *DataStore) CreateRecurringJob(ctx context.Context, job *longhorn.RecurringJob) (*longhorn.RecurringJob, error) {
	return ds.lhClient.LonghornV1beta2().RecurringJobs(ds.namespace).Create(ctx, job, metav1.CreateOptions{})
}

// UpdateRecurringJob writes a RecurringJob's spec and metadata.
func (ds *DataStore) UpdateRecurringJob(ctx context.Context, job *longhorn.RecurringJob) (*longhorn.RecurringJob, error) {
	return ds.lhClient.LonghornV1beta2().RecurringJobs(ds.namespace).Update(ctx, job, metav1.UpdateOptions{})
}

// UpdateRecurringJobStatus writes a RecurringJob's status.
func (ds *DataStore) UpdateRecurringJobStatus(ctx context.Context, job *longhorn.RecurringJob) (*longhorn.RecurringJob, error) {
	return ds.lhClient.LonghornV1beta2().RecurringJobs(ds.namespace).UpdateStatus(ctx, job, metav1.UpdateOptions{})
}

// DeleteRecurringJob deletes a RecurringJob.
func (ds *DataStore) DeleteRecurringJob(ctx context.Context, name string) error {
	return ds.lhClient.LonghornV1beta2().RecurringJobs(ds.namespace).Delete(ctx, name, metav1.DeleteOptions{})
}
