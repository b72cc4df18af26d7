//go:build e2e

package backingimage

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cadence-storage/longhorn-manager/app"
	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	"github.com/cadence-storage/longhorn-manager/test/e2e/framework"
	"github.com/cadence-storage/longhorn-manager/types"
)

// TestBackingImageDownloadGuard: by default a download from loopback is
// refused with the reason, whatever name the URL uses; the
// backing-image-download-allowed-ranges setting lets the next one in; a
// range that does not parse is refused with the rule.
func TestBackingImageDownloadGuard(t *testing.T) {
	e, disks, _, otherDisk := framework.TwoDiskAPIEnv(t, func(o *app.DaemonOptions) {
		// This daemon's data sources get no allowance from the environment.
		o.Hooks.BackingImageServerEnv = append(o.Hooks.BackingImageServerEnv, app.EnvDownloadAllowedRanges+"=")
	})
	_, sum, url := framework.ServeImage(t, 1<<20)
	byName := strings.Replace(url, "127.0.0.1", "localhost", 1)
	for _, tc := range []struct{ name, url string }{{"by-ip", url}, {"by-name", byName}} {
		e.Call(t, "POST", "/v1/backingimages", `{"name":"`+tc.name+`","sourceType":"download","parameters":{"url":"`+tc.url+`"},"disks":["`+otherDisk+`"]}`).Expect(t, 200)
		_, disk := e.WaitImageFile(t, tc.name, longhorn.BackingImageStateFailed, "loopback")
		if disk != otherDisk {
			t.Fatalf("%s failed on disk %s", tc.name, disk)
		}
	}

	name := string(types.SettingNameBackingImageDownloadAllowedRanges)
	e.Call(t, "PUT", "/v1/settings/"+name, `{"value":"127.0.0.0/8, not-a-range"}`).Expect(t, 400, "not-a-range", "CIDR")
	e.Call(t, "PUT", "/v1/settings/"+name, `{"value":"127.0.0.0/8,::1/128"}`).Expect(t, 200)
	framework.Eventually(t, 10*time.Second, "the setting in the cache", func() (bool, error) {
		return strings.Contains(e.Call(t, "GET", "/v1/settings/"+name, "").Raw, "::1/128"), nil
	})
	e.Call(t, "POST", "/v1/backingimages", `{"name":"allowed","sourceType":"download","parameters":{"url":"`+byName+`"},"expectedChecksum":"`+sum+`","disks":["`+otherDisk+`"]}`).Expect(t, 200)
	framework.WaitReady(t, e.LH, e.NS, "allowed", map[string]string{otherDisk: disks[otherDisk]}, "")
}

// TestBackingImageDownloadDeniedRanges: the
// backing-image-download-denied-ranges setting wins over an allowed
// range, and a range the cluster's API gives as its pods' (a Node's
// podCIDRs) is denied with no setting at all. The guard refuses before
// any connection: no server listens at these addresses.
func TestBackingImageDownloadDeniedRanges(t *testing.T) {
	e, _, _, otherDisk := framework.TwoDiskAPIEnv(t, func(o *app.DaemonOptions) {
		o.Hooks.BackingImageServerEnv = append(o.Hooks.BackingImageServerEnv, app.EnvDownloadAllowedRanges+"=")
	})
	setSetting := func(name types.SettingName, value string) {
		t.Helper()
		e.Call(t, "PUT", "/v1/settings/"+string(name), `{"value":"`+value+`"}`).Expect(t, 200)
		framework.Eventually(t, 10*time.Second, "the setting in the cache", func() (bool, error) {
			return strings.Contains(e.Call(t, "GET", "/v1/settings/"+string(name), "").Raw, `"value":"`+value+`"`), nil
		})
	}
	setSetting(types.SettingNameBackingImageDownloadAllowedRanges, "127.0.0.0/8")
	e.Call(t, "PUT", "/v1/settings/"+string(types.SettingNameBackingImageDownloadDeniedRanges), `{"value":"127.0.0.300/32"}`).
		Expect(t, 400, "127.0.0.300/32", "CIDR")
	setSetting(types.SettingNameBackingImageDownloadDeniedRanges, "127.0.0.3/32")
	e.Call(t, "POST", "/v1/backingimages", `{"name":"denied","sourceType":"download","parameters":{"url":"http://127.0.0.3:1/image.raw"},"disks":["`+otherDisk+`"]}`).Expect(t, 200)
	e.WaitImageFile(t, "denied", longhorn.BackingImageStateFailed, "denied range 127.0.0.3/32")

	// A pod range of the cluster: denied although 127.0.0.0/8 is allowed.
	suffix := e.NS[strings.LastIndex(e.NS, "-")+1:]
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "guard-" + suffix}, Spec: corev1.NodeSpec{PodCIDR: "127.0.0.4/32", PodCIDRs: []string{"127.0.0.4/32"}}}
	if _, err := e.Kube.CoreV1().Nodes().Create(context.Background(), node, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.Kube.CoreV1().Nodes().Delete(context.Background(), node.Name, metav1.DeleteOptions{}) })
	e.Call(t, "POST", "/v1/backingimages", `{"name":"pod-range","sourceType":"download","parameters":{"url":"http://127.0.0.4:1/image.raw"},"disks":["`+otherDisk+`"]}`).Expect(t, 200)
	e.WaitImageFile(t, "pod-range", longhorn.BackingImageStateFailed, "denied range 127.0.0.4/32")
}
