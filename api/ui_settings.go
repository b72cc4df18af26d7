package api

import (
	"net/http"
	"sort"
)

// fixedSettings are settings of Longhorn's that its UI reads and the
// project has no choice for: they are shown read-only with the one value
// the project has. Without v1-data-engine the UI's volume form defaults to
// the v2 engine and refuses v1.
var fixedSettings = []struct {
	name, value, displayName, description string
}{
	{"v1-data-engine", "true", "V1 Data Engine", "The v1 data engine is the only data engine here: it is always on."},
	{"v2-data-engine", "false", "V2 Data Engine", "The v2 (SPDK) data engine does not exist here: it is always off."},
}

func fixedSetting(base, name string) (Setting, bool) {
	for _, f := range fixedSettings {
		if f.name == name {
			return Setting{
				Resource: resource(base, "setting", "settings", f.name), Name: f.name, Value: f.value, Applied: true,
				Definition: SettingDefinition{DisplayName: f.displayName, Description: f.description, Category: "general",
					Type: "bool", Default: f.value, ReadOnly: true},
			}, true
		}
	}
	return Setting{}, false
}

// withFixedSettings adds the fixed settings to a list, sorted by name.
func withFixedSettings(base string, data []Setting) []Setting {
	for _, f := range fixedSettings {
		st, _ := fixedSetting(base, f.name)
		data = append(data, st)
	}
	sort.Slice(data, func(i, j int) bool { return data[i].Name < data[j].Name })
	return data
}

// fixedSettingRequest answers GET and PUT of a fixed setting; handled is
// false for every other name.
func fixedSettingRequest(w http.ResponseWriter, r *http.Request, name string) (handled bool, err error) {
	st, ok := fixedSetting(baseURL(r), name)
	if !ok {
		return false, nil
	}
	if r.Method == http.MethodPut {
		var in SettingInput
		if err := decodeBody(w, r, &in); err != nil {
			return true, err
		}
		if in.Value != st.Value {
			return true, badRequest("value: setting %s is read-only here: %s", name, st.Definition.Description)
		}
	}
	writeJSON(w, http.StatusOK, st)
	return true, nil
}
