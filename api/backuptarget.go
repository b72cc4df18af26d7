package api

import (
	"errors"
	"fmt"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/gorilla/mux"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"

	"github.com/cadence-storage/longhorn-manager/controller/kit"
	"github.com/cadence-storage/longhorn-manager/datastore"
	"github.com/cadence-storage/longhorn-manager/engine/backupstore"
	"github.com/cadence-storage/longhorn-manager/internal/rights"
	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
)

// defaultBackupTargetName is the target the backup settings name, the
// one backups go to.
const defaultBackupTargetName = datastore.DefaultBackupTargetName

// BackupTarget is a BackupTarget object as Longhorn's API shows it: the
// poll interval as a duration ("5m0s"), the Unavailable condition's
// message as message.
type BackupTarget struct {
	Resource
	Name             string `json:"name"`
	BackupTargetURL  string `json:"backupTargetURL"`
	CredentialSecret string `json:"credentialSecret"`
	PollInterval     string `json:"pollInterval"`
	Available        bool   `json:"available"`
	Message          string `json:"message"`
}

// BackupTargetInput is a create or backupTargetUpdate body, as Longhorn's
// UI sends it: pollInterval in seconds ("300"); a duration ("5m0s", what
// the API shows) is taken too.
type BackupTargetInput struct {
	Name             string `json:"name"`
	BackupTargetURL  string `json:"backupTargetURL"`
	CredentialSecret string `json:"credentialSecret"`
	PollInterval     string `json:"pollInterval"`
}

var backupTargetActions = []string{"backupTargetUpdate"}

func toBackupTarget(base string, bt *longhorn.BackupTarget) BackupTarget {
	r := resource(base, "backupTarget", "backuptargets", bt.Name)
	r.Actions["backupTargetUpdate"] = base + "/v1/backuptargets/" + bt.Name + "?action=backupTargetUpdate"
	return BackupTarget{Resource: r, Name: bt.Name, BackupTargetURL: bt.Spec.BackupTargetURL, CredentialSecret: bt.Spec.CredentialSecret,
		PollInterval: bt.Spec.PollInterval.Duration.String(), Available: bt.Status.Available,
		Message: kit.GetCondition(bt.Status.Conditions, longhorn.BackupTargetConditionTypeUnavailable).Message}
}

// parsePollInterval reads an input's pollInterval: whole seconds, or a
// duration.
func parsePollInterval(v string) (time.Duration, error) {
	if secs, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64); err == nil {
		return time.Duration(secs) * time.Second, nil
	}
	d, err := time.ParseDuration(strings.TrimSpace(v))
	if err != nil {
		return 0, fmt.Errorf("pollInterval: %q must be a number of seconds (300) or a duration (5m0s)", v)
	}
	return d, nil
}

// backupTargetSpec is the spec an input asks for, checked by the rules
// of the settings default mirrors, each error naming its field.
func backupTargetSpec(in BackupTargetInput) (longhorn.BackupTargetSpec, error) {
	interval, err := parsePollInterval(in.PollInterval)
	if err != nil {
		return longhorn.BackupTargetSpec{}, badRequest("%v", err)
	}
	spec := longhorn.BackupTargetSpec{BackupTargetURL: in.BackupTargetURL, CredentialSecret: in.CredentialSecret,
		PollInterval: metav1.Duration{Duration: interval}}
	if err := datastore.ValidateBackupTargetSpec(spec); err != nil {
		return spec, badRequest("%s", strings.ReplaceAll(err.Error(), "spec.", ""))
	}
	return spec, nil
}

// backupTargetCollection is every BackupTarget, by name.
func (s *Server) backupTargetCollection(base string) (Collection, error) {
	targets, err := s.ds.ListBackupTargetsRO()
	if err != nil {
		return Collection{}, err
	}
	sort.Slice(targets, func(i, j int) bool { return targets[i].Name < targets[j].Name })
	data := make([]BackupTarget, 0, len(targets))
	for _, bt := range targets {
		data = append(data, toBackupTarget(base, bt))
	}
	return collection(base, "backupTarget", "backuptargets", data), nil
}

func (s *Server) listBackupTargets(w http.ResponseWriter, r *http.Request) error {
	c, err := s.backupTargetCollection(baseURL(r))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, c)
	return nil
}

func (s *Server) getBackupTarget(w http.ResponseWriter, r *http.Request) error {
	name := mux.Vars(r)["name"]
	bt, err := datastore.CachedOrFresh(r.Context(), name, s.ds.GetBackupTargetRO, s.ds.GetBackupTargetFresh)
	if apierrors.IsNotFound(err) {
		return notFound("backup target %q not found", name)
	}
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, toBackupTarget(baseURL(r), bt))
	return nil
}

// checkURLUnused refuses a URL that keeps its backups where another
// target than name already does (backupstore.TargetLocation: the same
// folder or bucket and prefix, however written), as Longhorn refuses a
// URL another target has: a backup's URL must name one target, whose
// credential opens it, and a second target on the same place would show
// the first one's backups as its own and delete them with its
// BackupVolumes. field names the URL in the error.
func (s *Server) checkURLUnused(field, name, url string) error {
	if url == "" {
		return nil
	}
	targets, err := s.ds.ListTargets()
	if err != nil {
		return err
	}
	for _, t := range targets {
		if t.Name != name && t.URL != "" && backupstore.SameTarget(t.URL, url) {
			return badRequest("%s: %s is backup target %s's already (%s); two targets may not keep their backups in one place", field, url, t.Name, t.URL)
		}
	}
	return nil
}

// checkTargetPlace refuses a URL this manager would not open for where
// it is, before anything is written: a file:// folder outside the roots
// its administrator gave the daemon (backupstore.CheckTarget). field names
// the URL in the error.
func checkTargetPlace(field, url string) error {
	if err := backupstore.CheckTarget(url); err != nil {
		return badRequest("%s: %v", field, err)
	}
	return nil
}

// checkCredentialReadable refuses a credential Secret the caller may not
// get: the manager reads whatever Secret a target names (its namespace
// holds the internal CA's), so naming one needs the caller's own right to
// read it, as k8s/crds/policies/reads-source.yaml asks of kubectl. A name
// left as it was is not asked again.
func (s *Server) checkCredentialReadable(r *http.Request, secret, before string) error {
	if secret == before {
		return nil
	}
	return s.requireAccess(r, fromRights(rights.BackupTargetReads(s.ds.Namespace(), secret))...)
}

// createBackupTarget makes a BackupTarget: volumes, recurring jobs and
// the API's snapshotBackup may then name it (see docs/backups.md).
func (s *Server) createBackupTarget(w http.ResponseWriter, r *http.Request) error {
	var in BackupTargetInput
	if err := decodeBody(w, r, &in); err != nil {
		return err
	}
	if in.Name == "" {
		return badRequest("name: required")
	}
	spec, err := backupTargetSpec(in)
	if err != nil {
		return err
	}
	if err := s.checkCredentialReadable(r, spec.CredentialSecret, ""); err != nil {
		return err
	}
	if err := checkTargetPlace("backupTargetURL", spec.BackupTargetURL); err != nil {
		return err
	}
	if err := s.checkURLUnused("backupTargetURL", in.Name, spec.BackupTargetURL); err != nil {
		return err
	}
	created, err := s.ds.CreateBackupTarget(r.Context(), &longhorn.BackupTarget{ObjectMeta: metav1.ObjectMeta{Name: in.Name}, Spec: spec})
	switch {
	case apierrors.IsAlreadyExists(err):
		return &httpError{http.StatusConflict, "AlreadyExists", "name: backup target " + in.Name + " already exists"}
	case apierrors.IsInvalid(err):
		return badRequest("%v", err)
	case err != nil:
		return err
	}
	writeJSON(w, http.StatusOK, toBackupTarget(baseURL(r), created))
	return nil
}

// updateBackupTarget writes a target's spec (PUT, or Longhorn's
// backupTargetUpdate action). A change of "default" reaches the settings
// through controller/backuptarget.
func (s *Server) updateBackupTarget(w http.ResponseWriter, r *http.Request) error {
	name := mux.Vars(r)["name"]
	var in BackupTargetInput
	if err := decodeBody(w, r, &in); err != nil {
		return err
	}
	if in.Name != "" && in.Name != name {
		return badRequest("name: %q does not match the backup target %q of the path", in.Name, name)
	}
	spec, err := backupTargetSpec(in)
	if err != nil {
		return err
	}
	before := ""
	if bt, err := datastore.CachedOrFresh(r.Context(), name, s.ds.GetBackupTargetRO, s.ds.GetBackupTargetFresh); err == nil {
		before = bt.Spec.CredentialSecret
	}
	if err := s.checkCredentialReadable(r, spec.CredentialSecret, before); err != nil {
		return err
	}
	if err := checkTargetPlace("backupTargetURL", spec.BackupTargetURL); err != nil {
		return err
	}
	if err := s.checkURLUnused("backupTargetURL", name, spec.BackupTargetURL); err != nil {
		return err
	}
	var updated *longhorn.BackupTarget
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		bt, err := s.ds.GetBackupTargetFresh(r.Context(), name)
		if err != nil {
			return err
		}
		bt.Spec = spec
		updated, err = s.ds.UpdateBackupTarget(r.Context(), bt)
		return err
	})
	switch {
	case apierrors.IsNotFound(err):
		return notFound("backup target %q not found", name)
	case apierrors.IsInvalid(err):
		return badRequest("%v", err)
	case err != nil:
		return err
	}
	writeJSON(w, http.StatusOK, toBackupTarget(baseURL(r), updated))
	return nil
}

func (s *Server) backupTargetAction(w http.ResponseWriter, r *http.Request) error {
	switch action := r.URL.Query().Get("action"); action {
	case "backupTargetUpdate":
		return s.updateBackupTarget(w, r)
	case "":
		return &httpError{http.StatusMethodNotAllowed, "MethodNotAllowed", "POST on a backup target needs ?action=..., one of " + strings.Join(backupTargetActions, ", ")}
	default:
		return badRequest("action: %q is not a backup target action; use one of %s", action, strings.Join(backupTargetActions, ", "))
	}
}

// errDeleteDefault: "default" is the target of the backup settings; the
// manager would make it again from them, and Longhorn refuses it too.
var errDeleteDefault = errors.New("name: the default backup target cannot be deleted: backups go to it; set its backupTargetURL (or the backup-target setting) to empty to stop them")

func (s *Server) deleteBackupTarget(w http.ResponseWriter, r *http.Request) error {
	name := mux.Vars(r)["name"]
	if name == defaultBackupTargetName {
		return badRequest("%v", errDeleteDefault)
	}
	err := s.ds.DeleteBackupTarget(r.Context(), name)
	if apierrors.IsNotFound(err) {
		return notFound("backup target %q not found", name)
	}
	if err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}
