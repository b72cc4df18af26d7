package api

import (
	"net/http"
	"sort"

	"github.com/gorilla/mux"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/cadence-storage/longhorn-manager/datastore"
	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	"github.com/cadence-storage/longhorn-manager/types"
)

func (s *Server) listSettings(w http.ResponseWriter, r *http.Request) error {
	settings, err := s.ds.ListSettingsRO()
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, s.settingCollection(baseURL(r), settings))
	return nil
}

// settingCollection lists the settings the manager knows, sorted by name.
func (s *Server) settingCollection(base string, settings []*longhorn.Setting) Collection {
	sort.Slice(settings, func(i, j int) bool { return settings[i].Name < settings[j].Name })
	data := make([]Setting, 0, len(settings))
	for _, st := range settings {
		if _, known := types.GetSettingDefinition(types.SettingName(st.Name)); known {
			data = append(data, toSetting(base, types.SettingName(st.Name), st.Value, st.Status.Applied))
		}
	}
	return collection(base, "setting", "settings", withFixedSettings(base, data))
}

func knownSetting(name string) (types.SettingName, error) {
	if _, ok := types.GetSettingDefinition(types.SettingName(name)); !ok {
		return "", notFound("setting %q not found", name)
	}
	return types.SettingName(name), nil
}

func (s *Server) getSetting(w http.ResponseWriter, r *http.Request) error {
	if handled, err := fixedSettingRequest(w, r, mux.Vars(r)["name"]); handled {
		return err
	}
	name, err := knownSetting(mux.Vars(r)["name"])
	if err != nil {
		return err
	}
	st, err := s.ds.GetSettingRO(name)
	if apierrors.IsNotFound(err) {
		return notFound("setting %q not found", name)
	}
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, toSetting(baseURL(r), name, st.Value, st.Status.Applied))
	return nil
}

func (s *Server) updateSetting(w http.ResponseWriter, r *http.Request) error {
	if handled, err := fixedSettingRequest(w, r, mux.Vars(r)["name"]); handled {
		return err
	}
	name, err := knownSetting(mux.Vars(r)["name"])
	if err != nil {
		return err
	}
	var in SettingInput
	if err := decodeBody(w, r, &in); err != nil {
		return err
	}
	if err := types.ValidateSetting(name, in.Value); err != nil {
		return badRequest("value: %v", err)
	}
	if name == types.SettingNameBackupTargetCredentialSecret {
		before := ""
		if st, err := s.ds.GetSettingRO(name); err == nil {
			before = st.Value
		}
		if err := s.checkCredentialReadable(r, in.Value, before); err != nil {
			return err
		}
	}
	if name == types.SettingNameBackupTarget {
		// The setting is default's URL: refused where another target
		// keeps its backups, and outside this manager's file:// roots, as
		// a BackupTarget's URL is.
		if err := checkTargetPlace("value", in.Value); err != nil {
			return err
		}
		if err := s.checkURLUnused("value", defaultBackupTargetName, in.Value); err != nil {
			return err
		}
	}
	var result *longhorn.Setting
	err = datastore.RetryOnConflict(func() error {
		st, err := s.ds.GetSettingFresh(r.Context(), name)
		if apierrors.IsNotFound(err) {
			return notFound("setting %q not found", name)
		}
		if err != nil {
			return err
		}
		if st.Value == in.Value {
			result = st
			return nil
		}
		st.Value = in.Value
		result, err = s.ds.UpdateSetting(r.Context(), st)
		return err
	})
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, toSetting(baseURL(r), name, result.Value, result.Status.Applied))
	return nil
}
