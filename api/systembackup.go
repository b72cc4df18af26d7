package api

import (
	"fmt"
	"net/http"
	"sort"

	"github.com/gorilla/mux"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cadence-storage/longhorn-manager/controller/kit"
	"github.com/cadence-storage/longhorn-manager/datastore"
	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	"github.com/cadence-storage/longhorn-manager/systembackup"
	"github.com/cadence-storage/longhorn-manager/types"
)

// SystemBackup is a SystemBackup as Longhorn's API shows it: the Error
// condition as "reason: message" in error.
type SystemBackup struct {
	Resource
	Name               string `json:"name"`
	VolumeBackupPolicy string `json:"volumeBackupPolicy"`
	Version            string `json:"version,omitempty"`
	ManagerImage       string `json:"managerImage,omitempty"`
	State              string `json:"state,omitempty"`
	CreatedAt          string `json:"createdAt,omitempty"`
	Error              string `json:"error,omitempty"`
}

// SystemBackupInput is a create body, as Longhorn's UI sends it.
type SystemBackupInput struct {
	Name               string `json:"name"`
	VolumeBackupPolicy string `json:"volumeBackupPolicy"`
}

// SystemRestore is a SystemRestore as Longhorn's API shows it.
type SystemRestore struct {
	Resource
	Name         string `json:"name"`
	SystemBackup string `json:"systemBackup"`
	State        string `json:"state,omitempty"`
	CreatedAt    string `json:"createdAt,omitempty"`
	Error        string `json:"error,omitempty"`
}

// SystemRestoreInput is a create body, as Longhorn's UI sends it.
type SystemRestoreInput struct {
	Name         string `json:"name"`
	SystemBackup string `json:"systemBackup"`
}

func errorOf(conds []longhorn.Condition, condType string) string {
	c := kit.GetCondition(conds, condType)
	if c.Status != longhorn.ConditionStatusTrue {
		return ""
	}
	return fmt.Sprintf("%s: %s", c.Reason, c.Message)
}

func toSystemBackup(base string, sb *longhorn.SystemBackup) SystemBackup {
	out := SystemBackup{Resource: resource(base, "systemBackup", "systembackups", sb.Name), Name: sb.Name,
		VolumeBackupPolicy: string(sb.Spec.VolumeBackupPolicy), Version: sb.Status.Version, ManagerImage: sb.Status.ManagerImage,
		State: string(sb.Status.State)}
	if !sb.Status.CreatedAt.IsZero() {
		out.CreatedAt = sb.Status.CreatedAt.UTC().Format("2006-01-02T15:04:05Z")
	}
	if sb.Status.State == longhorn.SystemBackupStateError {
		out.Error = errorOf(sb.Status.Conditions, longhorn.SystemBackupConditionTypeError)
	}
	return out
}

func toSystemRestore(base string, sr *longhorn.SystemRestore) SystemRestore {
	out := SystemRestore{Resource: resource(base, "systemRestore", "systemrestores", sr.Name), Name: sr.Name,
		SystemBackup: sr.Spec.SystemBackup, State: string(sr.Status.State),
		CreatedAt: sr.CreationTimestamp.UTC().Format("2006-01-02T15:04:05Z")}
	if sr.Status.State == longhorn.SystemRestoreStateError {
		out.Error = errorOf(sr.Status.Conditions, longhorn.SystemRestoreConditionTypeError)
	}
	return out
}

func (s *Server) systemBackupCollection(base string) (Collection, error) {
	list, err := s.ds.ListSystemBackupsRO()
	if err != nil {
		return Collection{}, err
	}
	sort.Slice(list, func(i, j int) bool { return list[i].Name < list[j].Name })
	data := make([]SystemBackup, 0, len(list))
	for _, sb := range list {
		data = append(data, toSystemBackup(base, sb))
	}
	return collection(base, "systemBackup", "systembackups", data), nil
}

func (s *Server) systemRestoreCollection(base string) (Collection, error) {
	list, err := s.ds.ListSystemRestoresRO()
	if err != nil {
		return Collection{}, err
	}
	sort.Slice(list, func(i, j int) bool { return list[i].Name < list[j].Name })
	data := make([]SystemRestore, 0, len(list))
	for _, sr := range list {
		data = append(data, toSystemRestore(base, sr))
	}
	return collection(base, "systemRestore", "systemrestores", data), nil
}

func (s *Server) listSystemBackups(w http.ResponseWriter, r *http.Request) error {
	c, err := s.systemBackupCollection(baseURL(r))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, c)
	return nil
}

func (s *Server) listSystemRestores(w http.ResponseWriter, r *http.Request) error {
	c, err := s.systemRestoreCollection(baseURL(r))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, c)
	return nil
}

func (s *Server) getSystemBackup(w http.ResponseWriter, r *http.Request) error {
	name := mux.Vars(r)["name"]
	// A system-backup job's run polls the one it has just made.
	sb, err := datastore.CachedOrFresh(r.Context(), name, s.ds.GetSystemBackupRO, s.ds.GetSystemBackupFresh)
	if apierrors.IsNotFound(err) {
		return notFound("system backup %q not found", name)
	}
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, toSystemBackup(baseURL(r), sb))
	return nil
}

func (s *Server) getSystemRestore(w http.ResponseWriter, r *http.Request) error {
	name := mux.Vars(r)["name"]
	sr, err := datastore.CachedOrFresh(r.Context(), name, s.ds.GetSystemRestoreRO, s.ds.GetSystemRestoreFresh)
	if apierrors.IsNotFound(err) {
		return notFound("system restore %q not found", name)
	}
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, toSystemRestore(baseURL(r), sr))
	return nil
}

// createSystemBackup makes a SystemBackup; the controller does the rest.
// A system backup needs the default backup target, as Longhorn's does.
func (s *Server) createSystemBackup(w http.ResponseWriter, r *http.Request) error {
	var in SystemBackupInput
	if err := decodeBody(w, r, &in); err != nil {
		return err
	}
	if err := systembackup.CheckName(in.Name); err != nil {
		return badRequest("name: %v", err)
	}
	policy, err := systembackup.ParsePolicy(in.VolumeBackupPolicy)
	if err != nil {
		return badRequest("%v", err)
	}
	target, err := s.ds.GetSettingValue(types.SettingNameBackupTarget)
	if err != nil {
		return err
	}
	if target == "" {
		return badRequest("backup-target: no backup target is set; a system backup is stored in the default backup target")
	}
	created, err := s.ds.CreateSystemBackup(r.Context(), &longhorn.SystemBackup{ObjectMeta: metav1.ObjectMeta{Name: in.Name},
		Spec: longhorn.SystemBackupSpec{VolumeBackupPolicy: policy}})
	switch {
	case apierrors.IsAlreadyExists(err):
		return &httpError{http.StatusConflict, "AlreadyExists", "name: system backup " + in.Name + " already exists"}
	case apierrors.IsInvalid(err):
		return badRequest("%v", err)
	case err != nil:
		return err
	}
	writeJSON(w, http.StatusOK, toSystemBackup(baseURL(r), created))
	return nil
}

// createSystemRestore makes a SystemRestore of an existing SystemBackup.
func (s *Server) createSystemRestore(w http.ResponseWriter, r *http.Request) error {
	var in SystemRestoreInput
	if err := decodeBody(w, r, &in); err != nil {
		return err
	}
	if err := systembackup.CheckName(in.Name); err != nil {
		return badRequest("name: %v", err)
	}
	if in.SystemBackup == "" {
		return badRequest("systemBackup: required, the system backup to restore")
	}
	_, err := datastore.CachedOrFresh(r.Context(), in.SystemBackup, s.ds.GetSystemBackupRO, s.ds.GetSystemBackupFresh)
	if apierrors.IsNotFound(err) {
		return badRequest("systemBackup: system backup %q does not exist", in.SystemBackup)
	} else if err != nil {
		return err
	}
	requester, err := s.restoreRequester(r)
	if err != nil {
		return err
	}
	created, err := s.ds.CreateSystemRestore(r.Context(), &longhorn.SystemRestore{ObjectMeta: metav1.ObjectMeta{Name: in.Name},
		Spec: longhorn.SystemRestoreSpec{SystemBackup: in.SystemBackup, Requester: requester}})
	switch {
	case apierrors.IsAlreadyExists(err):
		return &httpError{http.StatusConflict, "AlreadyExists", "name: system restore " + in.Name + " already exists"}
	case apierrors.IsInvalid(err):
		return badRequest("%v", err)
	case err != nil:
		return err
	}
	writeJSON(w, http.StatusOK, toSystemRestore(baseURL(r), created))
	return nil
}

// restoreRequester is who asks for a restore, recorded in it: the restore
// creates each object of the archive only if they may (see
// controller/systembackup). With --api-auth=kubernetes it is the
// authenticated caller; with --api-auth=none, which trusts every caller
// with the manager's own rights, the manager's account.
func (s *Server) restoreRequester(r *http.Request) (*longhorn.SystemRestoreRequester, error) {
	user, ok, err := s.caller(r)
	if err != nil {
		return nil, err
	}
	if !ok {
		return &longhorn.SystemRestoreRequester{Username: s.managerUser}, nil
	}
	out := &longhorn.SystemRestoreRequester{Username: user.Username, UID: user.UID, Groups: user.Groups}
	if len(user.Extra) > 0 {
		out.Extra = make(map[string][]string, len(user.Extra))
		for k, v := range user.Extra {
			out.Extra[k] = v
		}
	}
	return out, nil
}

// deleteSystemBackup deletes a SystemBackup, and with it its archive in
// the backup target (the controller's finalizer).
func (s *Server) deleteSystemBackup(w http.ResponseWriter, r *http.Request) error {
	name := mux.Vars(r)["name"]
	err := s.ds.DeleteSystemBackup(r.Context(), name)
	if apierrors.IsNotFound(err) {
		return notFound("system backup %q not found", name)
	}
	if err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// deleteSystemRestore deletes a SystemRestore; what it restored stays.
func (s *Server) deleteSystemRestore(w http.ResponseWriter, r *http.Request) error {
	name := mux.Vars(r)["name"]
	err := s.ds.DeleteSystemRestore(r.Context(), name)
	if apierrors.IsNotFound(err) {
		return notFound("system restore %q not found", name)
	}
	if err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}
