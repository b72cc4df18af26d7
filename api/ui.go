package api

// What Longhorn's web UI (longhorn-ui) reads on every page beyond the
// resources the project models: events, backup targets, volume
// attachments, engine images, and streams of backups and of kinds the
// project does not have. Where the project has no such concept the API
// answers a valid empty collection and keeps the stream open, never a 404
// that the UI would retry forever.

import (
	"net/http"
	"sort"
	"time"

	"github.com/gorilla/mux"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/cadence-storage/longhorn-manager/datastore"
	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
)

// Event is a Kubernetes event of the manager's namespace, as Longhorn's
// API shows it.
type Event struct {
	Resource
	Event     corev1.Event `json:"event"`
	EventType string       `json:"eventType"`
}

// VolumeAttachment lists who attaches a volume, as Longhorn's tickets.
// The project records one attacher per volume; it becomes one ticket.
type VolumeAttachment struct {
	Resource
	Attachments map[string]Attachment `json:"attachments"`
	Volume      string                `json:"volume"`
}

// Attachment is one attach request of a volume.
type Attachment struct {
	AttachmentID   string               `json:"attachmentID"`
	AttachmentType string               `json:"attachmentType"`
	NodeID         string               `json:"nodeID"`
	Parameters     map[string]string    `json:"parameters"`
	Satisfied      bool                 `json:"satisfied"`
	Conditions     []longhorn.Condition `json:"conditions"`
}

// volumeAttachments renders the volume's one attacher as a ticket.
func volumeAttachments(v *longhorn.Volume) map[string]Attachment {
	out := map[string]Attachment{}
	if v.Spec.NodeID == "" {
		return out
	}
	id := attachedBy(v)
	typ := "longhorn-api"
	if id == "" {
		id = "longhorn-api"
	} else {
		typ = "recurring-job"
	}
	out[id] = Attachment{
		AttachmentID: id, AttachmentType: typ, NodeID: v.Spec.NodeID,
		Parameters: map[string]string{"disableFrontend": boolString(v.Spec.DisableFrontend)},
		Satisfied:  v.Status.State == longhorn.VolumeStateAttached && v.Status.CurrentNodeID == v.Spec.NodeID,
		Conditions: []longhorn.Condition{},
	}
	return out
}

func boolString(b bool) string {
	if b {
		return "true"
	}
	return "false"
}

func (s *Server) eventCollection(base string) (Collection, error) {
	list, err := s.streams.events.Lister().Events(s.ds.Namespace()).List(labels.Everything())
	if err != nil {
		return Collection{}, err
	}
	sort.Slice(list, func(i, j int) bool { return eventTime(list[i]).After(eventTime(list[j])) })
	data := make([]Event, 0, len(list))
	for _, e := range list {
		data = append(data, Event{Resource: Resource{ID: e.Name, Type: "event", Links: map[string]string{}, Actions: map[string]string{}}, Event: *e, EventType: e.Type})
	}
	return collection(base, "event", "events", data), nil
}

// eventTime is when the event last happened.
func eventTime(e *corev1.Event) time.Time {
	switch {
	case !e.LastTimestamp.IsZero():
		return e.LastTimestamp.Time
	case !e.EventTime.IsZero():
		return e.EventTime.Time
	}
	return e.CreationTimestamp.Time
}

func (s *Server) listEvents(w http.ResponseWriter, r *http.Request) error {
	c, err := s.eventCollection(baseURL(r))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, c)
	return nil
}

func (s *Server) volumeAttachmentCollection(base string) (Collection, error) {
	volumes, err := s.ds.ListVolumesRO(labels.Everything())
	if err != nil {
		return Collection{}, err
	}
	sort.Slice(volumes, func(i, j int) bool { return volumes[i].Name < volumes[j].Name })
	data := make([]VolumeAttachment, 0, len(volumes))
	for _, v := range volumes {
		data = append(data, VolumeAttachment{Resource: resource(base, "volumeAttachment", "volumeattachments", v.Name), Volume: v.Name, Attachments: volumeAttachments(v)})
	}
	return collection(base, "volumeAttachment", "volumeattachments", data), nil
}

func (s *Server) listVolumeAttachments(w http.ResponseWriter, r *http.Request) error {
	c, err := s.volumeAttachmentCollection(baseURL(r))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, c)
	return nil
}

// allBackupsCollection lists the backups of every backup volume.
func (s *Server) allBackupsCollection(base string) (Collection, error) {
	volumes, err := s.ds.ListBackupVolumesRO()
	if err != nil {
		return Collection{}, err
	}
	data := []Backup{}
	for _, bv := range volumes {
		list, err := s.ds.ListBackupsInTarget(datastore.BackupVolumeTarget(bv), datastore.BackupVolumeVolume(bv))
		if err != nil {
			return Collection{}, err
		}
		for _, b := range list {
			data = append(data, toBackup(b))
		}
	}
	sort.Slice(data, func(i, j int) bool { return data[i].Name < data[j].Name })
	return collection(base, "backup", "backups", data), nil
}

// emptyKinds are what Longhorn's UI lists and streams that the project
// does not have: backups of backing images, orphans and support bundles.
var emptyKinds = map[string]string{
	"backupbackingimages": "backupBackingImage",
	"orphans":             "orphan",
	"supportbundles":      "supportBundle",
}

func emptyCollection(base, path string) Collection {
	return collection(base, emptyKinds[path], path, []struct{}{})
}

func (s *Server) listEmpty(path string) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		writeJSON(w, http.StatusOK, emptyCollection(baseURL(r), path))
		return nil
	}
}

// listTags answers /v1/nodetags and /v1/disktags: the project has no tags.
func (s *Server) listTags(w http.ResponseWriter, r *http.Request) error {
	writeJSON(w, http.StatusOK, collection(baseURL(r), "tag", r.URL.Path[len("/v1/"):], []string{}))
	return nil
}

func (s *Server) getVolumeAttachment(w http.ResponseWriter, r *http.Request) error {
	name := mux.Vars(r)["name"]
	v, err := datastore.CachedOrFresh(r.Context(), name, s.ds.GetVolumeRO, s.ds.GetVolumeFresh)
	if apierrors.IsNotFound(err) {
		return notFound("volume attachment %q not found", name)
	}
	if err != nil {
		return err
	}
	base := baseURL(r)
	writeJSON(w, http.StatusOK, VolumeAttachment{Resource: resource(base, "volumeAttachment", "volumeattachments", v.Name), Volume: v.Name, Attachments: volumeAttachments(v)})
	return nil
}
