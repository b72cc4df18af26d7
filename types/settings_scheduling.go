package types

// Longhorn's settings of replica scheduling (scheduler.Place reads them).
const (
	// SettingNameStorageOverProvisioningPercentage is how far the
	// replicas placed on a disk may exceed its size.
	SettingNameStorageOverProvisioningPercentage SettingName = "storage-over-provisioning-percentage"
	// SettingNameStorageMinimalAvailablePercentage is the free space a
	// disk keeps: below it, no replica is placed on it.
	SettingNameStorageMinimalAvailablePercentage SettingName = "storage-minimal-available-percentage"
	// SettingNameReplicaSoftAntiAffinity lets a volume's replicas share a
	// node when no other node can take one.
	SettingNameReplicaSoftAntiAffinity SettingName = "replica-soft-anti-affinity"
	// SettingNameReplicaZoneSoftAntiAffinity lets them share a zone.
	SettingNameReplicaZoneSoftAntiAffinity SettingName = "replica-zone-soft-anti-affinity"
	// SettingNameReplicaDiskSoftAntiAffinity lets them share a disk.
	SettingNameReplicaDiskSoftAntiAffinity SettingName = "replica-disk-soft-anti-affinity"
)

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
	settingDefinitions[SettingNameStorageMinimalAvailablePercentage] = SettingDefinition{
		DisplayName: "Storage Minimal Available Percentage",
		Description: "A disk whose free space is at or below this percentage of its size takes no new replica: the free space is kept for the replicas it holds to grow into as they are written.",
		Category:    "scheduling",
		Type:        SettingTypeInt,
		Default:     "25",
		Min:         0,
		Max:         100,
	}
	settingDefinitions[SettingNameReplicaSoftAntiAffinity] = SettingDefinition{
		DisplayName: "Replica Node Level Soft Anti-Affinity",
		Description: "When true, a volume's replica may be placed on a node that already holds a healthy replica of the volume when no other node can take it. " +
			"When false (hard anti-affinity), each replica needs a node of its own, and a replica that finds none stays unscheduled: the volume's Scheduled condition says so. " +
			"A volume's replicaSoftAntiAffinity (enabled, disabled) overrides it; ignored follows it.",
		Category: "scheduling",
		Type:     SettingTypeBool,
		Default:  "false",
	}
	settingDefinitions[SettingNameReplicaZoneSoftAntiAffinity] = SettingDefinition{
		DisplayName: "Replica Zone Level Soft Anti-Affinity",
		Description: "When true, a volume's replica may be placed in a zone (the node's topology.kubernetes.io/zone) that already holds a healthy replica of the volume when no other zone can take it. " +
			"When false, each replica needs a zone of its own; nodes without a zone are not bound by it. " +
			"A volume's replicaZoneSoftAntiAffinity (enabled, disabled) overrides it; ignored follows it.",
		Category: "scheduling",
		Type:     SettingTypeBool,
		Default:  "true",
	}
	settingDefinitions[SettingNameReplicaDiskSoftAntiAffinity] = SettingDefinition{
		DisplayName: "Replica Disk Level Soft Anti-Affinity",
		Description: "When true, a volume's replica may be placed on a disk that already holds a healthy replica of the volume when no other disk can take it (which needs the node's soft anti-affinity too). " +
			"When false, each replica needs a disk of its own. " +
			"A volume's replicaDiskSoftAntiAffinity (enabled, disabled) overrides it; ignored follows it.",
		Category: "scheduling",
		Type:     SettingTypeBool,
		Default:  "true",
	}
}
