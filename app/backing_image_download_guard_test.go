package app

import (
	"strings"
	"testing"
	"time"

	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	"github.com/cadence-storage/longhorn-manager/types"
)

// TestBackingImageDownloadGuard: by default a download from loopback is
// refused with the reason, whatever name the URL uses; the
// backing-image-download-allowed-ranges setting lets the next one in; a
// range that does not parse is refused with the rule.
func TestBackingImageDownloadGuard(t *testing.T) {
	e, disks, _, otherDisk := twoDiskAPIEnv(t, func(o *DaemonOptions) {
		// This daemon's data sources get no allowance from the environment.
		o.hooks.backingImageServerEnv = append(o.hooks.backingImageServerEnv, EnvDownloadAllowedRanges+"=")
	})
	_, sum, url := serveImage(t, 1<<20)
	byName := strings.Replace(url, "127.0.0.1", "localhost", 1)
	for _, tc := range []struct{ name, url string }{{"by-ip", url}, {"by-name", byName}} {
		e.call(t, "POST", "/v1/backingimages", `{"name":"`+tc.name+`","sourceType":"download","parameters":{"url":"`+tc.url+`"},"disks":["`+otherDisk+`"]}`).expect(t, 200)
		_, disk := e.waitImageFile(t, tc.name, longhorn.BackingImageStateFailed, "loopback")
		if disk != otherDisk {
			t.Fatalf("%s failed on disk %s", tc.name, disk)
		}
	}

	name := string(types.SettingNameBackingImageDownloadAllowedRanges)
	e.call(t, "PUT", "/v1/settings/"+name, `{"value":"127.0.0.0/8, not-a-range"}`).expect(t, 400, "not-a-range", "CIDR")
	e.call(t, "PUT", "/v1/settings/"+name, `{"value":"127.0.0.0/8,::1/128"}`).expect(t, 200)
	eventually(t, 10*time.Second, "the setting in the cache", func() (bool, error) {
		return strings.Contains(e.call(t, "GET", "/v1/settings/"+name, "").raw, "::1/128"), nil
	})
	e.call(t, "POST", "/v1/backingimages", `{"name":"allowed","sourceType":"download","parameters":{"url":"`+byName+`"},"expectedChecksum":"`+sum+`","disks":["`+otherDisk+`"]}`).expect(t, 200)
	waitReady(t, e.lh, e.ns, "allowed", map[string]string{otherDisk: disks[otherDisk]}, "")
}
