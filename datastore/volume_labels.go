package datastore

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"

	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	"github.com/cadence-storage/longhorn-manager/types"
)

// RecurringJobSelectorItem names a job, or a group of jobs, that a volume
// runs; it is how the API, VolumeManager and StorageClasses speak of a
// volume's job and group labels.
type RecurringJobSelectorItem struct {
	Name    string `json:"name"`
	IsGroup bool   `json:"isGroup"`
}

// LabelKey is the volume label that selects the item.
func (s RecurringJobSelectorItem) LabelKey() string {
	if s.IsGroup {
		return types.RecurringJobGroupLabelKey(s.Name)
	}
	return types.RecurringJobLabelKey(s.Name)
}

// FixupRecurringJobLabels applies the default-group rule to a volume's
// labels and reports whether it changed them: a volume that selects no job
// and no group gets recurring-job-group.longhorn.io/default: enabled, and
// loses it as soon as it selects anything else; a drill's scratch volume
// (types.LabelBackupVerifyScratch) never has it. labels may be nil; the
// result is a new map when something changed.
func FixupRecurringJobLabels(labels map[string]string) (map[string]string, bool) {
	defaultKey := types.RecurringJobGroupLabelKey(types.RecurringJobGroupDefault)
	_, hasDefault := labels[defaultKey]
	if types.IsBackupVerifyScratch(labels) {
		// A drill's scratch volume is no user's: no job runs on it.
		if !hasDefault {
			return labels, false
		}
		out := copyLabels(labels)
		delete(out, defaultKey)
		return out, true
	}
	hasOther := false
	for key := range labels {
		if key != defaultKey && types.IsRecurringJobSelectionLabel(key) {
			hasOther = true
			break
		}
	}
	switch {
	case !hasOther && !hasDefault:
		out := copyLabels(labels)
		out[defaultKey] = types.LabelValueEnabled
		return out, true
	case hasOther && hasDefault:
		out := copyLabels(labels)
		delete(out, defaultKey)
		return out, true
	}
	return labels, false
}

// RecurringJobSelector lists the jobs and groups a volume's labels select,
// sorted by name, a job before a group of the same name.
func RecurringJobSelector(labels map[string]string) []RecurringJobSelectorItem {
	var out []RecurringJobSelectorItem
	for key, value := range labels {
		if value != types.LabelValueEnabled || !types.IsRecurringJobSelectionLabel(key) {
			continue
		}
		switch {
		case strings.HasPrefix(key, types.RecurringJobLabelPrefix):
			out = append(out, RecurringJobSelectorItem{Name: strings.TrimPrefix(key, types.RecurringJobLabelPrefix)})
		case strings.HasPrefix(key, types.RecurringJobGroupLabelPrefix):
			out = append(out, RecurringJobSelectorItem{Name: strings.TrimPrefix(key, types.RecurringJobGroupLabelPrefix), IsGroup: true})
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Name != out[j].Name {
			return out[i].Name < out[j].Name
		}
		return !out[i].IsGroup && out[j].IsGroup
	})
	return out
}

// ParseRecurringJobSelector reads the recurringJobSelector parameter of a
// StorageClass: a JSON list of {"name": ..., "isGroup": ...}.
func ParseRecurringJobSelector(param string) ([]RecurringJobSelectorItem, error) {
	if strings.TrimSpace(param) == "" {
		return nil, nil
	}
	var items []RecurringJobSelectorItem
	dec := json.NewDecoder(strings.NewReader(param))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&items); err != nil {
		return nil, fmt.Errorf("recurringJobSelector: must be a JSON list of {\"name\": string, \"isGroup\": bool}: %v", err)
	}
	if dec.More() {
		return nil, fmt.Errorf("recurringJobSelector: unexpected data after the JSON list")
	}
	for i, item := range items {
		if item.Name == "" {
			return nil, fmt.Errorf("recurringJobSelector[%d].name: must not be empty", i)
		}
		if err := ValidateSelectorItemName(item); err != nil {
			return nil, fmt.Errorf("recurringJobSelector[%d].name: %v", i, err)
		}
	}
	return items, nil
}

// ValidateSelectorItemName checks that the item's name can be part of its
// volume label.
func ValidateSelectorItemName(item RecurringJobSelectorItem) error {
	if item.Name == "" {
		return fmt.Errorf("name must not be empty")
	}
	if msgs := validation.IsQualifiedName(item.LabelKey()); len(msgs) > 0 {
		return fmt.Errorf("%q cannot be used in the label %s: %s", item.Name, item.LabelKey(), strings.Join(msgs, "; "))
	}
	return nil
}

// SelectorLabels turns a selector into volume labels.
func SelectorLabels(items []RecurringJobSelectorItem) map[string]string {
	out := make(map[string]string, len(items))
	for _, item := range items {
		out[item.LabelKey()] = types.LabelValueEnabled
	}
	return out
}

func copyLabels(in map[string]string) map[string]string {
	out := make(map[string]string, len(in)+1)
	for k, v := range in {
		out[k] = v
	}
	return out
}

// IsDrillScratchVolume reports whether v is a full drill's scratch volume
// as the backup verify controller makes one: labelled
// types.LabelBackupVerifyScratch and owned by a Backup. The label alone
// does not make one (a user may put any label on a volume of theirs):
// what deletes scratch volumes asks this.
func IsDrillScratchVolume(v *longhorn.Volume) bool {
	if !types.IsBackupVerifyScratch(v.Labels) {
		return false
	}
	for _, ref := range v.OwnerReferences {
		if ref.Kind == "Backup" && ref.APIVersion == longhorn.SchemeGroupVersion.String() && ref.UID != "" {
			return true
		}
	}
	return false
}
