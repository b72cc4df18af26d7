package replica

import (
	"bytes"
	"crypto/rand"
	"path/filepath"
	"testing"
	"time"
)

// copyLayers copies every layer of l into t, as a rebuild does.
func copyLayers(t *testing.T, l *Layers, dst *Replica) {
	t.Helper()
	for _, s := range l.Chain().Snapshots {
		for from := int64(0); from >= 0; {
			exts, next, err := l.Extents(s.Name, from, 2)
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range exts {
				p := make([]byte, e.End-e.Start)
				sum, err := l.ReadLayer(s.Name, p, e.Start)
				if err != nil {
					t.Fatal(err)
				}
				got, err := dst.WriteLayer(s.Name, p, e.Start, sum)
				if err != nil {
					t.Fatal(err)
				}
				if got != sum {
					t.Fatalf("layer %s at %d: the target read back another digest", s.Name, e.Start)
				}
			}
			from = next
		}
	}
}

func TestRebuildCopiesTheChainAndInstallsItsMetadataLast(t *testing.T) {
	const size = 4 << 20
	dir := t.TempDir()
	src, err := Create(filepath.Join(dir, "src"), size)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	dstDir := filepath.Join(dir, "dst")
	dst, err := Create(dstDir, size)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	write := func(r *Replica, off int64, p []byte) {
		if _, err := r.WriteAt(p, off); err != nil {
			t.Fatal(err)
		}
	}
	block := func() []byte { p := make([]byte, BlockSize); _, _ = rand.Read(p); return p }
	for i := range 5 {
		write(src, int64(i)*3*BlockSize, block())
		if err := src.CreateSnapshotWithID("s"+string(rune('0'+i)), "id"+string(rune('0'+i)), true, now, map[string]string{"k": "v"}); err != nil {
			t.Fatal(err)
		}
	}
	if err := src.MarkRemoved("s1"); err != nil {
		t.Fatal(err)
	}
	if err := dst.BeginRebuild(); err != nil {
		t.Fatal(err)
	}
	// The writes since the join, on both, then the rebuild's snapshot.
	joined := block()
	write(src, 7*BlockSize, joined)
	write(dst, 7*BlockSize, joined)
	for _, r := range []*Replica{src, dst} {
		if err := r.CreateSnapshotWithID("rebuild", "rid", false, now, nil); err != nil {
			t.Fatal(err)
		}
	}
	after := block()
	write(src, 9*BlockSize, after)
	write(dst, 9*BlockSize, after)

	l, err := src.OpenLayers("rebuild")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if got := src.ViewedSnapshots(); len(got) != 6 {
		t.Fatalf("the layers held: %v", got)
	}
	copyLayers(t, l, dst)
	// Cut short here: the target reopens as being rebuilt, without the
	// layers it was written.
	dst.Close()
	if dst, err = Open(dstDir); err != nil {
		t.Fatal(err)
	}
	if !dst.Rebuilding() || dst.HasSnapshot("s0") {
		t.Fatalf("a rebuild cut short: rebuilding %v, has s0 %v", dst.Rebuilding(), dst.HasSnapshot("s0"))
	}
	dst.Close()
	if dst, err = Create(filepath.Join(dir, "dst2"), size); err != nil {
		t.Fatal(err)
	}
	defer dst.Close()
	if err := dst.BeginRebuild(); err != nil {
		t.Fatal(err)
	}
	write(dst, 7*BlockSize, joined)
	if err := dst.CreateSnapshotWithID("rebuild", "rid", false, now, nil); err != nil {
		t.Fatal(err)
	}
	write(dst, 9*BlockSize, after)
	copyLayers(t, l, dst)
	if err := dst.InstallChain(l.Chain()); err != nil {
		t.Fatal(err)
	}
	if dst.Rebuilding() {
		t.Fatal("still rebuilding after the install")
	}
	if _, err := dst.WriteLayer("s0", make([]byte, BlockSize), 0, [32]byte{}); err == nil {
		t.Fatal("a complete replica's layer was written")
	}
	a, _ := src.Snapshots()
	b, _ := dst.Snapshots()
	if len(a) != len(b) {
		t.Fatalf("%d snapshots, %d", len(a), len(b))
	}
	for i := range a {
		if a[i].Name != b[i].Name || a[i].ID != b[i].ID || a[i].Removed != b[i].Removed || a[i].Size != b[i].Size || a[i].Parent != b[i].Parent || a[i].Labels["k"] != b[i].Labels["k"] {
			t.Fatalf("snapshot %d: %+v, %+v", i, a[i], b[i])
		}
	}
	want, got := make([]byte, size), make([]byte, size)
	_, _ = src.ReadAt(want, 0)
	_, _ = dst.ReadAt(got, 0)
	if !bytes.Equal(want, got) {
		t.Fatal("the head reads differ")
	}
	for _, s := range a[:len(a)-1] {
		va, _ := src.OpenSnapshot(s.Name)
		vb, err := dst.OpenSnapshot(s.Name)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = va.ReadAt(want, 0)
		_, _ = vb.ReadAt(got, 0)
		va.Close()
		vb.Close()
		if !bytes.Equal(want, got) {
			t.Fatalf("snapshot %s reads differ", s.Name)
		}
	}
}

func TestInstallChainRefusesWhatNoReplicaHolds(t *testing.T) {
	r, err := Create(filepath.Join(t.TempDir(), "r"), 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if err := r.InstallChain(ChainMeta{}); err == nil {
		t.Fatal("installed on a replica not being rebuilt")
	}
	if err := r.BeginRebuild(); err != nil {
		t.Fatal(err)
	}
	if err := r.CreateSnapshotWithID("top", "t", false, time.Now(), nil); err != nil {
		t.Fatal(err)
	}
	for _, c := range []ChainMeta{
		{Top: "top", Size: 1 << 21, Snapshots: []LayerMeta{{Name: "top"}}},
		{Top: "top", Size: 1 << 20, Snapshots: []LayerMeta{{Name: "../x"}, {Name: "top"}}},
		{Top: "top", Size: 1 << 20, Snapshots: []LayerMeta{{Name: "top", Parent: "gone"}}},
		{Top: "top", Size: 1 << 20, Snapshots: []LayerMeta{{Name: "a", Parent: "top"}, {Name: "top", Parent: "a"}}},
		{Top: "other", Size: 1 << 20, Snapshots: []LayerMeta{{Name: "other"}}},
		{Top: "top", Size: 1 << 20, Snapshots: []LayerMeta{{Name: "top", VolumeSize: 1 << 30}}},
	} {
		if err := r.InstallChain(c); err == nil {
			t.Fatalf("installed %+v", c)
		}
	}
	if !r.Rebuilding() {
		t.Fatal("a refused install ended the rebuild")
	}
}
