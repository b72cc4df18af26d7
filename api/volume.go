package api

import (
	"net/http"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/gorilla/mux"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	k8sresource "k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/cadence-storage/longhorn-manager/datastore"
	"github.com/cadence-storage/longhorn-manager/internal/rights"
	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	"github.com/cadence-storage/longhorn-manager/manager"
	"github.com/cadence-storage/longhorn-manager/types"
)

const defaultNumberOfReplicas = 3

func (s *Server) listVolumes(w http.ResponseWriter, r *http.Request) error {
	volumes, err := s.ds.ListVolumesRO(labels.Everything())
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, s.volumeCollection(baseURL(r), volumes))
	return nil
}

// volumeCollection is the users' volumes: a drill's scratch volume is
// no user's (kubectl still shows it, and GET by name answers it).
func (s *Server) volumeCollection(base string, volumes []*longhorn.Volume) Collection {
	volumes = slices.DeleteFunc(volumes, func(v *longhorn.Volume) bool { return types.IsBackupVerifyScratch(v.Labels) })
	sort.Slice(volumes, func(i, j int) bool { return volumes[i].Name < volumes[j].Name })
	data := make([]Volume, 0, len(volumes))
	for _, v := range volumes {
		data = append(data, s.toVolume(base, v))
	}
	return collection(base, "volume", "volumes", data)
}

func (s *Server) getVolume(w http.ResponseWriter, r *http.Request) error {
	return s.writeVolume(w, r, mux.Vars(r)["name"])
}

// writeVolume answers the volume as the cache holds it (or the
// apiserver, for one the cache has yet to see).
func (s *Server) writeVolume(w http.ResponseWriter, r *http.Request, name string) error {
	v, err := datastore.CachedOrFresh(r.Context(), name, s.ds.GetVolumeRO, s.ds.GetVolumeFresh)
	if apierrors.IsNotFound(err) {
		return notFound("volume %q not found", name)
	}
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, s.toVolume(baseURL(r), v))
	return nil
}

// parseSize reads a size in bytes, given as a plain number ("1073741824")
// or a Kubernetes quantity ("1Gi").
func parseSize(size string) (int64, error) {
	if size == "" {
		return 0, badRequest("size: required, in bytes or as a quantity such as 10Gi")
	}
	if n, err := strconv.ParseInt(size, 10, 64); err == nil {
		if n <= 0 {
			return 0, badRequest("size: must be greater than 0, got %d", n)
		}
		return n, nil
	}
	q, err := k8sresource.ParseQuantity(size)
	if err != nil {
		return 0, badRequest("size: %q is neither a number of bytes nor a quantity such as 10Gi", size)
	}
	n, ok := q.AsInt64()
	if !ok || n <= 0 {
		return 0, badRequest("size: %q must be a positive whole number of bytes", size)
	}
	return n, nil
}

var volumeFrontends = map[longhorn.VolumeFrontend]bool{
	longhorn.VolumeFrontendBlockDev: true, longhorn.VolumeFrontendISCSI: true, longhorn.VolumeFrontendNvmf: true, longhorn.VolumeFrontendEmpty: true,
}

func (s *Server) createVolume(w http.ResponseWriter, r *http.Request) error {
	var in VolumeInput
	if err := decodeBody(w, r, &in); err != nil {
		return err
	}
	// What the new volume's data is read from, which the caller must be
	// allowed to read: get on the backup volume of fromBackup (as a
	// backupList is), on the volume of dataSource and on the backing
	// image. Checked before anything is looked up for them (a backup's
	// size), so a refused caller learns nothing of them.
	var backupVolume, sourceVolume string
	if in.FromBackup != "" {
		name, err := s.ds.BackupVolumeObjectOf(in.FromBackup)
		if err != nil {
			return badRequest("fromBackup: %v", err)
		}
		backupVolume = name
	}
	if in.DataSource != "" {
		src, err := types.ParseDataSource(in.DataSource)
		if err != nil {
			return badRequest("dataSource: %v", err)
		}
		sourceVolume = src.Volume
	}
	if err := s.requireAccess(r, fromRights(rights.VolumeReads(s.ds.Namespace(), backupVolume, sourceVolume, in.BackingImage))...); err != nil {
		return err
	}
	if in.Size == "" && in.FromBackup != "" {
		// Longhorn's clients restore without a size: the backup's.
		in.Size = s.backupVolumeSize(in.FromBackup)
	}
	size, err := parseSize(in.Size)
	if err != nil {
		return err
	}
	replicas := in.NumberOfReplicas
	if replicas == 0 {
		replicas = defaultNumberOfReplicas
	}
	if replicas < 1 || replicas > 20 {
		return badRequest("numberOfReplicas: must be between 1 and 20, got %d", in.NumberOfReplicas)
	}
	if in.DataEngine != "" && in.DataEngine != string(longhorn.DataEngineTypeV1) {
		return badRequest("dataEngine: only v1 exists here, got %q", in.DataEngine)
	}
	if in.AccessMode != "" && in.AccessMode != string(longhorn.AccessModeReadWriteOnce) {
		return badRequest("accessMode: only rwo exists here (volumes are not shared), got %q", in.AccessMode)
	}
	if in.Frontend == longhorn.VolumeFrontendEmpty {
		// Longhorn's default, which its python client expects back.
		in.Frontend = longhorn.VolumeFrontendBlockDev
	}
	if !volumeFrontends[in.Frontend] {
		return badRequest("frontend: must be one of blockdev, iscsi, nvmf or empty, got %q", in.Frontend)
	}
	if in.StaleReplicaTimeout < 0 {
		return badRequest("staleReplicaTimeout: must be 0 or more minutes, got %d", in.StaleReplicaTimeout)
	}
	if in.BackupTargetName != "" {
		if _, err := s.ds.GetTarget(in.BackupTargetName); apierrors.IsNotFound(err) {
			return badRequest("backupTargetName: BackupTarget %q does not exist; create it first or leave the field empty for %s", in.BackupTargetName, datastore.DefaultBackupTargetName)
		} else if err != nil {
			return err
		}
	}
	freeze, err := manager.ParseFreezeFilesystemForSnapshot(in.FreezeFilesystemForSnapshot)
	if err != nil {
		return err
	}
	spec := longhorn.VolumeSpec{Size: size, NumberOfReplicas: replicas, Frontend: in.Frontend, BackingImage: in.BackingImage, FromBackup: in.FromBackup,
		DataSource: in.DataSource, StaleReplicaTimeout: in.StaleReplicaTimeout, BackupTargetName: datastore.TargetName(in.BackupTargetName),
		FreezeFilesystemForSnapshot: freeze}
	if err := placementSpec(&spec, in); err != nil {
		return err
	}
	v, err := s.vm.CreateVolume(r.Context(), in.Name, spec, in.RecurringJobSelector, in.SelectedNode)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, s.toVolume(baseURL(r), v))
	return nil
}

func (s *Server) deleteVolume(w http.ResponseWriter, r *http.Request) error {
	name := mux.Vars(r)["name"]
	err := s.ds.DeleteVolume(r.Context(), name)
	if apierrors.IsNotFound(err) {
		return notFound("volume %q not found", name)
	}
	if err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// volumeAction runs POST /v1/volumes/{name}?action=...
func (s *Server) volumeAction(w http.ResponseWriter, r *http.Request) error {
	name := mux.Vars(r)["name"]
	action := r.URL.Query().Get("action")
	var (
		list []datastore.RecurringJobSelectorItem
		err  error
	)
	switch action {
	case "recurringJobList":
		list, err = s.vm.ListVolumeRecurringJobs(r.Context(), name)
	case "recurringJobAdd", "recurringJobDelete":
		var in VolumeRecurringJobInput
		if err := decodeBody(w, r, &in); err != nil {
			return err
		}
		if in.Name == "" {
			return badRequest("name: required")
		}
		item := datastore.RecurringJobSelectorItem{Name: in.Name, IsGroup: in.IsGroup}
		if action == "recurringJobAdd" {
			list, err = s.vm.AddVolumeRecurringJob(r.Context(), name, item)
		} else {
			list, err = s.vm.DeleteVolumeRecurringJob(r.Context(), name, item)
		}
	case "attach":
		return s.attachVolume(w, r, name)
	case "detach":
		return s.detachVolume(w, r, name)
	case "expand":
		return s.expandVolume(w, r, name)
	case "trimFilesystem":
		return s.trimFilesystem(w, r, name)
	case "updateBackupTargetName":
		return s.updateBackupTargetName(w, r, name)
	case "updateFreezeFilesystemForSnapshot":
		return s.updateFreezeFilesystemForSnapshot(w, r, name)
	case "updateReplicaSoftAntiAffinity", "updateReplicaZoneSoftAntiAffinity", "updateReplicaDiskSoftAntiAffinity":
		return s.updateSoftAntiAffinity(w, r, name, action)
	case "snapshotBackup":
		return s.snapshotBackup(w, r, name)
	case "snapshotCRCreate", "snapshotCRList", "snapshotCRGet", "snapshotCRDelete":
		return s.snapshotCRAction(w, r, name, action)
	case "snapshotCreate", "snapshotList", "snapshotGet", "snapshotDelete", "snapshotPurge", "snapshotRevert":
		return s.snapshotAction(w, r, name, action)
	case "":
		return &httpError{http.StatusMethodNotAllowed, "MethodNotAllowed", "POST on a volume needs ?action=..., one of " + strings.Join(allVolumeActions(), ", ")}
	default:
		if err := s.unsupportedVolumeAction(name, action); err != nil {
			return err
		}
		return badRequest("action: %q is not a volume action; use one of %s", action, strings.Join(allVolumeActions(), ", "))
	}
	if err != nil {
		return err
	}
	base := baseURL(r)
	data := make([]VolumeRecurringJob, 0, len(list))
	for _, item := range list {
		data = append(data, VolumeRecurringJob{
			Resource: Resource{ID: item.Name, Type: "volumeRecurringJob", Links: map[string]string{}, Actions: map[string]string{}},
			Name:     item.Name, IsGroup: item.IsGroup,
		})
	}
	writeJSON(w, http.StatusOK, collection(base, "volumeRecurringJob", "volumes/"+name, data))
	return nil
}

func allVolumeActions() []string {
	return append(append(append(append([]string{}, volumeActions...), snapshotActions...), attachedActions...), snapshotCRActions...)
}

// backupVolumeSize is the size of the volume a backup URL was taken of,
// from the Backup objects the backup target controller keeps; empty when
// none has that URL.
func (s *Server) backupVolumeSize(url string) string {
	volumes, err := s.ds.ListBackupVolumesRO()
	if err != nil {
		return ""
	}
	for _, bv := range volumes {
		backups, err := s.ds.ListBackupsRO(datastore.BackupVolumeVolume(bv))
		if err != nil {
			continue
		}
		for _, b := range backups {
			if b.Status.URL == url {
				if b.Status.VolumeSize != "" {
					return b.Status.VolumeSize
				}
				return bv.Status.Size
			}
		}
	}
	return ""
}
