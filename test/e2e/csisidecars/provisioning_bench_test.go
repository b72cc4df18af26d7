//go:build e2e

package csisidecars

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"

	"github.com/cadence-storage/longhorn-manager/client"
	"github.com/cadence-storage/longhorn-manager/test/e2e/framework"
)

// csiBenchVolumes is how many volumes each round provisions.
const csiBenchVolumes = 50

// BenchmarkCSIProvisioning provisions 50 PVCs of a StorageClass through
// the real external-provisioner and the driver until each is Bound,
// against its baseline: the same 50 volumes (16 MiB, one replica)
// created through the manager's API at once, each polled as the driver
// polls it until it is ready (out of "creating": detached, the state the
// driver's CreateVolume waits for). Rounds are interleaved on one manager,
// baseline, driver, baseline, driver, each starting with no volume, so a
// drift of the machine's load falls on both. It reports the ratio of the
// driver's rounds to the baseline's (goal at most 1.5) and each side's
// time per volume: the round's time divided by 50, and the mean time from
// a volume's request to its being ready or Bound.
// LONGHORN_BENCH_PROVISIONER_FLAGS adds flags to the provisioner's (its
// --worker-threads or --kube-api-qps, say); its log is at -v=2, as a
// deployment runs it.
func BenchmarkCSIProvisioning(b *testing.B) {
	if testing.Short() {
		b.Skip("provisions 200 volumes on the control plane: minutes; not with -short")
	}
	flags := append([]string{"-v=2"}, strings.Fields(os.Getenv("LONGHORN_BENCH_PROVISIONER_FLAGS"))...)
	s := newSidecarEnvWith(b, flags)
	b.Logf("the external-provisioner's flags beyond the tests' own: %v", flags)
	sc := s.storageClass(b, "bench", map[string]string{})
	api := client.NewClient(s.Base+"/v1", 10*time.Second)
	bound := s.watchBound(b)

	var base, drv []csiRound
	for i := 0; i < b.N; i++ {
		// One of each first, unmeasured: the first volume of a manager
		// and the provisioner's first claim pay their caches' warm-up.
		s.apiRound(b, api, fmt.Sprintf("warm%d", i), 1)
		s.claimRound(b, bound, sc, fmt.Sprintf("warm%d", i), 1)
		for r := 0; r < 2; r++ {
			base = append(base, s.apiRound(b, api, fmt.Sprintf("b%d%d", i, r), csiBenchVolumes))
			drv = append(drv, s.claimRound(b, bound, sc, fmt.Sprintf("d%d%d", i, r), csiBenchVolumes))
		}
	}
	total := func(rounds []csiRound) (wall, mean time.Duration) {
		for _, r := range rounds {
			wall += r.wall
			mean += r.mean()
		}
		return wall / time.Duration(len(rounds)), mean / time.Duration(len(rounds))
	}
	baseWall, baseMean := total(base)
	drvWall, drvMean := total(drv)
	ratio := drvWall.Seconds() / baseWall.Seconds()
	b.Logf("%d volumes: through the provisioner %s a round (%s), through the API %s (%s): ratio %.2f (goal <= 1.5); per volume %s against %s, mean time to Bound %s against %s to ready (load average %s)",
		csiBenchVolumes, drvWall.Round(10*time.Millisecond), rounds(drv), baseWall.Round(10*time.Millisecond), rounds(base), ratio,
		(drvWall / csiBenchVolumes).Round(time.Millisecond), (baseWall / csiBenchVolumes).Round(time.Millisecond),
		drvMean.Round(10*time.Millisecond), baseMean.Round(10*time.Millisecond), framework.LoadAverage())
	b.ReportMetric(ratio, "provisioner/api")
	b.ReportMetric(drvWall.Seconds(), "provisioner-s/round")
	b.ReportMetric(baseWall.Seconds(), "api-s/round")
	b.ReportMetric(float64(drvWall.Milliseconds())/csiBenchVolumes, "provisioner-ms/volume")
	b.ReportMetric(float64(baseWall.Milliseconds())/csiBenchVolumes, "api-ms/volume")
	b.ReportMetric(float64(drvMean.Milliseconds()), "provisioner-mean-ms-to-bound")
	b.ReportMetric(float64(baseMean.Milliseconds()), "api-mean-ms-to-ready")
}

// csiRound is one round's time and each volume's, from its request to
// its being ready or Bound.
type csiRound struct {
	wall    time.Duration
	volumes []time.Duration
}

func (r csiRound) mean() time.Duration {
	var sum time.Duration
	for _, d := range r.volumes {
		sum += d
	}
	return sum / time.Duration(len(r.volumes))
}

func rounds(rs []csiRound) string {
	var out []string
	for _, r := range rs {
		sorted := slices.Clone(r.volumes)
		slices.Sort(sorted)
		out = append(out, fmt.Sprintf("%s, slowest volume %s", r.wall.Round(10*time.Millisecond), sorted[len(sorted)-1].Round(10*time.Millisecond)))
	}
	return strings.Join(out, "; ")
}

// boundTimes records, from watches, when each claim of the namespace was
// first seen handed to the provisioner by the PersistentVolume binder
// (its storage-provisioner annotation), its PersistentVolume made by the
// provisioner, and the claim Bound: waiting for 50 claims costs the
// apiserver no polling, and the phases tell where a round's time goes.
type boundTimes struct {
	mu                sync.Mutex
	handed, pv, bound map[string]time.Time
}

func (s *sidecarEnv) watchBound(b *testing.B) *boundTimes {
	bt := &boundTimes{handed: map[string]time.Time{}, pv: map[string]time.Time{}, bound: map[string]time.Time{}}
	first := func(m map[string]time.Time, name string) {
		now := time.Now()
		bt.mu.Lock()
		if _, ok := m[name]; !ok {
			m[name] = now
		}
		bt.mu.Unlock()
	}
	onClaim := func(obj any) {
		pvc, ok := obj.(*corev1.PersistentVolumeClaim)
		if !ok {
			return
		}
		if pvc.Annotations["volume.kubernetes.io/storage-provisioner"] != "" {
			first(bt.handed, pvc.Name)
		}
		if pvc.Status.Phase == corev1.ClaimBound {
			first(bt.bound, pvc.Name)
		}
	}
	onVolume := func(obj any) {
		if pv, ok := obj.(*corev1.PersistentVolume); ok && pv.Spec.ClaimRef != nil && pv.Spec.ClaimRef.Namespace == s.NS {
			first(bt.pv, pv.Spec.ClaimRef.Name)
		}
	}
	stop := make(chan struct{})
	b.Cleanup(func() { close(stop) })
	claims := informers.NewSharedInformerFactoryWithOptions(s.Kube, 0, informers.WithNamespace(s.NS))
	_, _ = claims.Core().V1().PersistentVolumeClaims().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: onClaim, UpdateFunc: func(_, obj any) { onClaim(obj) }})
	volumes := informers.NewSharedInformerFactory(s.Kube, 0)
	_, _ = volumes.Core().V1().PersistentVolumes().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: onVolume, UpdateFunc: func(_, obj any) { onVolume(obj) }})
	for _, f := range []informers.SharedInformerFactory{claims, volumes} {
		f.Start(stop)
		f.WaitForCacheSync(stop)
	}
	return bt
}

func (bt *boundTimes) at(name string) (time.Time, bool) {
	bt.mu.Lock()
	defer bt.mu.Unlock()
	t, ok := bt.bound[name]
	return t, ok
}

// phases is the mean time from the claims' creation to each phase, and
// the spread (first to last) of each phase across the round.
func (bt *boundTimes) phases(created map[string]time.Time) string {
	bt.mu.Lock()
	defer bt.mu.Unlock()
	var out []string
	for _, p := range []struct {
		what string
		m    map[string]time.Time
	}{{"handed to the provisioner", bt.handed}, {"PV made", bt.pv}, {"Bound", bt.bound}} {
		var sum time.Duration
		var lo, hi time.Time
		for name, c := range created {
			at := p.m[name]
			sum += at.Sub(c)
			if lo.IsZero() || at.Before(lo) {
				lo = at
			}
			if at.After(hi) {
				hi = at
			}
		}
		out = append(out, fmt.Sprintf("%s mean %s (first to last %s)", p.what, (sum/time.Duration(len(created))).Round(10*time.Millisecond), hi.Sub(lo).Round(10*time.Millisecond)))
	}
	return strings.Join(out, ", ")
}

// claimRound creates n claims of the StorageClass at once and waits until
// each is Bound; then deletes them and waits until their volumes are
// gone, unmeasured.
func (s *sidecarEnv) claimRound(b *testing.B, bound *boundTimes, sc, prefix string, n int) csiRound {
	b.Helper()
	ctx := context.Background()
	names := benchNames(prefix, n)
	r := csiRound{volumes: make([]time.Duration, n)}
	var mu sync.Mutex
	created := map[string]time.Time{}
	before := s.claimWrites(b)
	start := time.Now()
	runAll(b, names, func(i int, name string) error {
		requested := time.Now()
		mu.Lock()
		created[name] = requested
		mu.Unlock()
		pvc := &corev1.PersistentVolumeClaim{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: corev1.PersistentVolumeClaimSpec{
				AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
				StorageClassName: &sc,
				Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("16Mi")}},
			},
		}
		if _, err := s.Kube.CoreV1().PersistentVolumeClaims(s.NS).Create(ctx, pvc, metav1.CreateOptions{}); err != nil {
			return err
		}
		deadline := time.Now().Add(sidecarWait)
		for {
			if at, ok := bound.at(name); ok {
				r.volumes[i] = at.Sub(requested)
				return nil
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("claim %s not Bound in %s", name, sidecarWait)
			}
			time.Sleep(20 * time.Millisecond)
		}
	})
	r.wall = time.Since(start)
	if n > 1 {
		writes := s.claimWrites(b)
		b.Logf("%s: %d claims Bound in %s; from each claim's creation: %s; writes per claim to the apiserver, PVCs %.1f, PVs %.1f (%.0f a second over the round)", prefix, n, r.wall.Round(10*time.Millisecond), bound.phases(created),
			(writes["persistentvolumeclaims"]-before["persistentvolumeclaims"])/float64(n), (writes["persistentvolumes"]-before["persistentvolumes"])/float64(n),
			(writes["persistentvolumeclaims"]+writes["persistentvolumes"]-before["persistentvolumeclaims"]-before["persistentvolumes"])/r.wall.Seconds())
	}
	for _, name := range names {
		if err := s.Kube.CoreV1().PersistentVolumeClaims(s.NS).Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
			b.Fatal(err)
		}
	}
	s.waitNoVolumes(b, "the claims' volumes deleted")
	return r
}

// apiRound creates n volumes through the API at once, each polled every
// 500 ms (as the driver polls) until it is out of "creating"; then
// deletes them and waits until they are gone, unmeasured.
func (s *sidecarEnv) apiRound(b *testing.B, api *client.Client, prefix string, n int) csiRound {
	b.Helper()
	ctx := context.Background()
	names := benchNames(prefix, n)
	r := csiRound{volumes: make([]time.Duration, n)}
	start := time.Now()
	runAll(b, names, func(i int, name string) error {
		requested := time.Now()
		if _, err := api.CreateVolume(ctx, client.VolumeCreate{Name: name, Size: fmt.Sprint(16 << 20), NumberOfReplicas: 1}); err != nil {
			return err
		}
		deadline := time.Now().Add(sidecarWait)
		for {
			v, err := api.Volume(ctx, name)
			if err != nil && !client.IsNotFound(err) {
				return err
			}
			if err == nil && v.State != "" && v.State != "creating" {
				r.volumes[i] = time.Since(requested)
				return nil
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("volume %s not ready in %s", name, sidecarWait)
			}
			time.Sleep(500 * time.Millisecond)
		}
	})
	r.wall = time.Since(start)
	for _, name := range names {
		if err := api.DeleteVolume(ctx, name); err != nil {
			b.Fatal(err)
		}
	}
	s.waitNoVolumes(b, "the API's volumes deleted")
	return r
}

// waitNoVolumes waits until the namespace holds no Volume and no
// PersistentVolume of its claims.
func (s *sidecarEnv) waitNoVolumes(b *testing.B, what string) {
	b.Helper()
	ctx := context.Background()
	framework.Eventually(b, 5*time.Minute, what, func() (bool, error) {
		vols, err := s.LH.LonghornV1beta2().Volumes(s.NS).List(ctx, metav1.ListOptions{})
		if err != nil || len(vols.Items) > 0 {
			return false, err
		}
		pvs, err := s.Kube.CoreV1().PersistentVolumes().List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		for _, pv := range pvs.Items {
			if pv.Spec.ClaimRef != nil && pv.Spec.ClaimRef.Namespace == s.NS {
				return false, nil
			}
		}
		return true, nil
	})
}

// claimWrites is the apiserver's count of writes (create, update, patch,
// delete; status included) to PVCs and PVs, by resource, from its
// /metrics: what the PersistentVolume binder and the provisioner write,
// each at its own client-side rate limit.
func (s *sidecarEnv) claimWrites(b *testing.B) map[string]float64 {
	b.Helper()
	raw, err := s.Kube.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(context.Background())
	if err != nil {
		b.Fatal(err)
	}
	out := map[string]float64{}
	for _, line := range strings.Split(string(raw), "\n") {
		if !strings.HasPrefix(line, "apiserver_request_total{") {
			continue
		}
		for _, res := range []string{"persistentvolumeclaims", "persistentvolumes"} {
			if !strings.Contains(line, `resource="`+res+`"`) {
				continue
			}
			for _, verb := range []string{"POST", "PUT", "PATCH", "DELETE"} {
				if strings.Contains(line, `verb="`+verb+`"`) {
					var v float64
					fmt.Sscan(line[strings.LastIndexByte(line, ' ')+1:], &v)
					out[res] += v
				}
			}
		}
	}
	return out
}

func benchNames(prefix string, n int) []string {
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("%s-%03d", prefix, i)
	}
	return names
}

// runAll runs f on every name at once and fails on the first error.
func runAll(b *testing.B, names []string, f func(i int, name string) error) {
	b.Helper()
	errs := make(chan error, len(names))
	var wg sync.WaitGroup
	for i, name := range names {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := f(i, name); err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		b.Fatal(err)
	}
}
