package api

import (
	"net/http"
	"sort"
	"strconv"
	"time"

	"github.com/gorilla/mux"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/cadence-storage/longhorn-manager/datastore"
	"github.com/cadence-storage/longhorn-manager/engine/backupstore"
	"github.com/cadence-storage/longhorn-manager/engineapi"
	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	"github.com/cadence-storage/longhorn-manager/types"
)

// BackupVolume is the API view of the backups of one volume.
type BackupVolume struct {
	Resource
	Name           string `json:"name"`
	Size           string `json:"size"`
	Created        string `json:"created"`
	LastBackupName string `json:"lastBackupName"`
	LastBackupAt   string `json:"lastBackupAt"`
	// Messages say why the target cannot be read, when it cannot.
	Messages map[string]string `json:"messages,omitempty"`
	// Longhorn's fields its UI reads; the one target is "default".
	Labels           map[string]string `json:"labels"`
	DataStored       string            `json:"dataStored"`
	BackingImageName string            `json:"backingImageName"`
	BackupTargetName string            `json:"backupTargetName"`
	VolumeName       string            `json:"volumeName"`
}

// Backup is the API view of one backup.
type Backup struct {
	Resource
	Name            string            `json:"name"`
	State           string            `json:"state"`
	Progress        int               `json:"progress"`
	URL             string            `json:"url"`
	SnapshotName    string            `json:"snapshotName"`
	SnapshotCreated string            `json:"snapshotCreated"`
	Created         string            `json:"created"`
	Size            string            `json:"size"`
	Labels          map[string]string `json:"labels"`
	VolumeName      string            `json:"volumeName"`
	// VolumeBackingImageName is the backing image the volume started
	// from; a restore needs a volume on the same image.
	VolumeBackingImageName string `json:"volumeBackingImageName,omitempty"`
	Error                  string `json:"error,omitempty"`
	// Longhorn's fields its UI reads.
	Messages      map[string]string `json:"messages"`
	VolumeSize    string            `json:"volumeSize"`
	VolumeCreated string            `json:"volumeCreated"`
	BackupMode    string            `json:"backupMode"`
	// The bytes uploaded that the target lacked, and those a full backup
	// uploaded again (Longhorn's keys).
	NewlyUploadedDataSize string `json:"newlyUploadDataSize"`
	ReUploadedDataSize    string `json:"reUploadedDataSize"`
	CompressionMethod     string `json:"compressionMethod"`
	BackupTargetName      string `json:"backupTargetName"`
	BlockSize             string `json:"blockSize"`
	// Verification is what the last drill of the backup found
	// (backupVerify, backup-verify).
	Verification *longhorn.BackupVerification `json:"verification,omitempty"`
	// VerifyRequestedAt is when a drill was last asked for; the drill
	// that answers it has verification.requestedAt equal to it (or later),
	// and verification.requestedFull when VerifyFull.
	VerifyRequestedAt string `json:"verifyRequestedAt,omitempty"`
	// VerifyFull says the drill asked for is a full one.
	VerifyFull bool `json:"verifyFull,omitempty"`
}

// BackupInput names a backup of a backup volume.
type BackupInput struct {
	Name string `json:"name"`
}

var backupVolumeActions = []string{"backupList", "backupGet", "backupDelete", "backupVerify", "backupVolumeSync"}

func toBackupVolume(base string, bv *longhorn.BackupVolume) BackupVolume {
	r := resource(base, "backupVolume", "backupvolumes", bv.Name)
	for _, a := range backupVolumeActions {
		r.Actions[a] = r.Links["self"] + "?action=" + a
	}
	return BackupVolume{Resource: r, Name: bv.Name, Size: bv.Status.Size, Created: bv.Status.CreatedAt,
		LastBackupName: bv.Status.LastBackupName, LastBackupAt: bv.Status.LastBackupAt, Messages: bv.Status.Messages,
		Labels: nonNilMap(bv.Status.Labels), DataStored: bv.Status.DataStored, BackingImageName: bv.Status.BackingImageName,
		BackupTargetName: datastore.BackupVolumeTarget(bv), VolumeName: datastore.BackupVolumeVolume(bv)}
}

func toBackup(b *longhorn.Backup) Backup {
	out := Backup{
		Resource: Resource{ID: b.Name, Type: "backup", Links: map[string]string{}, Actions: map[string]string{}},
		Name:     b.Name, State: string(b.Status.State), Progress: b.Status.Progress, URL: b.Status.URL,
		SnapshotName: b.Status.SnapshotName, SnapshotCreated: b.Status.SnapshotCreatedAt, Created: b.Status.BackupCreatedAt,
		Size: b.Status.Size, Labels: b.Status.Labels, VolumeName: b.Status.VolumeName, Error: b.Status.Error,
		VolumeBackingImageName: b.Status.VolumeBackingImageName,
		Messages:               nonNilMap(b.Status.Messages), VolumeSize: b.Status.VolumeSize, VolumeCreated: b.Status.VolumeCreated,
		BackupMode: b.Status.BackupMode, BackupTargetName: datastore.BackupTargetOf(b), BlockSize: strconv.Itoa(backupstore.BlockSize),
		NewlyUploadedDataSize: b.Status.NewlyUploadedDataSize, ReUploadedDataSize: b.Status.ReUploadedDataSize,
		Verification: b.Status.Verification, VerifyFull: b.Spec.VerifyFull,
	}
	if !b.Spec.VerifyRequestedAt.IsZero() {
		out.VerifyRequestedAt = b.Spec.VerifyRequestedAt.UTC().Format(time.RFC3339)
	}
	return out
}

// listBackupVolumes lists the backup volumes; ?volumeName= and
// ?backupTargetName= keep those of one volume, of one target ("default"
// for the backup settings' target): how a client finds the backup volume
// of a volume in a target, whose name it cannot compute (in a target but
// default the name is hashed, and may be another volume's).
func (s *Server) listBackupVolumes(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	volume, target := q.Get("volumeName"), q.Get("backupTargetName")
	c, err := s.backupVolumeCollectionOf(baseURL(r), func(bv *longhorn.BackupVolume) bool {
		return (volume == "" || datastore.BackupVolumeVolume(bv) == volume) && (target == "" || datastore.BackupVolumeTarget(bv) == target)
	})
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, c)
	return nil
}

func (s *Server) backupVolumeCollection(base string) (Collection, error) {
	return s.backupVolumeCollectionOf(base, func(*longhorn.BackupVolume) bool { return true })
}

// backupVolumeCollectionOf is the collection of the backup volumes keep
// keeps.
func (s *Server) backupVolumeCollectionOf(base string, keep func(*longhorn.BackupVolume) bool) (Collection, error) {
	all, err := s.ds.ListBackupVolumesRO()
	if err != nil {
		return Collection{}, err
	}
	list := make([]*longhorn.BackupVolume, 0, len(all))
	for _, bv := range all {
		if keep(bv) {
			list = append(list, bv)
		}
	}
	sort.Slice(list, func(i, j int) bool { return list[i].Name < list[j].Name })
	data := make([]BackupVolume, 0, len(list))
	for _, bv := range list {
		data = append(data, toBackupVolume(base, bv))
	}
	return collection(base, "backupVolume", "backupvolumes", data), nil
}

func (s *Server) getBackupVolume(w http.ResponseWriter, r *http.Request) error {
	name := mux.Vars(r)["name"]
	bv, err := s.ds.GetBackupVolumeRO(name)
	if apierrors.IsNotFound(err) {
		return notFound("backup volume %q not found", name)
	}
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, toBackupVolume(baseURL(r), bv))
	return nil
}

// deleteBackupVolume deletes a backup volume and every backup of it from
// the backup target (Longhorn's backupVolumeDelete): the backup target
// controller deletes them, under the lock a backup's deletion takes, then
// the objects; what stops it is said in the BackupVolume's messages.
func (s *Server) deleteBackupVolume(w http.ResponseWriter, r *http.Request) error {
	name := mux.Vars(r)["name"]
	err := s.ds.DeleteBackupVolumeAndBackups(r.Context(), name)
	if apierrors.IsNotFound(err) {
		return notFound("backup volume %q not found", name)
	}
	if err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// backupVolumeAction runs backupList, backupGet, backupDelete and
// backupVolumeSync.
func (s *Server) backupVolumeAction(w http.ResponseWriter, r *http.Request) error {
	bvName := mux.Vars(r)["name"]
	action := r.URL.Query().Get("action")
	bv, err := s.ds.GetBackupVolumeRO(bvName)
	if apierrors.IsNotFound(err) {
		return notFound("backup volume %q not found", bvName)
	}
	if err != nil {
		return err
	}
	// The object's name is the volume's in default; in another target
	// the volume and target are in its spec.
	volume, target := datastore.BackupVolumeVolume(bv), datastore.BackupVolumeTarget(bv)
	switch action {
	case "backupVerify":
		return s.backupVerify(w, r, bvName)
	case "backupVolumeSync":
		// Read this volume from the target now, not at the next poll.
		bv, err := s.ds.RequestBackupVolumeSync(r.Context(), bvName)
		if apierrors.IsNotFound(err) {
			return notFound("backup volume %q not found", bvName)
		}
		if err != nil {
			return err
		}
		writeJSON(w, http.StatusOK, toBackupVolume(baseURL(r), bv))
		return nil
	case "backupList":
		list, err := s.ds.ListBackupsInTarget(target, volume)
		if err != nil {
			return err
		}
		sort.Slice(list, func(i, j int) bool { return list[i].Status.BackupCreatedAt < list[j].Status.BackupCreatedAt })
		data := make([]Backup, 0, len(list))
		for _, b := range list {
			data = append(data, toBackup(b))
		}
		writeJSON(w, http.StatusOK, collection(baseURL(r), "backup", "backupvolumes/"+bvName, data))
		return nil
	case "backupGet", "backupDelete":
		var in BackupInput
		if err := decodeBody(w, r, &in); err != nil {
			return err
		}
		if in.Name == "" {
			return badRequest("name: required, the backup's name")
		}
		b, err := s.ds.GetBackupRO(in.Name)
		if apierrors.IsNotFound(err) || (err == nil && (datastore.BackupVolumeName(b) != volume || datastore.BackupTargetOf(b) != target)) {
			return notFound("backup %q of volume %q in backup target %q not found", in.Name, volume, target)
		}
		if err != nil {
			return err
		}
		if action == "backupDelete" {
			// The backup target controller deletes it from the target,
			// then releases the object.
			if err := s.ds.DeleteBackup(r.Context(), in.Name); err != nil && !apierrors.IsNotFound(err) {
				return err
			}
		}
		writeJSON(w, http.StatusOK, toBackup(b))
		return nil
	}
	return badRequest("action: %q is not a backup volume action; use backupList, backupGet, backupDelete, backupVerify or backupVolumeSync", action)
}

// snapshotBackup backs a snapshot of an attached volume up to the backup
// target; the Backup object shows its progress.
func (s *Server) snapshotBackup(w http.ResponseWriter, r *http.Request, name string) error {
	var in SnapshotInput
	if err := decodeBody(w, r, &in); err != nil {
		return err
	}
	if in.Name == "" {
		return badRequest("name: required, the snapshot to back up")
	}
	if err := backupstore.CheckMode(in.BackupMode); err != nil {
		return badRequest("%v", err)
	}
	target, cred, err := s.volumeBackupTarget(r.Context(), name, in.BackupTargetName)
	if err != nil {
		return err
	}
	if err := s.fullAfterFailedDrill(name, target.Name, &in); err != nil {
		return err
	}
	labels, err := s.backupLabels(name, in.Labels)
	if err != nil {
		return err
	}
	client, err := s.engineClient(name)
	if err != nil {
		return err
	}
	defer client.Close()
	compression, err := s.ds.GetSettingValue(types.SettingNameBackupCompressionMethod)
	if err != nil {
		return err
	}
	concurrency, err := s.ds.GetSettingAsInt(types.SettingNameBackupConcurrentLimit)
	if err != nil {
		return err
	}
	if err := s.waitSnapshotTaken(r.Context(), client, name, in.Name); err != nil {
		return err
	}
	backup, err := client.SnapshotBackup(r.Context(), engineapi.BackupRequest{Name: backupstore.NewBackupName(), Snapshot: in.Name, Target: target.URL,
		Credential: cred, Labels: labels, Compression: compression, Concurrency: concurrency, Full: in.BackupMode == backupstore.ModeFull})
	if err != nil {
		return engineError(err)
	}
	writeJSON(w, http.StatusOK, map[string]string{"type": "backupInput", "id": backup, "name": backup, "snapshotName": in.Name, "volumeName": name})
	return nil
}

// backupLabels are the labels a backup of volume is made with: the
// request's, and the volume's UID (types.LabelVolumeUID), by which a
// system backup knows the backup is of this very volume and not of
// another of its name.
func (s *Server) backupLabels(volume string, asked map[string]string) (map[string]string, error) {
	v, err := s.ds.GetVolumeRO(volume)
	if apierrors.IsNotFound(err) {
		return asked, nil // answered by the engine's lookup, as before
	}
	if err != nil {
		return nil, err
	}
	labels := make(map[string]string, len(asked)+1)
	for k, val := range asked {
		labels[k] = val
	}
	labels[types.LabelVolumeUID] = string(v.UID)
	return labels, nil
}

func nonNilMap(m map[string]string) map[string]string {
	if m == nil {
		return map[string]string{}
	}
	return m
}
