package replica

import (
	"path/filepath"
	"reflect"
	"testing"
	"time"
)

// TestDataRuns: a snapshot view reports the ranges some layer or the
// backing file holds, cut to the range asked, and nothing else.
func TestDataRuns(t *testing.T) {
	const B = BlockSize
	runs := func(v *SnapshotView, off, end int64) [][2]int64 {
		var out [][2]int64
		v.DataRuns(off, end, func(s, e int64) { out = append(out, [2]int64{s, e}) })
		return out
	}
	open := func(t *testing.T, r *Replica) *SnapshotView {
		t.Helper()
		for _, off := range []int64{1 * B, 3 * B, 4 * B} {
			if _, err := r.WriteAt([]byte{1}, off); err != nil {
				t.Fatal(err)
			}
		}
		if err := r.CreateSnapshot("s", true, time.Now(), nil); err != nil {
			t.Fatal(err)
		}
		v, err := r.OpenSnapshot("s")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { v.Close(); r.Close() })
		return v
	}

	r, err := Create(filepath.Join(t.TempDir(), "r"), 8*B)
	if err != nil {
		t.Fatal(err)
	}
	v := open(t, r)
	for _, tc := range []struct {
		name     string
		off, end int64
		want     [][2]int64
	}{
		{"the whole volume: the written blocks, adjacent ones merged", 0, 8 * B, [][2]int64{{B, 2 * B}, {3 * B, 5 * B}}},
		{"a range that starts and ends inside blocks is cut to it", B + 10, 3*B + 5, [][2]int64{{B + 10, 2 * B}, {3 * B, 3*B + 5}}},
		{"a range of holes only", 5 * B, 8 * B, nil},
		{"past the end is cut at the volume's size", 4 * B, 100 * B, [][2]int64{{4 * B, 5 * B}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := runs(v, tc.off, tc.end); !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got %v, want %v", got, tc.want)
			}
		})
	}

	t.Run("the backing file's blocks are data too", func(t *testing.T) {
		b, _ := newBackingFile(t, 2*B+100)
		r, err := CreateOnBacking(filepath.Join(t.TempDir(), "r"), 8*B, b)
		if err != nil {
			t.Fatal(err)
		}
		v := open(t, r)
		if got, want := runs(v, 0, 8*B), [][2]int64{{0, 5 * B}}; !reflect.DeepEqual(got, want) {
			t.Fatalf("got %v, want %v", got, want)
		}
	})
}
