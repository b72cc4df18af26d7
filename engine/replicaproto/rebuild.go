package replicaproto

// The ops of version 3: a rebuild's (docs/design-data-plane.md, "Failure
// and rebuild"). An engine reads a healthy replica's layers from its
// server (OpOpenLayers, OpLayerExtents, OpReadLayer, OpCloseLayers) and
// writes them into a new replica through its server (OpBeginRebuild,
// OpWriteLayer, OpInstallChain). Every body is bounded before anything is
// allocated and every name is checked (replica.CheckSnapshotName); each op
// is checked against the connection's term, as those of version 2 are.

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/cadence-storage/longhorn-manager/engine/replica"
)

const (
	digestSize = sha256.Size
	// MaxExtents bounds the extents one OpLayerExtents answers with.
	MaxExtents = 4096
	// maxChainBody bounds a chain's metadata, OpOpenLayers' answer and
	// OpInstallChain's body, as a chain's listing is bounded.
	maxChainBody = MaxMessage
	// maxWriteLayerBody bounds OpWriteLayer's body.
	maxWriteLayerBody = 1 + replica.MaxSnapshotName + digestSize + MaxMessage
)

// rebuildBody is how many bytes of body follow the header of a
// rebuild's op, or why the connection is closed.
func rebuildBody(h header) (int, error) {
	limit := uint32(0)
	switch h.kind {
	case OpOpenLayers:
		limit = maxNameBody
	case OpLayerExtents, OpReadLayer:
		limit = 4 + maxNameBody
	case OpWriteLayer:
		limit = maxWriteLayerBody
	case OpInstallChain:
		limit = maxChainBody
	}
	if h.length > limit {
		return 0, fmt.Errorf("%w: op %d with a body of %d bytes, above %d", ErrProtocol, h.kind, h.length, limit)
	}
	return int(h.length), nil
}

// closeLayers ends the hold of the connection's layers, if any.
func (ss *session) closeLayers() {
	ss.lmu.Lock()
	defer ss.lmu.Unlock()
	if ss.layers != nil {
		ss.layers.Close()
		ss.layers = nil
	}
}

// heldLayers is the connection's held layers, for f, under the shared
// lock: OpCloseLayers, ordered, waits for the reads before it anyway.
func (ss *session) heldLayers(f func(*replica.Layers) result) result {
	ss.lmu.RLock()
	defer ss.lmu.RUnlock()
	if ss.layers == nil {
		return invalid("no layers are held on the connection: open them first")
	}
	return f(ss.layers)
}

// lengthAndName reads a body of a 4-byte count and a snapshot's name.
func lengthAndName(body []byte) (uint32, string, string) {
	if len(body) < 4 {
		return 0, "", "a body without its length"
	}
	name := string(body[4:])
	if err := replica.CheckSnapshotName(name); err != nil {
		return 0, "", err.Error()
	}
	return binary.BigEndian.Uint32(body), name, ""
}

// doRebuild carries out an op of version 3 for the session's engine.
func (ss *session) doRebuild(h header, body []byte) result {
	switch h.kind {
	case OpOpenLayers:
		name := string(body)
		if err := replica.CheckSnapshotName(name); err != nil {
			return invalid("%v", err)
		}
		l, err := ss.rep.OpenLayers(name)
		if err != nil {
			if errors.Is(err, replica.ErrNotFound) {
				return result{status: statusNotFound, body: []byte(err.Error())}
			}
			return failure(err)
		}
		out, _ := json.Marshal(l.Chain())
		if len(out) > maxChainBody {
			l.Close()
			return failure(fmt.Errorf("the chain's metadata takes %d bytes, above the %d the replica protocol carries", len(out), maxChainBody))
		}
		ss.closeLayers()
		ss.lmu.Lock()
		ss.layers = l
		ss.lmu.Unlock()
		ss.log.WithField("snapshot", name).Info("Replica protocol: holding the layers for a rebuild")
		return result{status: statusOK, body: out}
	case OpCloseLayers:
		ss.closeLayers()
		return result{status: statusOK}
	case OpLayerExtents:
		n, name, msg := lengthAndName(body)
		if msg != "" {
			return invalid("%s", msg)
		}
		if n == 0 || n > MaxExtents || h.offset > 1<<62 {
			return invalid("%d extents from %d: at most %d, within the volume", n, h.offset, MaxExtents)
		}
		return ss.heldLayers(func(l *replica.Layers) result {
			exts, next, err := l.Extents(name, int64(h.offset), int(n))
			if err != nil {
				return failure(err)
			}
			out := make([]byte, 8+16*len(exts))
			binary.BigEndian.PutUint64(out, uint64(next))
			for i, e := range exts {
				binary.BigEndian.PutUint64(out[8+16*i:], uint64(e.Start))
				binary.BigEndian.PutUint64(out[16+16*i:], uint64(e.End))
			}
			return result{status: statusOK, body: out}
		})
	case OpReadLayer:
		n, name, msg := lengthAndName(body)
		if msg != "" {
			return invalid("%s", msg)
		}
		if n > MaxMessage || h.offset > 1<<62 {
			return invalid("a layer's read of %d bytes at %d: at most %d, within the volume", n, h.offset, MaxMessage)
		}
		return ss.heldLayers(func(l *replica.Layers) result {
			out := getBuffer(digestSize + int(n))
			sum, err := l.ReadLayer(name, out[digestSize:], int64(h.offset))
			if err != nil {
				putBuffer(out)
				return failure(err)
			}
			copy(out, sum[:])
			return result{status: statusOK, body: out, pooled: true}
		})
	case OpBeginRebuild:
		if err := ss.rep.BeginRebuild(); err != nil {
			return failure(err)
		}
		ss.log.Info("Replica protocol: the replica is being rebuilt")
		return result{status: statusOK}
	case OpWriteLayer:
		name, sum, data, msg := parseWriteLayer(body)
		if msg != "" {
			return invalid("%s", msg)
		}
		if h.offset > 1<<62 {
			return invalid("a layer's write at %d", h.offset)
		}
		got, err := ss.rep.WriteLayer(name, data, int64(h.offset), sum)
		if err != nil {
			return failure(err)
		}
		return result{status: statusOK, body: got[:]}
	case OpInstallChain:
		var c replica.ChainMeta
		if err := json.Unmarshal(body, &c); err != nil {
			return invalid("a malformed chain")
		}
		if err := ss.rep.InstallChain(c); err != nil {
			return failure(err)
		}
		ss.log.WithField("snapshots", len(c.Snapshots)).Info("Replica protocol: installed the rebuilt chain")
		return result{status: statusOK}
	}
	return invalid("op %d", h.kind)
}

// parseWriteLayer reads OpWriteLayer's body, or says what is wrong.
func parseWriteLayer(body []byte) (name string, sum [digestSize]byte, data []byte, msg string) {
	if len(body) < 1 {
		return "", sum, nil, "an empty write of a layer"
	}
	n := int(body[0])
	if len(body) < 1+n+digestSize {
		return "", sum, nil, "a write of a layer shorter than its name and digest"
	}
	name = string(body[1 : 1+n])
	if err := replica.CheckSnapshotName(name); err != nil {
		return "", sum, nil, err.Error()
	}
	copy(sum[:], body[1+n:])
	return name, sum, body[1+n+digestSize:], ""
}

// CarriesRebuild tells whether the replica's server knows the ops of
// version 3: a rebuild from or to it.
func (c *Client) CarriesRebuild() bool { return c.Version() >= 3 }

func (c *Client) needsRebuild(op string) error {
	if c.CarriesRebuild() {
		return nil
	}
	return fmt.Errorf("%s: %w (version %d; a rebuild needs 3)", op, ErrOldServer, c.Version())
}

// OpenLayers holds the layers of every snapshot of the replica for a
// rebuild taken at snapshot top, until CloseLayers or the connection's
// end, and returns the chain's metadata.
func (c *Client) OpenLayers(top string) (replica.ChainMeta, error) {
	var chain replica.ChainMeta
	if err := c.needsRebuild("reading layers for a rebuild"); err != nil {
		return chain, err
	}
	body, err := nameBody(top)
	if err != nil {
		return chain, err
	}
	out, err := c.doCall(c.controlTimeout, OpOpenLayers, 0, uint32(len(body)), body, maxChainBody)
	if err != nil {
		return chain, err
	}
	if err := json.Unmarshal(out, &chain); err != nil || len(chain.Snapshots) > replica.MaxSnapshots {
		err = fmt.Errorf("%w: a malformed chain's metadata", ErrProtocol)
		c.fail(err)
		return chain, err
	}
	for _, s := range chain.Snapshots {
		if err := replica.CheckSnapshotName(s.Name); err != nil {
			err = fmt.Errorf("%w: the chain's metadata: %v", ErrProtocol, err)
			c.fail(err)
			return chain, err
		}
	}
	return chain, nil
}

// CloseLayers ends the hold of OpenLayers.
func (c *Client) CloseLayers() error {
	if err := c.needsRebuild("reading layers for a rebuild"); err != nil {
		return err
	}
	_, err := c.do(OpCloseLayers, 0, 0, nil)
	return err
}

func countAndName(n uint32, name string) ([]byte, error) {
	if err := replica.CheckSnapshotName(name); err != nil {
		return nil, err
	}
	return append(binary.BigEndian.AppendUint32(nil, n), name...), nil
}

// LayerExtents lists at most max (up to MaxExtents) data extents of
// snapshot name's held layer from from on, and where the next list
// starts: -1 once the layer is done.
func (c *Client) LayerExtents(name string, from int64, max int) ([]replica.Extent, int64, error) {
	if err := c.needsRebuild("reading layers for a rebuild"); err != nil {
		return nil, -1, err
	}
	if max <= 0 || max > MaxExtents || from < 0 {
		return nil, -1, fmt.Errorf("%d extents from %d: at most %d", max, from, MaxExtents)
	}
	body, err := countAndName(uint32(max), name)
	if err != nil {
		return nil, -1, err
	}
	out, err := c.doCall(c.timeout, OpLayerExtents, uint64(from), uint32(len(body)), body, uint32(8+16*max))
	if err != nil {
		return nil, -1, err
	}
	if len(out) < 8 || (len(out)-8)%16 != 0 {
		err = fmt.Errorf("%w: a malformed list of extents", ErrProtocol)
		c.fail(err)
		return nil, -1, err
	}
	next := int64(binary.BigEndian.Uint64(out))
	exts := make([]replica.Extent, (len(out)-8)/16)
	last := from
	for i := range exts {
		e := replica.Extent{Start: int64(binary.BigEndian.Uint64(out[8+16*i:])), End: int64(binary.BigEndian.Uint64(out[16+16*i:]))}
		// Nothing read from a peer is trusted: extents in order, within
		// the volume.
		if e.Start < last || e.End <= e.Start || e.End > c.Size() {
			err = fmt.Errorf("%w: extent %d to %d of a layer, after %d, in a volume of %d bytes", ErrProtocol, e.Start, e.End, last, c.Size())
			c.fail(err)
			return nil, -1, err
		}
		exts[i], last = e, e.End
	}
	if next != -1 && next < last {
		err = fmt.Errorf("%w: the next extents from %d, before %d", ErrProtocol, next, last)
		c.fail(err)
		return nil, -1, err
	}
	return exts, next, nil
}

// ReadLayer reads p (at most MaxMessage bytes) at off of snapshot name's
// held layer, and returns the SHA-256 the server read it with, once it is
// that of p.
func (c *Client) ReadLayer(name string, p []byte, off int64) ([digestSize]byte, error) {
	var sum [digestSize]byte
	if err := c.needsRebuild("reading layers for a rebuild"); err != nil {
		return sum, err
	}
	if len(p) > MaxMessage || off < 0 {
		return sum, fmt.Errorf("a layer's read of %d bytes at %d: at most %d", len(p), off, MaxMessage)
	}
	body, err := countAndName(uint32(len(p)), name)
	if err != nil {
		return sum, err
	}
	out, err := c.doCall(c.timeout, OpReadLayer, uint64(off), uint32(len(body)), body, uint32(digestSize+len(p)))
	if err != nil {
		return sum, err
	}
	if len(out) != digestSize+len(p) {
		err = fmt.Errorf("%w: a layer's read of %d bytes answered with %d", ErrProtocol, len(p), len(out)-digestSize)
		c.fail(err)
		return sum, err
	}
	copy(sum[:], out)
	copy(p, out[digestSize:])
	if sha256.Sum256(p) != sum {
		return sum, fmt.Errorf("layer of snapshot %s at %d: the data read is not what its SHA-256 says", name, off)
	}
	return sum, nil
}

// BeginRebuild marks the replica as being rebuilt.
func (c *Client) BeginRebuild() error {
	if err := c.needsRebuild("a rebuild"); err != nil {
		return err
	}
	_, err := c.do(OpBeginRebuild, 0, 0, nil)
	return err
}

// WriteLayer writes p (at most MaxMessage bytes), whose SHA-256 is sum,
// at off of snapshot name's layer on a replica being rebuilt, and returns
// the SHA-256 of what the layer holds there after.
func (c *Client) WriteLayer(name string, p []byte, off int64, sum [digestSize]byte) ([digestSize]byte, error) {
	var got [digestSize]byte
	if err := c.needsRebuild("a rebuild"); err != nil {
		return got, err
	}
	if err := replica.CheckSnapshotName(name); err != nil {
		return got, err
	}
	if len(p) > MaxMessage || off < 0 {
		return got, fmt.Errorf("a layer's write of %d bytes at %d: at most %d", len(p), off, MaxMessage)
	}
	body := make([]byte, 0, 1+len(name)+digestSize+len(p))
	body = append(append(append(append(body, byte(len(name))), name...), sum[:]...), p...)
	out, err := c.doCall(c.timeout, OpWriteLayer, uint64(off), uint32(len(body)), body, digestSize)
	if err != nil {
		return got, err
	}
	if len(out) != digestSize {
		err = fmt.Errorf("%w: a layer's write answered with %d bytes", ErrProtocol, len(out))
		c.fail(err)
		return got, err
	}
	copy(got[:], out)
	return got, nil
}

// InstallChain installs the chain's metadata on a replica being rebuilt,
// last: the rebuild's end (replica.InstallChain).
func (c *Client) InstallChain(chain replica.ChainMeta) error {
	if err := c.needsRebuild("a rebuild"); err != nil {
		return err
	}
	body, err := json.Marshal(chain)
	if err != nil {
		return err
	}
	if len(body) > maxChainBody {
		return fmt.Errorf("the chain's metadata takes %d bytes, above the %d the replica protocol carries", len(body), maxChainBody)
	}
	_, err = c.doCall(c.controlTimeout, OpInstallChain, 0, uint32(len(body)), body, 0)
	return err
}
