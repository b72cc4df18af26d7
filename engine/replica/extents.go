package replica

import (
	"errors"
	"os"

	"golang.org/x/sys/unix"
)

// dataExtents calls fn for every range of f that holds data, found with
// SEEK_DATA and SEEK_HOLE, so the cost follows what was written rather
// than the file's size.
func dataExtents(f *os.File, size int64, fn func(start, end int64)) error {
	return dataExtentsIn(f, 0, size, fn)
}

// dataExtentsIn is dataExtents for the ranges within [from, size): the
// extents found are cut to it.
func dataExtentsIn(f *os.File, from, size int64, fn func(start, end int64)) error {
	fd := int(f.Fd())
	off := from
	for off < size {
		start, err := unix.Seek(fd, off, unix.SEEK_DATA)
		if errors.Is(err, unix.ENXIO) {
			return nil
		}
		if err != nil {
			return err
		}
		if start >= size {
			return nil
		}
		end, err := unix.Seek(fd, start, unix.SEEK_HOLE)
		if err != nil {
			return err
		}
		if end > size {
			end = size
		}
		fn(start, end)
		off = end
	}
	return nil
}

// dataBlocks calls fn for every BlockSize block of f that holds data.
func dataBlocks(f *os.File, size int64, fn func(block int64)) error {
	return dataBlocksIn(f, 0, size, fn)
}

// dataBlocksIn calls fn for every block in [from, to) of f that holds
// data; from and to are block-aligned.
func dataBlocksIn(f *os.File, from, to int64, fn func(block int64)) error {
	return dataExtentsIn(f, from, to, func(start, end int64) {
		for b := start / BlockSize; b < (end+BlockSize-1)/BlockSize; b++ {
			fn(b)
		}
	})
}
