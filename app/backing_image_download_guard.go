package app

import (
	"context"
	"fmt"
	"net/netip"
	"strings"
	"time"

	"github.com/cadence-storage/longhorn-manager/backingimage/runner"
	"github.com/cadence-storage/longhorn-manager/datastore"
	"github.com/cadence-storage/longhorn-manager/internal/netguard"
	"github.com/cadence-storage/longhorn-manager/types"
)

// EnvDownloadAllowedRanges is the environment form of the data source's
// --download-allowed-ranges.
const EnvDownloadAllowedRanges = "BACKING_IMAGE_DOWNLOAD_ALLOWED_RANGES"

// downloadGuardRunner passes each data source it starts the ranges its
// downloads may and may not reach, read when it starts: the
// backing-image-download-allowed-ranges setting, and as denied the
// backing-image-download-denied-ranges setting with the cluster's own pod
// and service ranges (denied whether public or private), and the nodes'
// own addresses (refused unless allowed alone). A data source whose
// denied ranges cannot be read is not started (the error is its data
// source's, retried).
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
		args = append([]string(nil), args...)
		if ranges != "" {
			args = append(args, "--download-allowed-ranges", ranges)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		cluster, err := r.ds.ClusterNetwork(ctx)
		cancel()
		if err != nil {
			return fmt.Errorf("the cluster's pod and service ranges and node addresses, which downloads may not reach: %w", err)
		}
		denied, err := r.deniedRanges(cluster.Ranges)
		if err != nil {
			return err
		}
		if denied != "" {
			args = append(args, "--download-denied-ranges", denied)
		}
		if len(cluster.NodeAddresses) > 0 {
			nodes := make([]string, 0, len(cluster.NodeAddresses))
			for _, a := range cluster.NodeAddresses {
				nodes = append(nodes, a.String())
			}
			args = append(args, "--download-node-addresses", strings.Join(nodes, ","))
		}
	}
	return r.ServerRunner.Start(key, args, opts...)
}

// deniedRanges is the --download-denied-ranges of a data source: the
// setting's ranges and the cluster's own, comma-separated.
func (r downloadGuardRunner) deniedRanges(cluster []netip.Prefix) (string, error) {
	setting, err := r.ds.GetSettingValue(types.SettingNameBackingImageDownloadDeniedRanges)
	if err != nil {
		return "", fmt.Errorf("read the %s setting: %w", types.SettingNameBackingImageDownloadDeniedRanges, err)
	}
	ranges, err := netguard.ParsePrefixes(setting)
	if err != nil {
		return "", fmt.Errorf("the %s setting: %w", types.SettingNameBackingImageDownloadDeniedRanges, err)
	}
	var out []string
	seen := map[netip.Prefix]bool{}
	for _, p := range append(ranges, cluster...) {
		if !seen[p] {
			seen[p] = true
			out = append(out, p.String())
		}
	}
	return strings.Join(out, ","), nil
}

// downloadGuard builds the data source's guard from its flags.
func downloadGuard(allowed, denied, nodes string) (*netguard.Guard, error) {
	allow, err := netguard.ParsePrefixes(allowed)
	if err != nil {
		return nil, fmt.Errorf("--download-allowed-ranges: %w", err)
	}
	deny, err := netguard.ParsePrefixes(denied)
	if err != nil {
		return nil, fmt.Errorf("--download-denied-ranges: %w", err)
	}
	var nodeAddrs []netip.Addr
	for _, item := range strings.Split(nodes, ",") {
		if item = strings.TrimSpace(item); item == "" {
			continue
		}
		ip, err := netip.ParseAddr(item)
		if err != nil {
			return nil, fmt.Errorf("--download-node-addresses: %q is not an IP address", item)
		}
		nodeAddrs = append(nodeAddrs, ip)
	}
	return netguard.New(netguard.Options{Allow: allow, Deny: deny, Nodes: nodeAddrs}), nil
}
