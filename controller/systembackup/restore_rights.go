package systembackup

import (
	"context"
	"errors"
	"fmt"

	authenticationv1 "k8s.io/api/authentication/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/cadence-storage/longhorn-manager/internal/rights"
	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
)

// A restore creates what its archive holds, and an archive is read from a
// backup target that anyone able to write there may have filled. So every
// object is made only if whoever asked for the restore could make it
// themselves, through the API or kubectl: the rights the API asks of its
// callers for the same create (rights.*Reads), asked of the requester
// with SubjectAccessReviews before the first write. The manager's own
// account, which writes everything, would bypass the admission policies
// that ask the same of kubectl users.

// errNoRequester refuses a restore that records no one: its objects would
// be made with no one's rights checked.
var errNoRequester = errors.New("spec.requester: not recorded: a restore creates its objects only with the rights of whoever asked for it; " +
	"ask again through the API (which records its caller), or with kubectl recording yourself in spec.requester (rule system-restore-requester)")

// requesterOf is the user a restore asks rights of.
func requesterOf(sr *longhorn.SystemRestore) (authenticationv1.UserInfo, error) {
	req := sr.Spec.Requester
	if req == nil || req.Username == "" {
		return authenticationv1.UserInfo{}, errNoRequester
	}
	user := authenticationv1.UserInfo{Username: req.Username, UID: req.UID, Groups: req.Groups}
	if len(req.Extra) > 0 {
		user.Extra = make(map[string]authenticationv1.ExtraValue, len(req.Extra))
		for k, v := range req.Extra {
			user.Extra[k] = v
		}
	}
	return user, nil
}

// objectCheck is a right one write of a restore needs.
type objectCheck struct {
	object string // "BackingImage golden"
	check  rights.Check
}

// planChecks are the rights each write of p needs: update on each
// setting, create on each object's kind where it is made, and what the
// object reads besides, as the API asks of its callers.
func (c *RestoreController) planChecks(p *restorePlan) ([]objectCheck, error) {
	ns := c.ds.Namespace()
	var out []objectCheck
	add := func(object string, checks ...rights.Check) {
		for _, ch := range checks {
			out = append(out, objectCheck{object, ch})
		}
	}
	for _, s := range p.settings {
		add("Setting "+s.Name, rights.Longhorn("update", "settings", ns, s.Name))
	}
	for _, bt := range p.targets {
		add("BackupTarget "+bt.Name, rights.Longhorn("create", "backuptargets", ns, ""))
		add("BackupTarget "+bt.Name, rights.BackupTargetReads(ns, bt.Spec.CredentialSecret)...)
	}
	for _, j := range p.jobs {
		add("RecurringJob "+j.Name, rights.Longhorn("create", "recurringjobs", ns, ""))
	}
	for _, bi := range p.images {
		add("BackingImage "+bi.Name, rights.Longhorn("create", "backingimages", ns, ""))
		add("BackingImage "+bi.Name, rights.BackingImageReads(ns, bi.Spec.SourceType, bi.Spec.SourceParameters)...)
	}
	for _, v := range p.volumes {
		backupVolume, err := c.ds.BackupVolumeObjectOf(v.Spec.FromBackup)
		if err != nil {
			return nil, fmt.Errorf("Volume %s: spec.fromBackup: %w", v.Name, err)
		}
		add("Volume "+v.Name, rights.Longhorn("create", "volumes", ns, ""))
		add("Volume "+v.Name, rights.VolumeReads(ns, backupVolume, "", v.Spec.BackingImage)...)
	}
	for _, pv := range p.pvs {
		add("PersistentVolume "+pv.Name, rights.Core("create", "persistentvolumes", "", ""))
	}
	for _, pvc := range p.pvcs {
		add("PersistentVolumeClaim "+pvc.Namespace+"/"+pvc.Name, rights.Core("create", "persistentvolumeclaims", pvc.Namespace, ""))
	}
	return out, nil
}

// checkRights asks whether user may make every write of p, and refuses
// the plan (a *planError naming each object and the right its requester
// lacks) if not. The manager's own account is not asked: its writes are
// its own, checked by the apiserver as it makes them. A review that
// cannot be asked now is an error to retry.
func (c *RestoreController) checkRights(ctx context.Context, user authenticationv1.UserInfo, p *restorePlan) error {
	if user.Username == c.self {
		return nil
	}
	checks, err := c.planChecks(p)
	if err != nil {
		return &planError{err}
	}
	answers := map[rights.Check]bool{}
	var refused []error
	for _, oc := range checks {
		allowed, asked := answers[oc.check]
		if !asked {
			if allowed, err = c.review(ctx, user, oc.check); apierrors.IsForbidden(err) {
				return &planError{fmt.Errorf("the manager may not ask the apiserver what %s may do (create on subjectaccessreviews.authorization.k8s.io, which package/rbac.yaml grants it): %w", user.Username, err)}
			} else if err != nil {
				return err
			}
			answers[oc.check] = allowed
		}
		if !allowed {
			refused = append(refused, fmt.Errorf("%s: %s may not %s (Kubernetes RBAC; a restore makes each object with the rights of whoever asked for it)", oc.object, user.Username, oc.check))
		}
	}
	if err := errors.Join(refused...); err != nil {
		return &planError{err}
	}
	return nil
}
