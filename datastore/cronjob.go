package datastore

import (
	"context"

	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// GetCronJobRO returns the cached CronJob; the caller must not modify it.
func (ds *DataStore) GetCronJobRO(name string) (*batchv1.CronJob, error) {
	return ds.cronJobLister.CronJobs(ds.namespace).Get(name)
}

// CreateCronJob creates a CronJob.
func (ds *DataStore) CreateCronJob(ctx context.Context, cj *batchv1.CronJob) (*batchv1.CronJob, error) {
	return ds.kubeClient.BatchV1().CronJobs(ds.namespace).Create(ctx, cj, metav1.CreateOptions{})
}

// UpdateCronJob writes a CronJob.
func (ds *DataStore) UpdateCronJob(ctx context.Context, cj *batchv1.CronJob) (*batchv1.CronJob, error) {
	return ds.kubeClient.BatchV1().CronJobs(ds.namespace).Update(ctx, cj, metav1.UpdateOptions{})
}

// DeleteCronJob deletes a CronJob and, in the background, its Jobs.
func (ds *DataStore) DeleteCronJob(ctx context.Context, name string) error {
	background := metav1.DeletePropagationBackground
	return ds.kubeClient.BatchV1().CronJobs(ds.namespace).Delete(ctx, name, metav1.DeleteOptions{PropagationPolicy: &background})
}
