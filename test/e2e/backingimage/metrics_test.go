//go:build e2e

package backingimage

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cadence-storage/longhorn-manager/datastore"
	"github.com/cadence-storage/longhorn-manager/test/e2e/framework"
)

// TestMetricsOfBackingImageCopies: an image asking for three copies, ready
// on the node's two disks, shows two ready copies against a minimum of
// three (what the copies alert compares); deleted, it leaves no series.
func TestMetricsOfBackingImageCopies(t *testing.T) {
	lh, ns, d, disks := framework.TwoDiskNode(t)
	_, sum, url := framework.ServeImage(t, 1<<20)
	createDownloadImage(t, lh, ns, "ubuntu", url, sum, disks)
	err := datastore.RetryOnConflict(func() error {
		bi, err := lh.LonghornV1beta2().BackingImages(ns).Get(context.Background(), "ubuntu", metav1.GetOptions{})
		if err != nil {
			return err
		}
		bi.Spec.MinNumberOfCopies = 3
		_, err = lh.LonghornV1beta2().BackingImages(ns).Update(context.Background(), bi, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	framework.WaitReady(t, lh, ns, "ubuntu", disks, "")
	base := "http://" + d.APIAddress
	framework.EventuallyAgree(t, 30*time.Second, "the copies of ubuntu", func() string {
		return framework.ExpectSeries(framework.ScrapeMetricsAt(t, base), map[string]float64{
			framework.Series("longhorn_backing_image_ready_copies", "backing_image", "ubuntu"): 2,
			framework.Series("longhorn_backing_image_min_copies", "backing_image", "ubuntu"):   3,
		})
	})
	if err := lh.LonghornV1beta2().BackingImages(ns).Delete(context.Background(), "ubuntu", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	framework.EventuallyAgree(t, 60*time.Second, "the series of a deleted image gone", func() string {
		if left := framework.SeriesWith(framework.ScrapeMetricsAt(t, base), "backing_image", "ubuntu"); len(left) > 0 {
			return "series left: " + left[0]
		}
		return ""
	})
	d.Stop(t)
}
