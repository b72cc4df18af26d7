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
	// SettingNameConcurrentReplicaRebuildPerNodeLimit bounds the rebuilds
	// into replicas of one node at once; 0 rebuilds none.
	SettingNameConcurrentReplicaRebuildPerNodeLimit SettingName = "concurrent-replica-rebuild-per-node-limit"
	// SettingNameReplicaReplenishmentWaitInterval is how long a failed
	// replica of a node that is down is waited for before another takes
	// its place.
	SettingNameReplicaReplenishmentWaitInterval SettingName = "replica-replenishment-wait-interval"
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
	settingDefinitions[SettingNameConcurrentReplicaRebuildPerNodeLimit] = SettingDefinition{
		DisplayName: "Concurrent Replica Rebuild Per Node Limit",
		Description: "How many replicas of one node may be rebuilt at once (each from a healthy replica of its volume, while the volume is in use). 0 rebuilds none: a volume that lost a replica stays degraded.",
		Category:    "general",
		Type:        SettingTypeInt,
		Default:     "5",
		Min:         0,
		Max:         100,
	}
	settingDefinitions[SettingNameReplicaReplenishmentWaitInterval] = SettingDefinition{
		DisplayName: "Replica Replenishment Wait Interval",
		Description: "Seconds a volume that lost a replica waits, while that replica's node is down, before another replica is placed and rebuilt in its place: a node that comes back soon saves the copy. A replica that failed on a node that is up is replaced at once.",
		Category:    "general",
		Type:        SettingTypeInt,
		Default:     "600",
		Min:         0,
		Max:         86400,
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
