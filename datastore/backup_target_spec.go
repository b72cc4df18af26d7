package datastore

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	"github.com/cadence-storage/longhorn-manager/types"
)

// BackupTargetField is one field of a BackupTarget's spec and the setting
// the "default" target keeps it in step with.
type BackupTargetField struct {
	Setting types.SettingName
	// Path names the field in errors, as kubectl shows it.
	Path string
}

// BackupTargetFields are the spec fields mirrored by settings, in the
// spec's order.
var BackupTargetFields = []BackupTargetField{
	{Setting: types.SettingNameBackupTarget, Path: "spec.backupTargetURL"},
	{Setting: types.SettingNameBackupTargetCredentialSecret, Path: "spec.credentialSecret"},
	{Setting: types.SettingNameBackupstorePollInterval, Path: "spec.pollInterval"},
}

// BackupTargetSpecValue is the spec's field that mirrors setting, in the
// setting's form: the poll interval in whole seconds (a fraction of a
// second is dropped, as the setting counts seconds).
func BackupTargetSpecValue(spec longhorn.BackupTargetSpec, setting types.SettingName) string {
	switch setting {
	case types.SettingNameBackupTarget:
		return spec.BackupTargetURL
	case types.SettingNameBackupTargetCredentialSecret:
		return spec.CredentialSecret
	case types.SettingNameBackupstorePollInterval:
		return strconv.FormatInt(int64(spec.PollInterval.Duration/time.Second), 10)
	}
	return ""
}

// SetBackupTargetSpecValue sets the spec's field that mirrors setting
// from the setting's value, which must be valid.
func SetBackupTargetSpecValue(spec *longhorn.BackupTargetSpec, setting types.SettingName, value string) error {
	switch setting {
	case types.SettingNameBackupTarget:
		spec.BackupTargetURL = value
	case types.SettingNameBackupTargetCredentialSecret:
		spec.CredentialSecret = value
	case types.SettingNameBackupstorePollInterval:
		secs, err := strconv.ParseInt(value, 10, 64)
		if err != nil {
			return fmt.Errorf("setting %s: value %q must be a whole number of seconds", setting, value)
		}
		spec.PollInterval = metav1.Duration{Duration: time.Duration(secs) * time.Second}
	default:
		return fmt.Errorf("setting %s is not a backup target's", setting)
	}
	return nil
}

// ValidateBackupTargetField checks one spec field by its setting's rule,
// naming the field: what the apiserver's CEL rules cannot check (an s3://
// URL's bucket and region, a Secret's name).
func ValidateBackupTargetField(spec longhorn.BackupTargetSpec, f BackupTargetField) error {
	if f.Setting == types.SettingNameBackupstorePollInterval && spec.PollInterval.Duration < 0 {
		return fmt.Errorf("%s: %s must not be negative", f.Path, spec.PollInterval.Duration)
	}
	if err := types.ValidateSetting(f.Setting, BackupTargetSpecValue(spec, f.Setting)); err != nil {
		return fmt.Errorf("%s: %w", f.Path, err)
	}
	return nil
}

// ValidateBackupTargetSpec checks every field of a BackupTarget's spec,
// each by the rule of the setting it mirrors.
func ValidateBackupTargetSpec(spec longhorn.BackupTargetSpec) error {
	var errs []error
	for _, f := range BackupTargetFields {
		errs = append(errs, ValidateBackupTargetField(spec, f))
	}
	return errors.Join(errs...)
}

// AnnotationBackupTargetAgreed records on "default" the values it and the
// settings last both held, in the settings' form (JSON, setting name to
// value): what tells which side changed since (controller/backuptarget).
const AnnotationBackupTargetAgreed = "longhorn.io/backup-target-settings-agreed"

// EncodeBackupTargetAgreement is the annotation's value for values.
func EncodeBackupTargetAgreement(values map[types.SettingName]string) string {
	b, _ := json.Marshal(values) // map keys are sorted: one encoding per record
	return string(b)
}

// DecodeBackupTargetAgreement reads the annotation of bt; nil when it has
// none or one that is not a record (edited by hand).
func DecodeBackupTargetAgreement(bt *longhorn.BackupTarget) map[types.SettingName]string {
	raw, ok := bt.Annotations[AnnotationBackupTargetAgreed]
	if !ok {
		return nil
	}
	var a map[types.SettingName]string
	if json.Unmarshal([]byte(raw), &a) != nil {
		return nil
	}
	return a
}

// NewDefaultBackupTarget is "default" as the settings' values make it
// (each valid; a missing or invalid setting gives its default), recorded
// as agreed with them.
func NewDefaultBackupTarget(values map[types.SettingName]string) (*longhorn.BackupTarget, error) {
	bt := &longhorn.BackupTarget{ObjectMeta: metav1.ObjectMeta{Name: DefaultBackupTargetName}}
	agreed := map[types.SettingName]string{}
	for _, f := range BackupTargetFields {
		v := values[f.Setting]
		if err := SetBackupTargetSpecValue(&bt.Spec, f.Setting, v); err != nil {
			return nil, err
		}
		agreed[f.Setting] = v
	}
	bt.Annotations = map[string]string{AnnotationBackupTargetAgreed: EncodeBackupTargetAgreement(agreed)}
	return bt, nil
}

// BackupTargetSettingValues reads the settings "default" mirrors from
// the cache, each valid or its default.
func (ds *DataStore) BackupTargetSettingValues() (map[types.SettingName]string, error) {
	values := map[types.SettingName]string{}
	for _, f := range BackupTargetFields {
		v, err := ds.GetSettingValue(f.Setting)
		if err != nil {
			return nil, err
		}
		values[f.Setting] = v
	}
	return values, nil
}
