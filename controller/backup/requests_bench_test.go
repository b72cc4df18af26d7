package backup

import (
	"context"
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/cadence-storage/longhorn-manager/engine/backupstore"
	"github.com/cadence-storage/longhorn-manager/engine/backupstore/s3test"
	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
)

// drain runs every queued key, as the workers would, putting what the
// syncs write in the caches.
func (f *fixture) drain(t testing.TB) {
	t.Helper()
	for f.c.Queue.Len() > 0 {
		key, _ := f.c.Queue.Get()
		f.lh.ClearActions()
		if _, err := f.c.sync(context.Background(), key); err != nil {
			t.Fatalf("sync %s: %v", key, err)
		}
		f.cacheWrites(t)
		f.c.Queue.Done(key)
	}
}

// poll runs the target's key, as its requeue would.
func (f *fixture) poll(t testing.TB) {
	t.Helper()
	f.c.Queue.Add(f.c.key())
	f.drain(t)
}

// s3Target is a target on a real S3 server holding volumes x backups
// (written directly, not counted), with an Engine per volume whose
// backups completed, and a fixture whose requests go through a counter;
// direct is a store on it whose requests are not counted.
func s3Target(t testing.TB, volumes, backups int) (f *fixture, counter *s3test.Counter, engines []*longhorn.Engine, direct *backupstore.Store) {
	t.Helper()
	srv := s3test.Start(t)
	counter = srv.Counter(t)
	// A path of its own: backupstore remembers what it read by target.
	path := fmt.Sprintf("requests-%d-%d", volumes, time.Now().UnixNano())
	target := srv.Target(path)
	direct, err := backupstore.OpenWithCredential(target, srv.Credential())
	if err != nil {
		t.Fatal(err)
	}
	var objects []runtime.Object
	for v := 0; v < volumes; v++ {
		vol := fmt.Sprintf("vol-%03d", v)
		e := &longhorn.Engine{ObjectMeta: metav1.ObjectMeta{Name: vol + "-e-0", Namespace: "ns"},
			Spec: longhorn.EngineSpec{InstanceSpec: longhorn.InstanceSpec{VolumeName: vol}}}
		e.Status.BackupStatus = map[string]*longhorn.EngineBackupStatus{}
		for i := 0; i < backups; i++ {
			name := fmt.Sprintf("backup-%s-%d", vol, i)
			if _, _, err := direct.Backup(backupstore.BackupRequest{Name: name, Volume: vol, Snapshot: "s", Source: &byteSource{[]byte(name)}}); err != nil {
				t.Fatal(err)
			}
			e.Status.BackupStatus[name] = &longhorn.EngineBackupStatus{State: backupStateCompleted, Progress: 100, SnapshotName: "s"}
		}
		engines = append(engines, e)
		objects = append(objects, e)
	}
	f = newFixtureAt(t, target, counter.Credential(), objects...)
	f.path = path
	return f, counter, engines, direct
}

type byteSource struct{ b []byte }

func (s *byteSource) ReadAt(p []byte, off int64) (int, error) {
	if off >= int64(len(s.b)) {
		clear(p)
		return len(p), nil
	}
	n := copy(p, s.b[off:])
	clear(p[n:])
	return len(p), nil
}
func (s *byteSource) Size() int64 { return backupstore.BlockSize }

// snapshot is an engine's update for a snapshot taken.
func (f *fixture) snapshot(t testing.TB, e *longhorn.Engine, name string) *longhorn.Engine {
	t.Helper()
	cur := e.DeepCopy()
	if cur.Status.Snapshots == nil {
		cur.Status.Snapshots = map[string]*longhorn.SnapshotInfo{}
	}
	cur.Status.Snapshots[name] = &longhorn.SnapshotInfo{Name: name, Parent: "", Created: f.now.Format(time.RFC3339)}
	f.cache(t, cur)
	f.c.enqueueEngine(e, cur)
	return cur
}

// BenchmarkTargetRequests counts the requests the backup target
// controller sends to a real S3 server (versitygw, through a counting
// proxy) for a target of 4 and of 100 volumes of 3 backups each: per poll,
// and per minute (10 minutes of the controller's clock per op), idle and
// while every volume takes a snapshot every 10 s. The baseline is the
// controller before issue 37, measured in the same run: a scan read every
// volume's record and backups listing (2V+1 requests), every 30 s and on
// every Engine change.
func BenchmarkTargetRequests(b *testing.B) {
	for _, volumes := range []int{4, 100} {
		for _, snapshots := range []bool{false, true} {
			name := fmt.Sprintf("volumes=%d/idle", volumes)
			if snapshots {
				name = fmt.Sprintf("volumes=%d/snapshots-every-10s", volumes)
			}
			b.Run(name, func(b *testing.B) {
				f, counter, engines, _ := s3Target(b, volumes, 3)
				f.poll(b) // the first poll reads every config
				firstPoll := float64(counter.Count())
				counter.Reset()

				// The baseline's scan, with the same config cache: a
				// scan, and a read of every volume's record.
				listing, err := f.store.Scan()
				if err != nil {
					b.Fatal(err)
				}
				for _, v := range listing.Volumes {
					if _, err := f.store.Volume(v.Name); err != nil {
						b.Fatal(err)
					}
				}
				baselineScan := float64(counter.Count())

				// One poll where nothing changed.
				f.now = f.now.Add(300 * time.Second)
				counter.Reset()
				f.poll(b)
				perPoll := float64(counter.Count())

				counter.Reset()
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					for step := 0; step < 60; step++ { // 10 minutes in 10 s steps
						f.now = f.now.Add(10 * time.Second)
						if snapshots {
							for j, e := range engines {
								engines[j] = f.snapshot(b, e, fmt.Sprintf("snap-%d-%d", i, step))
							}
						}
						f.poll(b)
					}
				}
				b.StopTimer()
				perMinute := float64(counter.Count()) / float64(10*b.N)
				baselineScansPerMinute := 2.0 // every 30 s
				if snapshots {
					baselineScansPerMinute += 6 * float64(volumes) // an Engine change each 10 s per volume
				}
				baselinePerMinute := baselineScansPerMinute * baselineScan
				b.ReportMetric(firstPoll, "requests/first-poll")
				b.ReportMetric(perPoll, "requests/poll")
				b.ReportMetric(baselineScan, "baseline-requests/scan")
				b.ReportMetric(perMinute, "requests/min")
				b.ReportMetric(baselinePerMinute, "baseline-requests/min")
				b.ReportMetric(perMinute/baselinePerMinute, "ratio/min")
			})
		}
	}
}
