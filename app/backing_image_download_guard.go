package app

import (
	"fmt"

	"github.com/cadence-storage/longhorn-manager/backingimage/runner"
	"github.com/cadence-storage/longhorn-manager/datastore"
	"github.com/cadence-storage/longhorn-manager/internal/netguard"
	"github.com/cadence-storage/longhorn-manager/types"
)

// EnvDownloadAllowedRanges is the environment form of the data source's
// --download-allowed-ranges.
const EnvDownloadAllowedRanges = "BACKING_IMAGE_DOWNLOAD_ALLOWED_RANGES"

// downloadGuardRunner passes the backing-image-download-allowed-ranges
// setting to each data source it starts, read when it starts.
type downloadGuardRunner struct {
	runner.ServerRunner
	ds *datastore.DataStore
}

// guardDownloads wraps the runner of the data sources.
func guardDownloads(r runner.ServerRunner, ds *datastore.DataStore) runner.ServerRunner {
	return downloadGuardRunner{ServerRunner: r, ds: ds}
}

func (r downloadGuardRunner) Start(key string, args []string, opts ...runner.ServerOption) error {
	if len(args) > 0 && args[0] == "backing-image-data-source" {
		ranges, err := r.ds.GetSettingValue(types.SettingNameBackingImageDownloadAllowedRanges)
		if err != nil {
			return fmt.Errorf("read the %s setting: %w", types.SettingNameBackingImageDownloadAllowedRanges, err)
		}
		if ranges != "" {
			args = append(append([]string(nil), args...), "--download-allowed-ranges", ranges)
		}
	}
	return r.ServerRunner.Start(key, args, opts...)
}

// downloadGuard builds the data source's guard from its flags.
func downloadGuard(allowed, denied string) (*netguard.Guard, error) {
	allow, err := netguard.ParsePrefixes(allowed)
	if err != nil {
		return nil, fmt.Errorf("--download-allowed-ranges: %w", err)
	}
	deny, err := netguard.ParsePrefixes(denied)
	if err != nil {
		return nil, fmt.Errorf("--download-denied-ranges: %w", err)
	}
	return netguard.New(netguard.Options{Allow: allow, Deny: deny}), nil
}
