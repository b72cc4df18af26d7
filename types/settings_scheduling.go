package types

// SettingNameStorageOverProvisioningPercentage is Longhorn's setting of
// how far the replicas placed on a disk may exceed its size.
const SettingNameStorageOverProvisioningPercentage SettingName = "storage-over-provisioning-percentage"

func init() {
	settingDefinitions[SettingNameStorageOverProvisioningPercentage] = SettingDefinition{
		DisplayName: "Storage Over Provisioning Percentage",
		Description: "How much of a disk the replicas placed on it may add up to, in percent of the disk's size less its reserved storage. " +
			"Replicas are thin: a volume takes disk space only as it is written, so 200 lets a disk hold replicas of twice its size. " +
			"A volume whose replicas together, with the replicas a disk already holds, exceed this on every ready disk is refused when it is created.",
		Category: "scheduling",
		Type:     SettingTypeInt,
		Default:  "100",
		Min:      0,
		Max:      100000,
	}
}
