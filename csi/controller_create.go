package csi

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"time"

	"github.com/sirupsen/logrus"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/cadence-storage/longhorn-manager/client"
)

// What a CreateVolume makes besides the volume, and checks before it makes
// anything: the jobs and groups the volume selects, the RecurringJobs the
// old recurringJobs parameter names, and the backing image.

// checkSelector refuses a selected job that does not exist (unless the
// old recurringJobs parameter makes it) and a group no job lists: in a
// StorageClass either is a mistake, and the volume would go unprotected.
func (s *controllerServer) checkSelector(ctx context.Context, p *volumeParams) error {
	if len(p.create.RecurringJobSelector) == 0 {
		return nil
	}
	jobs, err := s.d.api.RecurringJobs(ctx)
	if err != nil {
		return apiStatus(err, "list recurring jobs")
	}
	exists, groups := map[string]bool{}, map[string]bool{}
	for _, j := range append(jobs, p.jobs...) {
		exists[j.Name] = true
		for _, g := range j.Groups {
			groups[g] = true
		}
	}
	for i, item := range p.create.RecurringJobSelector {
		switch {
		case item.IsGroup && !groups[item.Name]:
			return status.Errorf(codes.InvalidArgument, "%s[%d]: no recurring job is in group %q", paramRecurringJobSelector, i, item.Name)
		case !item.IsGroup && !exists[item.Name]:
			// The list is the API's cache: a job created a moment ago
			// may not be in it yet. Reading it by name asks the
			// apiserver before the claim is refused.
			_, err := s.d.api.RecurringJob(ctx, item.Name)
			if client.IsNotFound(err) {
				return status.Errorf(codes.InvalidArgument, "%s[%d]: recurring job %q does not exist", paramRecurringJobSelector, i, item.Name)
			}
			if err != nil {
				return apiStatus(err, "read recurring job "+item.Name)
			}
		}
	}
	return nil
}

// ensureJobs makes the RecurringJobs the old recurringJobs parameter names
// that do not exist yet, and returns those it made. A job of that name
// that exists is used as it is (another StorageClass, or the upgrade,
// made it from the same entry).
func (s *controllerServer) ensureJobs(ctx context.Context, jobs []client.RecurringJob) ([]string, error) {
	var made []string
	for _, job := range jobs {
		err := s.d.api.CreateRecurringJob(ctx, job)
		if err == nil {
			made = append(made, job.Name)
			s.d.log.WithField("recurringJob", job.Name).Info("Created the RecurringJob a StorageClass's recurringJobs names")
			continue
		}
		if isAlreadyExists(err) {
			continue
		}
		s.undoJobs(made)
		return nil, apiStatus(err, fmt.Sprintf("%s: create recurring job %s", paramRecurringJobs, job.Name))
	}
	return made, nil
}

// isAlreadyExists reports whether the manager refused a create because
// the object exists.
func isAlreadyExists(err error) bool {
	var ae *client.APIError
	return errors.As(err, &ae) && ae.Status == http.StatusConflict
}

// undoJobs deletes the jobs a CreateVolume made before it failed, so a
// refused request leaves nothing behind; a job some volume selects by now
// (a CreateVolume for another PVC of the same StorageClass, running at the
// same time, found it made and used it) stays.
func (s *controllerServer) undoJobs(names []string) {
	if len(names) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	volumes, err := s.d.api.Volumes(ctx)
	if err != nil {
		s.d.log.WithError(err).WithField("recurringJobs", names).Warn("Could not tell whether a volume selects the RecurringJobs made for a volume that was not created; they stay")
		return
	}
	selected := map[string]bool{}
	for _, v := range volumes {
		for _, item := range v.RecurringJobSelector {
			if !item.IsGroup {
				selected[item.Name] = true
			}
		}
	}
	for _, name := range names {
		if selected[name] {
			continue
		}
		if err := s.d.api.DeleteRecurringJob(ctx, name); err != nil && !client.IsNotFound(err) {
			s.d.log.WithError(err).WithField("recurringJob", name).Warn("Could not delete a RecurringJob made for a volume that was not created")
		}
	}
}

// madeMeanwhileWait bounds how long a CreateVolume whose create of the
// backing image was refused because the image exists waits for the API
// to show that image.
const madeMeanwhileWait = 3 * time.Second

// prepareBackingImage makes the backing image the parameters describe when
// it does not exist, and refuses one that exists with another source or
// checksum, whether it existed before or another request (another
// StorageClass's claim, provisioned at the same time) made it between this
// one's read and its create.
func (s *controllerServer) prepareBackingImage(ctx context.Context, p *volumeParams) error {
	want := p.image
	if want.Name == "" {
		return nil
	}
	have, err := s.d.api.BackingImage(ctx, want.Name)
	switch {
	case err == nil:
		return checkBackingImage(want, have)
	case !client.IsNotFound(err):
		return apiStatus(err, "read backing image "+want.Name)
	}
	switch want.SourceType {
	case "download", "export-from-volume":
	case "":
		return status.Errorf(codes.InvalidArgument, "%s: backing image %s does not exist, and %s does not say how to make it", paramBackingImage, want.Name, paramBackingImageSourceType)
	default:
		return status.Errorf(codes.InvalidArgument, "%s: %q cannot make a backing image for a volume; use download or export-from-volume", paramBackingImageSourceType, want.SourceType)
	}
	err = s.d.api.CreateBackingImage(ctx, want)
	switch {
	case err == nil:
		s.d.log.WithFields(logrus.Fields{"backingImage": want.Name, "sourceType": want.SourceType}).Info("Created the backing image a StorageClass names")
		return nil
	case !isAlreadyExists(err):
		return apiStatus(err, "create backing image "+want.Name)
	}
	// Made meanwhile: what was made is checked as an image found at once.
	deadline := time.Now().Add(madeMeanwhileWait)
	for {
		have, err := s.d.api.BackingImage(ctx, want.Name)
		switch {
		case err == nil:
			return checkBackingImage(want, have)
		case !client.IsNotFound(err):
			return apiStatus(err, "read backing image "+want.Name)
		case time.Now().After(deadline):
			return status.Errorf(codes.Unavailable, "%s: backing image %s was made by another request meanwhile, and the API does not show it yet", paramBackingImage, want.Name)
		}
		select {
		case <-ctx.Done():
			return apiStatus(ctx.Err(), "read backing image "+want.Name)
		case <-time.After(pollState):
		}
	}
}

// checkBackingImage refuses an image that exists with another source or
// checksum than the parameters name.
func checkBackingImage(want client.BackingImage, have *client.BackingImage) error {
	if want.SourceType != "" && want.SourceType != have.SourceType ||
		len(want.Parameters) > 0 && !reflect.DeepEqual(want.Parameters, have.Parameters) {
		return status.Errorf(codes.InvalidArgument, "%s: backing image %s exists with another data source (%s %v) than the parameters name", paramBackingImage, want.Name, have.SourceType, have.Parameters)
	}
	if sum := want.ExpectedChecksum; sum != "" && (have.ExpectedChecksum != "" && have.ExpectedChecksum != sum || have.CurrentChecksum != "" && have.CurrentChecksum != sum) {
		return status.Errorf(codes.InvalidArgument, "%s: backing image %s has another checksum than %s", paramBackingImageChecksum, want.Name, sum)
	}
	return nil
}
