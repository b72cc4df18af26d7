package systembackup

import (
	"fmt"

	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
)

// ParsePolicy checks a volume backup policy; empty is if-not-present,
// Longhorn's default.
func ParsePolicy(p string) (longhorn.SystemBackupCreateVolumeBackupPolicy, error) {
	switch longhorn.SystemBackupCreateVolumeBackupPolicy(p) {
	case "", longhorn.SystemBackupCreateVolumeBackupPolicyIfNotPresent:
		return longhorn.SystemBackupCreateVolumeBackupPolicyIfNotPresent, nil
	case longhorn.SystemBackupCreateVolumeBackupPolicyAlways:
		return longhorn.SystemBackupCreateVolumeBackupPolicyAlways, nil
	case longhorn.SystemBackupCreateVolumeBackupPolicyDisabled:
		return longhorn.SystemBackupCreateVolumeBackupPolicyDisabled, nil
	}
	return "", fmt.Errorf("volumeBackupPolicy %q: must be if-not-present, always or disabled", p)
}
