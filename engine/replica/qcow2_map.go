package replica

import (
	"encoding/binary"
	"fmt"
)

// How a qcow2 file maps a virtual cluster: an L1 entry per L2 table, an
// L2 entry per cluster, both 8 bytes, big-endian.

const (
	// qcow2OffsetMask holds bits 9 to 55: the host offset of an L2 table
	// (in an L1 entry) or of a standard cluster (in an L2 entry).
	qcow2OffsetMask = 0x00ff_ffff_ffff_fe00
	// qcow2Compressed marks an L2 entry of a compressed cluster.
	qcow2Compressed = 1 << 62
	// qcow2ZeroFlag marks an L2 entry of a cluster that reads as zeros.
	qcow2ZeroFlag = 1 << 0
	// qcow2SectorSize is the unit of a compressed cluster's length.
	qcow2SectorSize = 512
)

// clusterKind is what a virtual cluster reads from.
type clusterKind int

const (
	// clusterZero reads as zeros: unallocated (the image has no backing
	// file), or a zero cluster.
	clusterZero clusterKind = iota
	// clusterData reads the cluster at host in the file.
	clusterData
	// clusterCompressed reads length bytes of raw deflate at host, which
	// inflate to the cluster.
	clusterCompressed
)

// clusterMapping is where one virtual cluster's bytes are.
type clusterMapping struct {
	kind   clusterKind
	host   int64
	length int64
}

// checkL1 checks every L1 entry the virtual size uses: each L2 table must
// start on a cluster boundary, lie inside the file and overlap no other
// metadata. Checking them at open refuses a corrupt table before any read.
func (q *qcow2Reader) checkL1() error {
	cs := q.h.clusterSize()
	for i, e := range q.l1 {
		off := int64(e & qcow2OffsetMask)
		if off == 0 {
			continue
		}
		if err := checkQcow2Table(fmt.Sprintf("the L2 table of L1 entry %d", i), uint64(off), uint64(cs), cs, q.fileSize); err != nil {
			return err
		}
		if what := q.metadataAt(off, cs); what != "" {
			return fmt.Errorf("%w: the L2 table of L1 entry %d at %d overlaps %s", ErrQcow2Corrupt, i, off, what)
		}
	}
	return nil
}

// metadataAt names the fixed metadata (header cluster, L1 table, refcount
// table) that [off, off+n) overlaps, or returns "".
func (q *qcow2Reader) metadataAt(off, n int64) string {
	switch {
	case overlaps(off, n, 0, q.h.clusterSize()):
		return "the header cluster"
	case overlaps(off, n, q.h.l1Offset, q.h.l1Entries*8):
		return "the L1 table"
	case overlaps(off, n, q.h.refcountOffset, q.h.refcountBytes):
		return "the refcount table"
	}
	return ""
}

// mapCluster finds where virtual cluster vc is.
func (q *qcow2Reader) mapCluster(vc int64) (clusterMapping, error) {
	perTable := q.h.l2Entries()
	l1i, l2i := vc/perTable, vc%perTable
	if l1i >= int64(len(q.l1)) {
		return clusterMapping{}, fmt.Errorf("%w: cluster %d is past the L1 table", ErrQcow2Corrupt, vc)
	}
	tableOff := int64(q.l1[l1i] & qcow2OffsetMask)
	if tableOff == 0 {
		return clusterMapping{kind: clusterZero}, nil
	}
	table, err := q.l2Table(tableOff)
	if err != nil {
		return clusterMapping{}, err
	}
	e := binary.BigEndian.Uint64(table[l2i*8:])
	m, err := q.decodeL2(e)
	if err != nil {
		return clusterMapping{}, fmt.Errorf("%w (L2 entry %#x of the cluster at virtual offset %d)", err, e, vc<<q.h.clusterBits)
	}
	return m, nil
}

// decodeL2 reads an L2 entry and checks where it points.
func (q *qcow2Reader) decodeL2(e uint64) (clusterMapping, error) {
	cs := q.h.clusterSize()
	if e&qcow2Compressed != 0 {
		// Bits 0 to x-1 hold the byte offset of the compressed data, bits x
		// to 61 the number of 512-byte sectors it covers after its first.
		x := 62 - (q.h.clusterBits - 8)
		host := int64(e & (1<<x - 1))
		sectors := int64(e>>x&(1<<(q.h.clusterBits-8)-1)) + 1
		length := sectors*qcow2SectorSize - host%qcow2SectorSize
		if host >= q.fileSize {
			return clusterMapping{}, fmt.Errorf("%w: compressed data at %d is past the end of the file (%d bytes)", ErrQcow2Corrupt, host, q.fileSize)
		}
		// The last compressed cluster may end in a sector the file does not
		// hold in full; what is missing reads as zeros, as in qemu.
		length = min(length, q.fileSize-host)
		if what := q.metadataAt(host, length); what != "" {
			return clusterMapping{}, fmt.Errorf("%w: compressed data at %d overlaps %s", ErrQcow2Corrupt, host, what)
		}
		return clusterMapping{kind: clusterCompressed, host: host, length: length}, nil
	}
	if e&qcow2ZeroFlag != 0 {
		return clusterMapping{kind: clusterZero}, nil
	}
	host := int64(e & qcow2OffsetMask)
	switch {
	case host == 0:
		return clusterMapping{kind: clusterZero}, nil
	case host%cs != 0:
		return clusterMapping{}, fmt.Errorf("%w: data cluster at %d is not on a cluster boundary", ErrQcow2Corrupt, host)
	case host >= q.fileSize:
		return clusterMapping{}, fmt.Errorf("%w: data cluster at %d is past the end of the file (%d bytes)", ErrQcow2Corrupt, host, q.fileSize)
	}
	if what := q.metadataAt(host, cs); what != "" {
		return clusterMapping{}, fmt.Errorf("%w: data cluster at %d overlaps %s", ErrQcow2Corrupt, host, what)
	}
	return clusterMapping{kind: clusterData, host: host, length: cs}, nil
}

// l2Table returns the L2 table at off, from the cache or the file. Its
// place was checked with the L1 table.
func (q *qcow2Reader) l2Table(off int64) ([]byte, error) {
	if t, ok := q.l2Cache.get(off); ok {
		return t, nil
	}
	t := make([]byte, q.h.clusterSize())
	if _, err := q.f.ReadAt(t, off); err != nil {
		return nil, fmt.Errorf("qcow2: read the L2 table at %d: %w", off, err)
	}
	q.l2Cache.add(off, t)
	return t, nil
}
