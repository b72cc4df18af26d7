package backuptarget

import (
	"github.com/cadence-storage/longhorn-manager/datastore"
	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	"github.com/cadence-storage/longhorn-manager/types"
)

// agreement is what default and the settings last both held; nil when
// there is no record.
type agreement = map[types.SettingName]string

// setting is one setting as the cache holds it.
type setting struct {
	value  string
	exists bool
}

// plan is what one sync writes: spec fields taken from the settings,
// settings taken from the spec, and the new agreement. refused are spec
// fields changed to a value their setting's rule refuses: neither side is
// written for them.
type plan struct {
	spec     map[types.SettingName]string
	settings map[types.SettingName]string
	agreed   agreement
	refused  []error
}

// decide compares each field of default's spec with its setting and with
// what both last held:
//
//   - equal: nothing to copy; the agreement records the value.
//   - only the setting changed, or both did, or there is no record (a
//     target made or replaced by hand): the setting is copied into the
//     spec, since the settings are what backups use now. An invalid
//     setting is not copied (the setting controller reports it).
//   - only the spec changed: it is copied into the setting when the
//     setting's rule takes it, and refused, naming the field, otherwise.
//   - a setting that does not exist: that field is left as it is.
func decide(settings map[types.SettingName]setting, spec longhorn.BackupTargetSpec, agreed agreement) plan {
	p := plan{spec: map[types.SettingName]string{}, settings: map[types.SettingName]string{}, agreed: agreement{}}
	for _, f := range datastore.BackupTargetFields {
		s := settings[f.Setting]
		t := datastore.BackupTargetSpecValue(spec, f.Setting)
		last, recorded := agreed[f.Setting]
		switch {
		case !s.exists:
			if recorded {
				p.agreed[f.Setting] = last
			}
		case s.value == t:
			p.agreed[f.Setting] = t
		case recorded && s.value == last:
			if err := datastore.ValidateBackupTargetField(spec, f); err != nil {
				p.refused = append(p.refused, err)
				p.agreed[f.Setting] = last
				continue
			}
			p.settings[f.Setting] = t
			p.agreed[f.Setting] = t
		default:
			if types.ValidateSetting(f.Setting, s.value) != nil {
				if recorded {
					p.agreed[f.Setting] = last
				}
				continue
			}
			p.spec[f.Setting] = s.value
			p.agreed[f.Setting] = s.value
		}
	}
	return p
}
