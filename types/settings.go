package types

import (
	"fmt"
	"math"
	"net/url"
	"sort"
	"strconv"
)

// SettingName is the name of a manager setting; each is one Setting object.
type SettingName string

const (
	SettingNameAllowRecurringJobWhileVolumeDetached SettingName = "allow-recurring-job-while-volume-detached"
	SettingNameRecurringSuccessfulJobsHistoryLimit  SettingName = "recurring-successful-jobs-history-limit"
	SettingNameRecurringFailedJobsHistoryLimit      SettingName = "recurring-failed-jobs-history-limit"
	SettingNameRecurringJobMaxRetention             SettingName = "recurring-job-max-retention"
	SettingNameBackupTarget                         SettingName = "backup-target"
	SettingNameBackupTargetCredentialSecret         SettingName = "backup-target-credential-secret"
	SettingNameBackupCompressionMethod              SettingName = "backup-compression-method"
	SettingNameBackupConcurrentLimit                SettingName = "backup-concurrent-limit"
	SettingNameBackupstorePollInterval              SettingName = "backupstore-poll-interval"
	SettingNameBackingImageCleanupWaitInterval      SettingName = "backing-image-cleanup-wait-interval"
	SettingNameTaintToleration                      SettingName = "taint-toleration"
	SettingNameSystemManagedComponentsNodeSelector  SettingName = "system-managed-components-node-selector"
	SettingNamePriorityClass                        SettingName = "priority-class"
	SettingNameRegistrySecret                       SettingName = "registry-secret"
	SettingNameFreezeFilesystemForSnapshot          SettingName = "freeze-filesystem-for-snapshot"
)

// SettingType is the kind of value a setting holds.
type SettingType string

const (
	SettingTypeBool   SettingType = "bool"
	SettingTypeInt    SettingType = "int"
	SettingTypeString SettingType = "string"
)

// SettingDefinition describes one setting: its meaning, its default and the
// rule its value must follow.
type SettingDefinition struct {
	DisplayName string
	Description string
	Category    string
	Type        SettingType
	Default     string
	// Min and Max bound int settings.
	Min, Max int
	// Check validates string settings beyond their type; nil accepts any.
	Check func(value string) error
}

// settingDefinitions is the one place that knows every setting.
var settingDefinitions = map[SettingName]SettingDefinition{
	SettingNameAllowRecurringJobWhileVolumeDetached: {
		DisplayName: "Allow Recurring Job While Volume Is Detached",
		Description: "Let recurring jobs attach a detached volume, run, and detach it again. When false, detached volumes are skipped.",
		Category:    "general",
		Type:        SettingTypeBool,
		Default:     "false",
	},
	SettingNameRecurringSuccessfulJobsHistoryLimit: {
		DisplayName: "Cronjob Successful Jobs History Limit",
		Description: "How many successful recurring-job runs (Jobs) each CronJob keeps. 0 keeps none.",
		Category:    "backup",
		Type:        SettingTypeInt,
		Default:     "1",
		Min:         0,
		Max:         100,
	},
	SettingNameRecurringFailedJobsHistoryLimit: {
		DisplayName: "Cronjob Failed Jobs History Limit",
		Description: "How many failed recurring-job runs (Jobs) each CronJob keeps. 0 keeps none.",
		Category:    "backup",
		Type:        SettingTypeInt,
		Default:     "1",
		Min:         0,
		Max:         100,
	},
	SettingNameRecurringJobMaxRetention: {
		DisplayName: "Maximum Retention Number for Recurring Job",
		Description: "The largest retain a recurring job may ask for.",
		Category:    "backup",
		Type:        SettingTypeInt,
		Default:     "100",
		Min:         1,
		Max:         250,
	},
	SettingNameBackupTarget: {
		DisplayName: "Backup Target",
		Description: "Where backups are stored, as a URL: s3://bucket@region/path, nfs://server:/path, cifs://server/share, azblob://container@endpoint/path, or file:///path (a folder inside those the daemon's --backup-target-file-roots lists; none by default). Empty disables backups.",
		Category:    "backup",
		Type:        SettingTypeString,
		Default:     "",
		Check:       checkBackupTarget,
	},
	SettingNameBackupTargetCredentialSecret: {
		DisplayName: "Backup Target Credential Secret",
		Description: "The Secret, in the manager's namespace, holding the credential of the backup target: for s3://, AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, and optionally AWS_ENDPOINTS (the URL of an S3-compatible server; AWS when empty), AWS_CERT (a PEM CA bundle for that server) and VIRTUAL_HOSTED_STYLE (true for virtual-hosted-style requests; path style otherwise). Empty means none: file:// needs none, and s3:// on AWS then uses the node's instance role.",
		Category:    "backup",
		Type:        SettingTypeString,
		Default:     "",
		Check:       checkObjectName("Secret"),
	},
	SettingNameBackupCompressionMethod: {
		DisplayName: "Backup Compression Method",
		Description: "How backup blocks are compressed: lz4 (fast, the default), gzip (smaller, slower) or none. A change applies to the next backup of each volume, which is then full.",
		Category:    "backup",
		Type:        SettingTypeString,
		Default:     "lz4",
		Check: func(v string) error {
			switch v {
			case "lz4", "gzip", "none":
				return nil
			}
			return fmt.Errorf("%q must be lz4, gzip or none", v)
		},
	},
	SettingNameBackupConcurrentLimit: {
		DisplayName: "Backup Concurrent Limit Per Backup",
		Description: "How many blocks of one backup are compressed and uploaded at once. More helps a remote target with high latency; each worker holds two 2 MiB buffers.",
		Category:    "backup",
		Type:        SettingTypeInt,
		Default:     "2",
		Min:         1,
		Max:         64,
	},
	SettingNameBackupstorePollInterval: {
		DisplayName: "Backupstore Poll Interval",
		Description: "Seconds between two reads of the whole backup target, which bring in what other clusters or hands wrote to it. 0 turns polling off. Backups and deletions this manager runs refresh their own volume whatever the value.",
		Category:    "backup",
		Type:        SettingTypeInt,
		Default:     "300",
		Min:         0,
		Max:         math.MaxInt32,
	},
	SettingNameBackingImageCleanupWaitInterval: {
		DisplayName: "Backing Image Cleanup Wait Interval",
		Description: "Minutes a backing image's file on a disk stays after the last replica on that disk stopped using it; then the disk is taken out of the image's disks and its file deleted, keeping the image's minNumberOfCopies ready copies.",
		Category:    "general",
		Type:        SettingTypeInt,
		Default:     "60",
		Min:         1,
		Max:         60 * 24 * 30,
	},
	SettingNameTaintToleration: {
		DisplayName: "Kubernetes Taint Toleration",
		Description: "Tolerations of the pods the manager creates (recurring job CronJobs, backing image servers), separated by ';': key=value:effect, key:effect (any value) or :effect (every key), the effect NoSchedule, PreferNoSchedule or NoExecute; keys must not contain kubernetes.io. Example: key1=value1:NoSchedule; key2:NoExecute. Empty means none.",
		Category:    "general",
		Type:        SettingTypeString,
		Default:     "",
		Check:       checkTaintToleration,
	},
	SettingNameSystemManagedComponentsNodeSelector: {
		DisplayName: "System Managed Components Node Selector",
		Description: "Node selector of the pods the manager creates, separated by ';': label-key1:label-value1;label-key2:label-value2. Empty means none.",
		Category:    "general",
		Type:        SettingTypeString,
		Default:     "",
		Check:       checkNodeSelector,
	},
	SettingNamePriorityClass: {
		DisplayName: "Priority Class",
		Description: "The PriorityClass of the pods the manager creates. Empty means none.",
		Category:    "general",
		Type:        SettingTypeString,
		Default:     "",
		Check:       checkObjectName("PriorityClass"),
	},
	SettingNameRegistrySecret: {
		DisplayName: "Registry Secret",
		Description: "The Secret, in the manager's namespace, the pods the manager creates pull their image with. Empty means none.",
		Category:    "general",
		Type:        SettingTypeString,
		Default:     "",
		Check:       checkObjectName("Secret"),
	},
	SettingNameFreezeFilesystemForSnapshot: {
		DisplayName: "Freeze Filesystem For Snapshot",
		Description: "Whether a snapshot of a volume whose filesystem a pod mounts freezes the filesystem for the snapshot's instant (FIFREEZE, as fsfreeze does: its dirty data and journal reach the volume, writes wait, at most 30 s), so that the snapshot, and a backup of it, is filesystem-consistent. A volume's freezeFilesystemForSnapshot (enabled, disabled) overrides it; ignored follows it. A snapshot whose filesystem cannot be frozen fails, saying why.",
		Category:    "snapshot",
		Type:        SettingTypeBool,
		Default:     "false",
	},
}

// SettingNames lists every setting, sorted.
func SettingNames() []SettingName {
	names := make([]SettingName, 0, len(settingDefinitions))
	for name := range settingDefinitions {
		names = append(names, name)
	}
	sort.Slice(names, func(i, j int) bool { return names[i] < names[j] })
	return names
}

// GetSettingDefinition returns the definition of a setting.
func GetSettingDefinition(name SettingName) (SettingDefinition, bool) {
	def, ok := settingDefinitions[name]
	return def, ok
}

// ValidateSetting checks value against the setting's definition and says
// which rule it breaks.
func ValidateSetting(name SettingName, value string) error {
	def, ok := settingDefinitions[name]
	if !ok {
		return fmt.Errorf("setting %q: unknown setting", name)
	}
	switch def.Type {
	case SettingTypeBool:
		if _, err := strconv.ParseBool(value); err != nil {
			return fmt.Errorf("setting %s: value %q must be true or false", name, value)
		}
	case SettingTypeInt:
		n, err := strconv.Atoi(value)
		if err != nil {
			return fmt.Errorf("setting %s: value %q must be a whole number", name, value)
		}
		if n < def.Min || n > def.Max {
			return fmt.Errorf("setting %s: value %d must be between %d and %d", name, n, def.Min, def.Max)
		}
	}
	if def.Check != nil {
		if err := def.Check(value); err != nil {
			return fmt.Errorf("setting %s: %w", name, err)
		}
	}
	return nil
}

var backupTargetSchemes = map[string]bool{"s3": true, "nfs": true, "cifs": true, "azblob": true, "file": true}

func checkBackupTarget(value string) error {
	if value == "" {
		return nil
	}
	u, err := url.Parse(value)
	if err != nil {
		return fmt.Errorf("value %q is not a URL: %v", value, err)
	}
	if !backupTargetSchemes[u.Scheme] {
		return fmt.Errorf("value %q must start with s3://, nfs://, cifs://, azblob:// or file://", value)
	}
	if u.Scheme == "file" && u.Path == "" {
		return fmt.Errorf("value %q must name an absolute path after file://", value)
	}
	if u.Scheme == "s3" && (u.User == nil || u.User.Username() == "" || u.Host == "") {
		return fmt.Errorf("value %q must be s3://<bucket>@<region>/<path>, for example s3://backups@us-east-1/", value)
	}
	return nil
}
