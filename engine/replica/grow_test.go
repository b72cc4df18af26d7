package replica

import (
	"bytes"
	"errors"
	"testing"
)

func TestGrowKeepsDataAndReadsZerosInTheNewSpace(t *testing.T) {
	r, dir := newReplica(t)
	old := fill(1, testSize)
	write(t, r, 0, old)
	must(t, r.CreateSnapshot("before", true, t0, nil))
	if err := r.Grow(testSize / 2); !errors.Is(err, ErrShrink) {
		t.Fatalf("shrinking: %v, want ErrShrink", err)
	}
	if err := r.Grow(testSize + 100); err == nil {
		t.Fatal("a size that is no multiple of the block size was taken")
	}
	must(t, r.Grow(testSize)) // the same size: nothing to do
	must(t, r.Grow(2*testSize))
	if r.Size() != 2*testSize {
		t.Fatalf("size %d after growing to %d", r.Size(), 2*testSize)
	}
	got := make([]byte, 2*testSize)
	if _, err := r.ReadAt(got, 0); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got[:testSize], old) || !bytes.Equal(got[testSize:], make([]byte, testSize)) {
		t.Fatal("after growing, the old data changed or the new space is not zeros")
	}
	tail := fill(2, 8192)
	write(t, r, 2*testSize-8192, tail)
	must(t, r.CreateSnapshot("after", true, t0, nil))

	// The snapshot taken before keeps its size; the one after has the new.
	if v, err := r.OpenSnapshot("before"); err != nil || v.Size() != testSize {
		t.Fatalf("snapshot before the growth: %v, size %v", err, v)
	} else {
		v.Close()
	}
	v, err := r.OpenSnapshot("after")
	if err != nil || v.Size() != 2*testSize {
		t.Fatalf("snapshot after the growth: %v", err)
	}
	v.Close()
	if !bytes.Equal(snapshotImage(t, r, "before"), old) {
		t.Fatal("the snapshot before the growth reads other data")
	}

	// Reopened, the replica has the new size and the same data.
	must(t, r.Close())
	r2, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer r2.Close()
	if r2.Size() != 2*testSize {
		t.Fatalf("reopened at %d bytes", r2.Size())
	}
	got2 := make([]byte, 2*testSize)
	if _, err := r2.ReadAt(got2, 0); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got2[:testSize], old) || !bytes.Equal(got2[2*testSize-8192:], tail) {
		t.Fatal("reopened, the grown replica reads other data")
	}
	// Reverting to the snapshot before the growth keeps the size; what it
	// did not hold reads as zeros.
	must(t, r2.Revert("before"))
	if _, err := r2.ReadAt(got2, 0); err != nil || r2.Size() != 2*testSize {
		t.Fatal(err)
	}
	if !bytes.Equal(got2[:testSize], old) || !bytes.Equal(got2[testSize:], make([]byte, testSize)) {
		t.Fatal("reverted to the snapshot before the growth: not its data and zeros")
	}
}

func TestACrashWhileGrowingLeavesOneSize(t *testing.T) {
	for _, crashAfter := range []string{"extend head", ""} {
		t.Run("crash after "+crashAfter, func(t *testing.T) {
			r, dir := newReplica(t)
			data := fill(3, testSize)
			write(t, r, 0, data)
			err := r.grow(3*testSize, func(step string) error {
				if step == crashAfter {
					return crashError{step}
				}
				return nil
			})
			if crashAfter != "" && !isCrash(err) {
				t.Fatalf("grow: %v, want the injected crash", err)
			}
			r.Close()
			want := int64(testSize)
			if crashAfter == "" {
				want = 3 * testSize
			}
			if size, err := ReadSize(dir); err != nil || size != want {
				t.Fatalf("size on disk %d (%v), want %d", size, err, want)
			}
			r2, err := Open(dir)
			if err != nil {
				t.Fatal(err)
			}
			defer r2.Close()
			if r2.Size() != want {
				t.Fatalf("reopened at %d bytes, want %d", r2.Size(), want)
			}
			if !bytes.Equal(image(t, r2), data) {
				t.Fatal("the data changed")
			}
			// Growing again after the crash completes the growth.
			must(t, r2.Grow(3*testSize))
			got := make([]byte, 3*testSize)
			if _, err := r2.ReadAt(got, 0); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got[:testSize], data) || !bytes.Equal(got[testSize:], make([]byte, 2*testSize)) {
				t.Fatal("grown after the crash: not the data and zeros")
			}
			if n, err := r2.headLength(); err != nil || n != 3*testSize {
				t.Fatalf("head file is %d bytes (%v)", n, err)
			}
		})
	}
}
