package types

import "github.com/cadence-storage/longhorn-manager/internal/netguard"

// SettingNameBackingImageDownloadAllowedRanges lets backing image
// downloads reach addresses refused by default.
const SettingNameBackingImageDownloadAllowedRanges SettingName = "backing-image-download-allowed-ranges"

// SettingNameBackingImageDownloadDeniedRanges are more ranges backing
// image downloads may not reach, besides the cluster's own pod and
// service ranges, which are always denied.
const SettingNameBackingImageDownloadDeniedRanges SettingName = "backing-image-download-denied-ranges"

func init() {
	settingDefinitions[SettingNameBackingImageDownloadAllowedRanges] = SettingDefinition{
		DisplayName: "Backing Image Download Allowed Ranges",
		Description: "IP ranges a backing image download may reach besides public addresses, separated by commas: CIDR ranges such as 10.20.0.0/16 or single addresses. " +
			"By default a download may not reach loopback, link-local (including the cloud metadata service at 169.254.169.254), private (10/8, 172.16/12, 192.168/16, fc00::/7) " +
			"or shared (100.64/10) addresses, where the cluster's pods and services live; the address actually connected to is checked, after DNS and on every redirect. " +
			"Applies to data sources started after the change. Empty means none.",
		Category: "general",
		Type:     SettingTypeString,
		Default:  "",
		Check:    checkRanges,
	}
	settingDefinitions[SettingNameBackingImageDownloadDeniedRanges] = SettingDefinition{
		DisplayName: "Backing Image Download Denied Ranges",
		Description: "More IP ranges a backing image download may not reach, separated by commas: CIDR ranges or single addresses, such as public ranges of the cluster's network that the cluster's API does not list. " +
			"The cluster's own pod ranges (each node's podCIDRs) and service ranges (its ServiceCIDRs) are always denied, public or not. " +
			"A denied range wins over an allowed one. Applies to data sources started after the change. Empty means none.",
		Category: "general",
		Type:     SettingTypeString,
		Default:  "",
		Check:    checkRanges,
	}
}

// checkRanges accepts a comma-separated list of CIDR ranges or addresses.
func checkRanges(v string) error {
	_, err := netguard.ParsePrefixes(v)
	return err
}
