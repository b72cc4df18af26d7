package api

import (
	"context"
	"errors"
	"net/http"
	"sort"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilrand "k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/cadence-storage/longhorn-manager/controller/kit"
	"github.com/cadence-storage/longhorn-manager/datastore"
	"github.com/cadence-storage/longhorn-manager/engineapi"
	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	"github.com/cadence-storage/longhorn-manager/types"
)

// snapshotCRActions work on a volume's Snapshot objects, in every state:
// the snapshot controller creates and deletes the engine's snapshots for
// them, as Longhorn's does.
var snapshotCRActions = []string{"snapshotCRCreate", "snapshotCRList", "snapshotCRGet", "snapshotCRDelete"}

// SnapshotCR is the API view of a Snapshot object, as Longhorn's.
type SnapshotCR struct {
	Resource
	Name           string            `json:"name"`
	CRCreationTime string            `json:"crCreationTime"`
	Volume         string            `json:"volume"`
	CreateSnapshot bool              `json:"createSnapshot"`
	Parent         string            `json:"parent"`
	Children       map[string]bool   `json:"children"`
	MarkRemoved    bool              `json:"markRemoved"`
	UserCreated    bool              `json:"userCreated"`
	CreationTime   string            `json:"creationTime"`
	Size           int64             `json:"size"`
	Labels         map[string]string `json:"labels"`
	OwnerID        string            `json:"ownerID"`
	Error          string            `json:"error,omitempty"`
	RestoreSize    int64             `json:"restoreSize"`
	ReadyToUse     bool              `json:"readyToUse"`
	Checksum       string            `json:"checksum"`
}

func toSnapshotCR(s *longhorn.Snapshot) SnapshotCR {
	labels := s.Spec.Labels
	if len(labels) == 0 {
		labels = s.Status.Labels
	}
	if labels == nil {
		labels = map[string]string{}
	}
	children := s.Status.Children
	if children == nil {
		children = map[string]bool{}
	}
	return SnapshotCR{
		Resource: Resource{ID: s.Name, Type: "snapshotCR", Links: map[string]string{}, Actions: map[string]string{}},
		Name:     s.Name, CRCreationTime: s.CreationTimestamp.Format(time.RFC3339), Volume: s.Spec.Volume, CreateSnapshot: s.Spec.CreateSnapshot,
		Parent: s.Status.Parent, Children: children, MarkRemoved: s.Status.MarkRemoved, UserCreated: s.Status.UserCreated,
		CreationTime: s.Status.CreationTime, Size: s.Status.Size, Labels: labels, OwnerID: s.Status.OwnerID, Error: s.Status.Error,
		RestoreSize: s.Status.RestoreSize, ReadyToUse: s.Status.ReadyToUse,
	}
}

// snapshotCRAction runs snapshotCRCreate, snapshotCRList, snapshotCRGet
// and snapshotCRDelete.
func (s *Server) snapshotCRAction(w http.ResponseWriter, r *http.Request, volume, action string) error {
	vol, err := datastore.CachedOrFresh(r.Context(), volume, s.ds.GetVolumeRO, s.ds.GetVolumeFresh)
	if apierrors.IsNotFound(err) {
		return notFound("volume %q not found", volume)
	} else if err != nil {
		return err
	}
	var in SnapshotInput
	if action != "snapshotCRList" {
		if err := decodeBody(w, r, &in); err != nil {
			return err
		}
		if in.Name == "" && action != "snapshotCRCreate" {
			return badRequest("name: required, the snapshot's name")
		}
	}
	switch action {
	case "snapshotCRList":
		list, err := s.ds.ListVolumeSnapshotsRO(volume)
		if err != nil {
			return err
		}
		sort.Slice(list, func(i, j int) bool {
			if list[i].Status.CreationTime != list[j].Status.CreationTime {
				return list[i].Status.CreationTime < list[j].Status.CreationTime
			}
			return list[i].Name < list[j].Name
		})
		data := make([]SnapshotCR, 0, len(list))
		for _, snap := range list {
			data = append(data, toSnapshotCR(snap))
		}
		writeJSON(w, http.StatusOK, collection(baseURL(r), "snapshotCR", "volumes/"+volume, data))
		return nil
	case "snapshotCRCreate":
		name := in.Name
		if name == "" {
			name = "snap-" + utilrand.String(10)
		}
		if errs := validation.IsDNS1123Subdomain(name); len(errs) > 0 {
			return badRequest("name: %q is not a valid snapshot name: %s", name, errs[0])
		}
		// Created as the snapshot controller would leave it (label,
		// finalizer, owner), so taking it in writes only its status.
		snap, err := s.ds.CreateSnapshot(r.Context(), &longhorn.Snapshot{
			ObjectMeta: metav1.ObjectMeta{
				Name: name, Labels: map[string]string{types.LabelVolume: volume},
				Finalizers:      []string{types.LonghornFinalizer},
				OwnerReferences: kit.OwnedBy(vol),
			},
			Spec: longhorn.SnapshotSpec{Volume: volume, CreateSnapshot: true, Labels: in.Labels},
		})
		if apierrors.IsAlreadyExists(err) {
			return &httpError{http.StatusConflict, "Conflict", "snapshot " + name + " already exists"}
		}
		if apierrors.IsInvalid(err) || apierrors.IsBadRequest(err) || apierrors.IsForbidden(err) {
			return badRequest("%v", err)
		}
		if err != nil {
			return err
		}
		writeJSON(w, http.StatusOK, toSnapshotCR(snap))
		return nil
	}
	snap, err := s.ds.GetSnapshotRO(in.Name)
	if apierrors.IsNotFound(err) || (err == nil && snap.Spec.Volume != volume) {
		return notFound("snapshot %q of volume %q not found", in.Name, volume)
	}
	if err != nil {
		return err
	}
	if action == "snapshotCRDelete" {
		if err := s.ds.DeleteSnapshot(r.Context(), in.Name); err != nil && !apierrors.IsNotFound(err) {
			return err
		}
		writeJSON(w, http.StatusOK, map[string]any{"type": "empty", "links": map[string]string{}, "actions": map[string]string{}})
		return nil
	}
	writeJSON(w, http.StatusOK, toSnapshotCR(snap))
	return nil
}

// snapshotTakeWait bounds how long a backup waits for its snapshot to be
// taken.
const snapshotTakeWait = 30 * time.Second

// waitSnapshotTaken waits while the snapshot a backup names is a Snapshot
// object the snapshot controller has yet to take in the engine: Longhorn's
// UI creates the object (snapshotCRCreate) and backs it up at once, and
// Longhorn's backup waits for it. Any other case goes on at once, and the
// backup reports what the engine says.
func (s *Server) waitSnapshotTaken(ctx context.Context, client engineapi.EngineClient, volume, name string) error {
	deadline := time.Now().Add(snapshotTakeWait)
	for {
		_, err := client.SnapshotGet(ctx, name)
		if err == nil || !errors.Is(err, engineapi.ErrNotFound) {
			return nil
		}
		snap, err := s.ds.GetSnapshotFresh(ctx, name)
		if err != nil || snap.Spec.Volume != volume || !snap.Spec.CreateSnapshot || snap.Status.Error != "" ||
			snap.DeletionTimestamp != nil || time.Now().After(deadline) {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}
