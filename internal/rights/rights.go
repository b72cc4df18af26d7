// Package rights holds what a user must be allowed to make an object,
// and asks the apiserver whether they are: the API asks it of its
// callers, the system restore of whoever asked for the restore, so an
// object made either way needs the same rights.
package rights

import (
	"context"
	"fmt"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
)

// Check is one right: a verb on a resource of a group ("" for
// Kubernetes' own), in a namespace ("" for a cluster-scoped resource),
// on one object when Name is set.
type Check struct {
	Verb, Group, Resource, Namespace, Name string
}

// Longhorn is a check on a longhorn.io resource.
func Longhorn(verb, resource, namespace, name string) Check {
	return Check{Verb: verb, Group: longhorn.SchemeGroupVersion.Group, Resource: resource, Namespace: namespace, Name: name}
}

// Core is a check on a resource of Kubernetes' core group.
func Core(verb, resource, namespace, name string) Check {
	return Check{Verb: verb, Resource: resource, Namespace: namespace, Name: name}
}

// String is the right as a refusal names it: `get volumes.longhorn.io
// "data" in longhorn-system`.
func (c Check) String() string {
	s := c.Verb + " " + c.Resource
	if c.Group != "" {
		s += "." + c.Group
	}
	if c.Name != "" {
		s += fmt.Sprintf(" %q", c.Name)
	}
	if c.Namespace != "" {
		s += " in " + c.Namespace
	}
	return s
}

// BackingImageReads are the rights a backing image's maker needs besides
// create: get on the volume it is exported from, whose data it copies.
func BackingImageReads(namespace string, sourceType longhorn.BackingImageDataSourceType, params map[string]string) []Check {
	if sourceType != longhorn.BackingImageDataSourceTypeExportFromVolume {
		return nil
	}
	return []Check{Longhorn("get", "volumes", namespace, params[longhorn.DataSourceParameterVolumeName])}
}

// BackupTargetReads are the rights a backup target's maker needs besides
// create: get on its credential Secret, which the manager reads (it may
// read every Secret of its namespace, the internal CA's among them).
func BackupTargetReads(namespace, credentialSecret string) []Check {
	if credentialSecret == "" {
		return nil
	}
	return []Check{Core("get", "secrets", namespace, credentialSecret)}
}

// VolumeReads are the rights a volume's maker needs besides create: get
// on what its data is read from, the backup volume (by its object's
// name) it is restored from, the volume it is copied from, its backing
// image. Empty names read nothing.
func VolumeReads(namespace, backupVolume, sourceVolume, backingImage string) []Check {
	var out []Check
	if backupVolume != "" {
		out = append(out, Longhorn("get", "backupvolumes", namespace, backupVolume))
	}
	if sourceVolume != "" {
		out = append(out, Longhorn("get", "volumes", namespace, sourceVolume))
	}
	if backingImage != "" {
		out = append(out, Longhorn("get", "backingimages", namespace, backingImage))
	}
	return out
}

// Attributes are the check as a SubjectAccessReview asks it.
func (c Check) Attributes() *authorizationv1.ResourceAttributes {
	return &authorizationv1.ResourceAttributes{Namespace: c.Namespace, Verb: c.Verb, Group: c.Group, Resource: c.Resource, Name: c.Name}
}

// ReviewSpec asks whether user may do what attrs say.
func ReviewSpec(user authenticationv1.UserInfo, attrs *authorizationv1.ResourceAttributes) authorizationv1.SubjectAccessReviewSpec {
	var extra map[string]authorizationv1.ExtraValue
	if len(user.Extra) > 0 {
		extra = make(map[string]authorizationv1.ExtraValue, len(user.Extra))
		for k, v := range user.Extra {
			extra[k] = authorizationv1.ExtraValue(v)
		}
	}
	return authorizationv1.SubjectAccessReviewSpec{User: user.Username, UID: user.UID, Groups: user.Groups, Extra: extra, ResourceAttributes: attrs}
}

// Reviewer answers whether a user has a right.
type Reviewer func(ctx context.Context, user authenticationv1.UserInfo, c Check) (bool, error)

// SubjectAccessReviews asks the apiserver, one SubjectAccessReview a
// check; the client's account needs create on subjectaccessreviews.
func SubjectAccessReviews(kube kubernetes.Interface) Reviewer {
	return func(ctx context.Context, user authenticationv1.UserInfo, c Check) (bool, error) {
		sar, err := kube.AuthorizationV1().SubjectAccessReviews().Create(ctx,
			&authorizationv1.SubjectAccessReview{Spec: ReviewSpec(user, c.Attributes())}, metav1.CreateOptions{})
		if err != nil {
			return false, fmt.Errorf("SubjectAccessReview of %s: %w", c, err)
		}
		return sar.Status.Allowed, nil
	}
}

// ServiceAccountUser is the username a ServiceAccount authenticates as.
func ServiceAccountUser(namespace, name string) string {
	return "system:serviceaccount:" + namespace + ":" + name
}
