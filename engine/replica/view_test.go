package replica

import (
	"bytes"
	"fmt"
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

// TestSnapshotViewRange: a view of a range reads what a view of the whole
// snapshot reads there, on a chain of layers over a backing file; it
// reports data runs within its window only and refuses reads outside it.
func TestSnapshotViewRange(t *testing.T) {
	const B = BlockSize
	b, _ := newBackingFile(t, 5*B+100)
	r, err := CreateOnBacking(filepath.Join(t.TempDir(), "r"), 32*B, b)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	// Three layers, each writing a byte pattern of its own over blocks
	// that overlap the layers below and the backing file.
	for layer, offs := range [][]int64{{2 * B, 9 * B, 20*B + 7}, {3*B - 1, 9*B + 5, 30 * B}, {B, 21 * B, 31*B + 100}} {
		for _, off := range offs {
			if _, err := r.WriteAt(bytes.Repeat([]byte{byte(layer + 1)}, 3000), off); err != nil {
				t.Fatal(err)
			}
		}
		if err := r.CreateSnapshot(fmt.Sprintf("s%d", layer), true, time.Now(), nil); err != nil {
			t.Fatal(err)
		}
	}
	full, err := r.OpenSnapshot("s2")
	if err != nil {
		t.Fatal(err)
	}
	defer full.Close()
	want := make([]byte, 32*B)
	if _, err := full.ReadAt(want, 0); err != nil {
		t.Fatal(err)
	}

	for _, rg := range [][2]int64{{0, 32 * B}, {B + 17, 3*B - 5}, {9 * B, 10 * B}, {8*B + 1, 22*B + 1}, {31 * B, 32 * B}, {12 * B, 12 * B}} {
		t.Run(fmt.Sprintf("%d-%d", rg[0], rg[1]), func(t *testing.T) {
			v, err := r.OpenSnapshotRange("s2", rg[0], rg[1])
			if err != nil {
				t.Fatal(err)
			}
			defer v.Close()
			got := make([]byte, rg[1]-rg[0])
			if _, err := v.ReadAt(got, rg[0]); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want[rg[0]:rg[1]]) {
				t.Fatal("the range view reads other bytes than the whole view")
			}
			var gotRuns, wantRuns [][2]int64
			v.DataRuns(0, 32*B, func(s, e int64) { gotRuns = append(gotRuns, [2]int64{s, e}) })
			full.DataRuns(v.from, v.to, func(s, e int64) { wantRuns = append(wantRuns, [2]int64{s, e}) })
			if !reflect.DeepEqual(gotRuns, wantRuns) {
				t.Fatalf("data runs %v, want the whole view's within the window: %v", gotRuns, wantRuns)
			}
			if v.from > 0 {
				if _, err := v.ReadAt(make([]byte, 1), v.from-1); err == nil {
					t.Fatal("a read before the window was not refused")
				}
			}
			if _, err := v.ReadAt(make([]byte, 1), v.to); err == nil {
				t.Fatal("a read past the window was not refused")
			}
		})
	}

	for _, rg := range [][2]int64{{-1, B}, {2 * B, B}, {0, 33 * B}} {
		if _, err := r.OpenSnapshotRange("s2", rg[0], rg[1]); err == nil {
			t.Fatalf("range %v: opened, want an error", rg)
		}
	}
}
