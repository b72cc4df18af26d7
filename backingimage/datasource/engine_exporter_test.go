package datasource

import (
	"bytes"
	"context"
	"os"
	"testing"
	"time"

	"k8s.io/utils/clock"

	"github.com/cadence-storage/longhorn-manager/engine/rpc/rpctest"
	"github.com/cadence-storage/longhorn-manager/engine/volumeengine"
	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	"github.com/cadence-storage/longhorn-manager/mtls/mtlstest"
)

// serveEngine runs the engine service of volume "vol" (size bytes, one
// replica) on loopback and returns its address and engine.
func serveEngine(t testing.TB, size int64) (string, *volumeengine.Engine) {
	t.Helper()
	e := rpctest.Engine(t, "vol", size, clock.RealClock{}, "r1")
	return rpctest.Serve(t, e), e
}

// TestExportThroughTheEngine: the engine exporter reads the snapshot, not
// the volume's later writes, and the file is the snapshot's bytes; a
// missing volume, snapshot or engine fails with the reason.
func TestExportThroughTheEngine(t *testing.T) {
	const size = 20 << 20
	addr, e := serveEngine(t, size)
	want := make([]byte, size)
	data := randomBytes(t, 3<<20)
	for _, off := range []int64{0, 9<<20 + 512, size - int64(len(data))} {
		if _, err := e.WriteAt(data, off); err != nil {
			t.Fatal(err)
		}
		copy(want[off:], data)
	}
	if _, err := e.CreateSnapshot("snap", nil); err != nil {
		t.Fatal(err)
	}
	if _, err := e.WriteAt([]byte("later"), 0); err != nil {
		t.Fatal(err)
	}

	s, c := start(t, Config{SourceType: "export-from-volume", Parameters: exportParams("raw"),
		Exporter: EngineExporter{Address: addr, Timeout: 5 * time.Second, TLS: mtlstest.Identity(t)}, ExpectedChecksum: sha(want)})
	st := waitState(t, c, 20*time.Second)
	if st.State != longhorn.BackingImageStateReadyForTransfer || st.Size != size {
		t.Fatalf("status %+v", st)
	}
	got, err := os.ReadFile(s.finalPath())
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("the exported file differs from the snapshot (%v)", err)
	}

	for _, tc := range []struct {
		name, volume, snapshot, address string
		want                            []string
	}{
		{"missing snapshot", "vol", "other", addr, []string{"snapshot get other", "not found"}},
		{"missing volume", "gone", "snap", addr, []string{"volume gone", "no engine on this node"}},
		{"engine unreachable", "vol", "snap", "127.0.0.1:1", []string{"engine unavailable"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			params := map[string]string{"volume-name": tc.volume, "snapshot-name": tc.snapshot, "export-type": "raw"}
			_, c := start(t, Config{SourceType: "export-from-volume", Parameters: params, Exporter: EngineExporter{Address: tc.address, Timeout: 2 * time.Second, TLS: mtlstest.Identity(t)}})
			wantFailed(t, waitState(t, c, 20*time.Second), append([]string{"export snapshot " + tc.snapshot + " of volume " + tc.volume}, tc.want...)...)
		})
	}
}

// slowExporter answers memExporter's snapshot a read at a time, slowly.
type slowExporter struct{ memExporter }

type slowSnapshot struct{ SnapshotReader }

func (s slowSnapshot) ReadAt(p []byte, off int64) (int, error) {
	time.Sleep(50 * time.Millisecond)
	return s.SnapshotReader.ReadAt(p, off)
}

func (x slowExporter) OpenSnapshot(ctx context.Context, volume, snapshot string) (SnapshotReader, error) {
	r, err := x.memExporter.OpenSnapshot(ctx, volume, snapshot)
	return slowSnapshot{r}, err
}

// TestExportProgressMoves: an export reports in-progress with its size and
// a progress between 0 and 100 before it is ready.
func TestExportProgressMoves(t *testing.T) {
	data := randomBytes(t, 10*exportReadSize)
	_, c := start(t, Config{SourceType: "export-from-volume", Parameters: exportParams("raw"), Exporter: slowExporter{memExporter{data}}})
	deadline := time.Now().Add(20 * time.Second)
	seen := map[int]bool{}
	for time.Now().Before(deadline) {
		st, err := c.Get(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if st.State == longhorn.BackingImageStateReadyForTransfer {
			break
		}
		if st.State == longhorn.BackingImageStateInProgress && st.Progress > 0 && st.Progress < 100 {
			if st.Size != int64(len(data)) || st.ProcessedSize <= 0 {
				t.Fatalf("in progress without size or processed bytes: %+v", st)
			}
			seen[st.Progress] = true
		}
		time.Sleep(20 * time.Millisecond)
	}
	if len(seen) < 3 {
		t.Fatalf("progress took %d distinct values between 0 and 100, want several: %v", len(seen), seen)
	}
}
