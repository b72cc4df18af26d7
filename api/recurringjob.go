package api

import (
	"net/http"
	"reflect"
	"sort"
	"time"

	"github.com/gorilla/mux"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cadence-storage/longhorn-manager/datastore"
	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
)

// defaultConcurrency applies when a create leaves concurrency out.
const defaultConcurrency = 10

func (s *Server) listRecurringJobs(w http.ResponseWriter, r *http.Request) error {
	jobs, err := s.ds.ListRecurringJobsRO()
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, s.recurringJobCollection(baseURL(r), jobs))
	return nil
}

func (s *Server) recurringJobCollection(base string, jobs []*longhorn.RecurringJob) Collection {
	sort.Slice(jobs, func(i, j int) bool { return jobs[i].Name < jobs[j].Name })
	data := make([]RecurringJob, 0, len(jobs))
	for _, j := range jobs {
		data = append(data, toRecurringJob(base, j))
	}
	return collection(base, "recurringJob", "recurringjobs", data)
}

func (s *Server) getRecurringJob(w http.ResponseWriter, r *http.Request) error {
	name := mux.Vars(r)["name"]
	job, err := datastore.CachedOrFresh(r.Context(), name, s.ds.GetRecurringJobRO, s.ds.GetRecurringJobFresh)
	if apierrors.IsNotFound(err) {
		return notFound("recurring job %q not found", name)
	}
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, toRecurringJob(baseURL(r), job))
	return nil
}

func (s *Server) createRecurringJob(w http.ResponseWriter, r *http.Request) error {
	var in RecurringJobInput
	if err := decodeBody(w, r, &in); err != nil {
		return err
	}
	if in.Retain == nil {
		return badRequest("retain: required")
	}
	// A create is an update of a job holding only its name, task and the
	// defaults: one mapping of the input for both.
	job := &longhorn.RecurringJob{
		ObjectMeta: metav1.ObjectMeta{Name: in.Name},
		Spec:       longhorn.RecurringJobSpec{Name: in.Name, Task: in.Task, Concurrency: defaultConcurrency},
	}
	if err := applyRecurringJobInput(&job.Spec, in); err != nil {
		return err
	}
	if err := s.ds.ValidateRecurringJob(r.Context(), job, s.clock.Now()); err != nil {
		return badRequest("%v", err)
	}
	created, err := s.ds.CreateRecurringJob(r.Context(), job)
	if apierrors.IsAlreadyExists(err) {
		return &httpError{http.StatusConflict, "AlreadyExists", "name: recurring job " + in.Name + " already exists"}
	}
	if apierrors.IsInvalid(err) {
		return badRequest("%v", err)
	}
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, toRecurringJob(baseURL(r), created))
	return nil
}

// updateRecurringJob changes cron, groups, retain, concurrency and labels.
// The task is fixed; a body that changes nothing writes nothing; a
// conflict with another writer is retried on the newest version.
func (s *Server) updateRecurringJob(w http.ResponseWriter, r *http.Request) error {
	name := mux.Vars(r)["name"]
	var in RecurringJobInput
	if err := decodeBody(w, r, &in); err != nil {
		return err
	}
	if in.Name != "" && in.Name != name {
		return badRequest("name: %q must equal the job in the path, %q; a job cannot be renamed", in.Name, name)
	}
	var result *longhorn.RecurringJob
	err := datastore.RetryOnConflict(func() error {
		job, err := s.ds.GetRecurringJobFresh(r.Context(), name)
		if apierrors.IsNotFound(err) {
			return notFound("recurring job %q not found", name)
		}
		if err != nil {
			return err
		}
		if in.Task != "" && in.Task != job.Spec.Task {
			return badRequest("task: cannot change from %s to %s; create a new job instead", job.Spec.Task, in.Task)
		}
		updated := job.DeepCopy()
		if err := applyRecurringJobInput(&updated.Spec, in); err != nil {
			return err
		}
		if reflect.DeepEqual(updated.Spec, job.Spec) {
			result = job
			return nil
		}
		if err := s.ds.ValidateRecurringJob(r.Context(), updated, s.clock.Now()); err != nil {
			return badRequest("%v", err)
		}
		result, err = s.ds.UpdateRecurringJob(r.Context(), updated)
		if apierrors.IsInvalid(err) {
			return badRequest("%v", err)
		}
		return err
	})
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, toRecurringJob(baseURL(r), result))
	return nil
}

// applyRecurringJobInput sets the updatable fields the input carries; a
// field left out keeps its value. Only retainAge can be malformed past
// decoding; the rest is ValidateRecurringJob's.
func applyRecurringJobInput(spec *longhorn.RecurringJobSpec, in RecurringJobInput) error {
	if in.RetentionPolicy != nil {
		spec.RetentionPolicy = longhorn.RecurringJobRetentionPolicy(*in.RetentionPolicy)
	}
	if in.RetainAge != nil {
		spec.RetainAge = nil
		if *in.RetainAge != "" {
			d, err := time.ParseDuration(*in.RetainAge)
			if err != nil {
				return badRequest("retainAge: %q is not a Go duration such as 72h or 90m", *in.RetainAge)
			}
			if d != 0 {
				spec.RetainAge = &metav1.Duration{Duration: d}
			}
		}
	}
	if in.Cron != "" {
		spec.Cron = in.Cron
	}
	if in.Groups != nil {
		spec.Groups = in.Groups
		if len(spec.Groups) == 0 {
			spec.Groups = nil
		}
	}
	if in.Retain != nil {
		spec.Retain = *in.Retain
	}
	if in.Concurrency != nil {
		spec.Concurrency = *in.Concurrency
	}
	if in.Labels != nil {
		spec.Labels = in.Labels
		if len(spec.Labels) == 0 {
			spec.Labels = nil
		}
	}
	if in.Parameters != nil {
		spec.Parameters = in.Parameters
		if len(spec.Parameters) == 0 {
			spec.Parameters = nil
		}
	}
	if in.Suspend != nil {
		spec.Suspend = *in.Suspend
	}
	if in.TimeZone != nil {
		spec.TimeZone = *in.TimeZone
	}
	if in.StartingDeadlineSeconds != nil {
		spec.StartingDeadlineSeconds = in.StartingDeadlineSeconds
	}
	if in.SkipImmediately != nil {
		spec.SkipImmediately = in.SkipImmediately
	}
	if in.BackupTargetName != nil {
		spec.BackupTargetName = *in.BackupTargetName
	}
	return nil
}

func (s *Server) deleteRecurringJob(w http.ResponseWriter, r *http.Request) error {
	name := mux.Vars(r)["name"]
	err := s.ds.DeleteRecurringJob(r.Context(), name)
	if apierrors.IsNotFound(err) {
		return notFound("recurring job %q not found", name)
	}
	if err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}
