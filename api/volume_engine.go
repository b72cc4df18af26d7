package api

import (
	"errors"
	"net"
	"net/http"
	"sort"
	"strconv"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/cadence-storage/longhorn-manager/datastore"
	"github.com/cadence-storage/longhorn-manager/engineapi"
	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
)

// SnapshotInput names a snapshot, and labels one being created.
type SnapshotInput struct {
	Name   string            `json:"name"`
	Labels map[string]string `json:"labels"`
	// BackupMode, for snapshotBackup, is "full" or "incremental" (the
	// default), as in Longhorn.
	BackupMode string `json:"backupMode"`
	// BackupTargetName, for snapshotBackup, is the BackupTarget this
	// backup goes to (a recurring job's); empty is the volume's
	// spec.backupTargetName, itself default when empty. Not Longhorn's.
	BackupTargetName string `json:"backupTargetName,omitempty"`
}

// Snapshot is the API view of one snapshot of a volume.
type Snapshot struct {
	Resource
	Name        string            `json:"name"`
	Parent      string            `json:"parent"`
	Children    map[string]bool   `json:"children"`
	Removed     bool              `json:"removed"`
	UserCreated bool              `json:"usercreated"`
	Created     string            `json:"created"`
	Size        string            `json:"size"`
	Labels      map[string]string `json:"labels"`
}

func toSnapshot(s *longhorn.SnapshotInfo) Snapshot {
	return Snapshot{
		Resource: Resource{ID: s.Name, Type: "snapshot", Links: map[string]string{}, Actions: map[string]string{}},
		Name:     s.Name, Parent: s.Parent, Children: s.Children, Removed: s.Removed, UserCreated: s.UserCreated,
		Created: s.Created, Size: s.Size, Labels: s.Labels,
	}
}

// engineClient returns a client of the engine of an attached volume.
func (s *Server) engineClient(name string) (engineapi.EngineClient, error) {
	v, err := s.ds.GetVolumeRO(name)
	if apierrors.IsNotFound(err) {
		return nil, notFound("volume %q not found", name)
	}
	if err != nil {
		return nil, err
	}
	e, err := s.ds.GetEngineRO(datastore.EngineName(name))
	if err != nil || v.Status.State != longhorn.VolumeStateAttached || e.Status.CurrentState != longhorn.InstanceStateRunning || e.Status.Port == 0 {
		return nil, &httpError{http.StatusBadRequest, "InvalidState", "volume " + name + " must be attached for snapshot actions"}
	}
	return s.engineConns.Client(net.JoinHostPort(e.Status.IP, strconv.Itoa(e.Status.Port)), name, 0)
}

// engineError maps an engine error to the API's status codes.
func engineError(err error) error {
	var he *httpError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &he):
		return err
	case errors.Is(err, engineapi.ErrNotFound):
		return &httpError{http.StatusNotFound, "NotFound", err.Error()}
	case errors.Is(err, engineapi.ErrInvalid), errors.Is(err, engineapi.ErrPrecondition):
		return badRequest("%v", err)
	}
	return err
}

// snapshotAction runs snapshotCreate, snapshotList, snapshotGet,
// snapshotDelete, snapshotPurge and snapshotRevert on an attached volume.
func (s *Server) snapshotAction(w http.ResponseWriter, r *http.Request, name, action string) error {
	var in SnapshotInput
	if action != "snapshotList" && action != "snapshotPurge" {
		if err := decodeBody(w, r, &in); err != nil {
			return err
		}
		if in.Name == "" && action != "snapshotCreate" {
			return badRequest("name: required, the snapshot's name")
		}
	}
	client, err := s.engineClient(name)
	if err != nil {
		return err
	}
	defer client.Close()
	ctx := r.Context()
	switch action {
	case "snapshotCreate":
		created, err := client.SnapshotCreate(ctx, in.Name, in.Labels)
		if err != nil {
			return engineError(err)
		}
		snap, err := client.SnapshotGet(ctx, created)
		if err != nil {
			return engineError(err)
		}
		writeJSON(w, http.StatusOK, toSnapshot(snap))
	case "snapshotGet":
		snap, err := client.SnapshotGet(ctx, in.Name)
		if err != nil {
			return engineError(err)
		}
		writeJSON(w, http.StatusOK, toSnapshot(snap))
	case "snapshotList":
		list, err := client.SnapshotList(ctx)
		if err != nil {
			return engineError(err)
		}
		data := make([]Snapshot, 0, len(list))
		for _, snap := range list {
			data = append(data, toSnapshot(snap))
		}
		// Oldest first, volume-head (which has no creation time) last.
		sort.Slice(data, func(i, j int) bool {
			if (data[i].Name == longhornHead) != (data[j].Name == longhornHead) {
				return data[j].Name == longhornHead
			}
			if data[i].Created != data[j].Created {
				return data[i].Created < data[j].Created
			}
			return data[i].Name < data[j].Name
		})
		writeJSON(w, http.StatusOK, collection(baseURL(r), "snapshot", "volumes/"+name, data))
	case "snapshotDelete", "snapshotRevert", "snapshotPurge":
		switch action {
		case "snapshotDelete":
			err = client.SnapshotDelete(ctx, in.Name)
		case "snapshotRevert":
			err = client.SnapshotRevert(ctx, in.Name)
		default:
			err = client.SnapshotPurge(ctx)
		}
		if err != nil {
			return engineError(err)
		}
		v, err := s.ds.GetVolumeRO(name)
		if err != nil {
			return err
		}
		writeJSON(w, http.StatusOK, s.toVolume(baseURL(r), v))
	}
	return nil
}

const longhornHead = "volume-head"

// volumeEndpoint is the frontend URI of an attached volume.
func (s *Server) volumeEndpoint(name string) string {
	e, err := s.ds.GetEngineRO(datastore.EngineName(name))
	if err != nil {
		return ""
	}
	return e.Status.Endpoint
}
