package api

import (
	"bytes"
	"context"
	"net/http"
	"regexp"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/cadence-storage/longhorn-manager/datastore"
	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	"github.com/cadence-storage/longhorn-manager/types"
)

// AttachInput is the body of the attach action. AttachedBy, when set,
// names an attacher that is not a user or a workload (a recurring job's
// run): it is recorded on the volume, and such an attach never takes a
// volume that someone else attaches.
type AttachInput struct {
	HostID          string `json:"hostId"`
	DisableFrontend bool   `json:"disableFrontend"`
	AttachedBy      string `json:"attachedBy"`
}

// DetachInput is the optional body of the detach action. With AttachedBy
// the volume is detached only while it is still that attacher's.
type DetachInput struct {
	AttachedBy string `json:"attachedBy"`
}

const attachedByMaxLength = 253

var attachedByPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._:/-]*$`)

// validAttachedBy checks an optional attacher identity.
func validAttachedBy(by string) error {
	switch {
	case by == "":
		return nil
	case len(by) > attachedByMaxLength:
		return badRequest("attachedBy: at most %d characters, got %d", attachedByMaxLength, len(by))
	case !attachedByPattern.MatchString(by):
		return badRequest("attachedBy: %q must start with a letter or digit and hold only letters, digits and . _ : / -", by)
	}
	return nil
}

// attachedBy is who attached v: the recorded attacher, or "" for a user
// or a workload.
func attachedBy(v *longhorn.Volume) string { return v.Annotations[types.AnnotationAttachedBy] }

func describeAttacher(by string) string {
	if by == "" {
		return "a user or workload"
	}
	return by
}

// applyAttach changes v for an attach to node by by ("" for a user or a
// workload) and reports whether anything changed. A user's attach takes
// the volume over from a named attacher (and sets the frontend as asked);
// a named attacher's attach never takes a volume someone else attaches,
// and repeating it changes nothing.
func applyAttach(v *longhorn.Volume, node, by string, disableFrontend bool) (bool, error) {
	current := attachedBy(v)
	if v.Spec.NodeID != "" && v.Spec.NodeID != node {
		return false, &httpError{http.StatusConflict, "Conflict", "volume " + v.Name + " is attached to " + v.Spec.NodeID + " by " + describeAttacher(current) + "; detach it first"}
	}
	if by != "" && v.Spec.NodeID != "" {
		if current == by {
			return false, nil
		}
		return false, &httpError{http.StatusConflict, "Conflict", "volume " + v.Name + " is attached to " + v.Spec.NodeID + " by " + describeAttacher(current) + "; attachedBy " + by + " does not take it over"}
	}
	if v.Spec.NodeID == node && v.Spec.DisableFrontend == disableFrontend && current == by {
		return false, nil
	}
	v.Spec.NodeID, v.Spec.DisableFrontend = node, disableFrontend
	setAttachedBy(v, by)
	return true, nil
}

// applyDetach changes v for a detach by by and reports whether anything
// changed. Without by it detaches whoever attached; with by, a volume
// attached by someone else is left as it is (a 409), and a volume that is
// detached already needs nothing.
func applyDetach(v *longhorn.Volume, by string) (bool, error) {
	if v.Spec.NodeID == "" {
		if attachedBy(v) == "" {
			return false, nil
		}
		setAttachedBy(v, "")
		return true, nil
	}
	if by != "" && attachedBy(v) != by {
		return false, &httpError{http.StatusConflict, "Conflict", "volume " + v.Name + " is attached to " + v.Spec.NodeID + " by " + describeAttacher(attachedBy(v)) + ", not by " + by + "; left attached"}
	}
	v.Spec.NodeID, v.Spec.DisableFrontend = "", false
	setAttachedBy(v, "")
	return true, nil
}

func setAttachedBy(v *longhorn.Volume, by string) {
	if by == "" {
		delete(v.Annotations, types.AnnotationAttachedBy)
		return
	}
	if v.Annotations == nil {
		v.Annotations = map[string]string{}
	}
	v.Annotations[types.AnnotationAttachedBy] = by
}

// updateAttachment applies change to the newest version of the volume and
// writes it, retrying conflicts, so the decision is always made on what
// the volume is when it is written.
func (s *Server) updateAttachment(ctx context.Context, name string, change func(*longhorn.Volume) (bool, error)) (*longhorn.Volume, error) {
	var result *longhorn.Volume
	err := datastore.RetryOnConflict(func() error {
		v, err := s.ds.GetVolumeFresh(ctx, name)
		if apierrors.IsNotFound(err) {
			return notFound("volume %q not found", name)
		}
		if err != nil {
			return err
		}
		changed, err := change(v)
		if err != nil || !changed {
			result = v
			return err
		}
		result, err = s.ds.UpdateVolume(ctx, v)
		return err
	})
	return result, err
}

func (s *Server) attachVolume(w http.ResponseWriter, r *http.Request, name string) error {
	var in AttachInput
	if err := decodeBody(w, r, &in); err != nil {
		return err
	}
	if in.HostID == "" {
		return badRequest("hostId: required, the node to attach the volume to")
	}
	if err := validAttachedBy(in.AttachedBy); err != nil {
		return err
	}
	if _, err := s.ds.GetNodeRO(in.HostID); apierrors.IsNotFound(err) {
		return badRequest("hostId: node %q is not a Longhorn node", in.HostID)
	}
	v, err := s.updateAttachment(r.Context(), name, func(v *longhorn.Volume) (bool, error) {
		// An engine reaches the replicas of other nodes where those
		// serve them; one that restores a backup or makes a clone writes
		// them on its own node's disks, so such a volume attaches only
		// where its replicas are. (A volume attached elsewhere gets
		// applyAttach's conflict, which says so.)
		if (v.Spec.NodeID == "" || v.Spec.NodeID == in.HostID) && (v.Status.RestoreRequired || v.Spec.DataSource != "" && v.Status.CloneStatus.State != "completed" ||
			v.Spec.DataLocality == longhorn.DataLocalityStrictLocal) {
			replicas, err := s.ds.ListVolumeReplicasRO(v.Name)
			if err != nil {
				return false, err
			}
			if err := datastore.AttachRefusal(v.Name, in.HostID, replicas); err != nil {
				return false, &httpError{http.StatusConflict, "Conflict", err.Error()}
			}
		}
		return applyAttach(v, in.HostID, in.AttachedBy, in.DisableFrontend)
	})
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, s.toVolume(baseURL(r), v))
	return nil
}

// detachVolume takes an optional body: none, {} or {"attachedBy": ...}.
func (s *Server) detachVolume(w http.ResponseWriter, r *http.Request, name string) error {
	var in DetachInput
	if err := decodeOptionalBody(w, r, &in); err != nil {
		return err
	}
	if err := validAttachedBy(in.AttachedBy); err != nil {
		return err
	}
	v, err := s.updateAttachment(r.Context(), name, func(v *longhorn.Volume) (bool, error) {
		return applyDetach(v, in.AttachedBy)
	})
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, s.toVolume(baseURL(r), v))
	return nil
}

// decodeOptionalBody is decodeBody for actions whose body may be left
// out: an empty (or blank) body leaves v as it is.
func decodeOptionalBody(w http.ResponseWriter, r *http.Request, v any) error {
	if r.Body == nil {
		return nil
	}
	if err := checkJSONContentType(r); err != nil {
		return err
	}
	return withBodyBudget(w, r, func() error {
		data, err := readBody(w, r)
		if err != nil || len(bytes.TrimSpace(data)) == 0 {
			return err
		}
		return decodeJSON(data, v)
	})
}
