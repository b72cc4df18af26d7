// Package replicaproto is the replica protocol of
// docs/design-data-plane.md ("Replicas on other nodes"): how an engine
// reaches a replica that another process, on its node or another, has
// open. One connection per engine and replica, mutual TLS, framed binary
// messages with a request id, so that requests are pipelined and answered
// out of order. The first request opens the replica for one engine
// instance with a term (engine/replica's fence); every request after is
// checked against it, and fails with replica.ErrFenced once a newer engine
// took the replica.
package replicaproto

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/cadence-storage/longhorn-manager/engine/replica"
)

// The ops a request carries.
const (
	OpOpen  byte = 1 // the body is an OpenRequest; answered with an OpenReply
	OpRead  byte = 2 // offset, length; answered with length bytes
	OpWrite byte = 3 // offset, length, the body: the data
	OpSync  byte = 4 // everything acknowledged before it is durable
	OpTrim  byte = 5 // offset, length: the range's space given back
	// OpSnapshot's body is a SnapshotRequest: the snapshot is taken once
	// every request before it on the connection is done, and before any
	// after it is read.
	OpSnapshot byte = 6
	// OpSetEpoch carries the epoch in the offset field; ordered as
	// OpSnapshot is. The replica's data is synced before the epoch is
	// recorded (replica.SetEpoch).
	OpSetEpoch byte = 7
	// OpChain asks for the replica's snapshots and head, as
	// replica.Snapshots lists them, in JSON; ordered as OpSnapshot is.
	OpChain byte = 8

	// The ops of version 2 (ProtocolVersion), which a server of version 1
	// does not know: it closes the connection at an op it does not know,
	// so the client sends none of them to it (Client.Carries). Each is
	// checked against the connection's term in one step with the change
	// (replica.Owned), and ordered as OpSnapshot is.

	// OpMarkRemoved's body is the snapshot's name: it is marked removed
	// (replica.MarkRemoved).
	OpMarkRemoved byte = 9
	// OpRevert's body is the snapshot's name: the head becomes an empty
	// layer on it (replica.Revert).
	OpRevert byte = 10
	// OpPurge merges the removed snapshots into their children
	// (replica.Purge); answered with the purged snapshots' names, in JSON.
	OpPurge byte = 11
	// OpGrow carries the new size in the offset field (replica.Grow).
	OpGrow byte = 12
	// OpTrimKeeping is OpTrim with the snapshots a trim must keep
	// (replica.TrimKeeping): the offset, and a TrimRequest for its body.
	// It is I/O, not a change of the chain, and is not ordered: as a
	// trim, it runs beside the requests around it.
	OpTrimKeeping byte = 13

	// The ops of version 3, a rebuild's (rebuild.go), which a server of
	// version 2 does not know; each is checked against the connection's
	// term, as those of version 2 are.

	// OpOpenLayers' body is the rebuild's snapshot's name: the server
	// holds the layers of every snapshot for the connection
	// (replica.OpenLayers) and answers with the chain's metadata, a
	// replica.ChainMeta in JSON. Ordered.
	OpOpenLayers byte = 14
	// OpLayerExtents lists the data extents of a held layer from the
	// offset on: its body is the most to list (4 bytes) and the
	// snapshot's name; answered with where the next list starts (8 bytes,
	// all ones once the layer is done) and each extent's start and end (8
	// bytes each).
	OpLayerExtents byte = 15
	// OpReadLayer reads a held layer at the offset: its body is the
	// length (4 bytes, at most MaxMessage) and the snapshot's name;
	// answered with the data's SHA-256 and the data.
	OpReadLayer byte = 16
	// OpCloseLayers ends the hold of OpOpenLayers. Ordered.
	OpCloseLayers byte = 17
	// OpBeginRebuild marks the replica, new and empty, as being rebuilt
	// (replica.BeginRebuild). Ordered.
	OpBeginRebuild byte = 18
	// OpWriteLayer writes into a layer of a replica being rebuilt at the
	// offset: its body is the name's length (1 byte), the name, the
	// data's SHA-256 and the data (at most MaxMessage); answered with the
	// SHA-256 of what the layer holds there after (replica.WriteLayer).
	OpWriteLayer byte = 19
	// OpInstallChain's body is a replica.ChainMeta in JSON: installed
	// last, it ends the rebuild (replica.InstallChain). Ordered.
	OpInstallChain byte = 20
)

// ProtocolVersion is the version of the protocol this package speaks: 1,
// the first (OPEN to OpChain), then 2, which adds OpMarkRemoved to
// OpTrimKeeping, then 3, which adds a rebuild's ops (OpOpenLayers to
// OpInstallChain). An OpenReply that says no version is of version 1.
const ProtocolVersion = 3

// The statuses a reply carries; the body of a failure is its message.
const (
	statusOK      byte = 0
	statusError   byte = 1
	statusFenced  byte = 2
	statusInvalid byte = 3
	// statusNotFound (version 2) answers a removal or a revert of a
	// snapshot the replica does not have: replica.ErrNotFound.
	statusNotFound byte = 4
)

const (
	requestMagic = 0x4c485251 // "LHRQ"
	replyMagic   = 0x4c485250 // "LHRP"
	headerSize   = 4 + 1 + 3 + 8 + 8 + 4
	// MaxMessage bounds the body of one message: a larger read or write
	// is split by the client.
	MaxMessage = 4 << 20
	// maxOpenBody bounds an OpenRequest's body.
	maxOpenBody = 4 << 10
	// maxErrorBody bounds a failure's message.
	maxErrorBody = 4 << 10
	// maxSnapshotBody bounds a SnapshotRequest: its labels are bounded by
	// replica.CheckLabels (64 of at most 253 + 1024 bytes, which JSON may
	// escape to six times their length).
	maxSnapshotBody = 512 << 10
	// maxNameBody bounds a snapshot's name (replica.MaxSnapshotName
	// bytes): a longer one closes the connection, one of a name the
	// replica's rules refuse is answered statusInvalid.
	maxNameBody = replica.MaxSnapshotName
	// maxNamesBody bounds a list of snapshot names, a purge's answer or a
	// trim's keep list: at most replica.MaxSnapshots names of at most
	// replica.MaxSnapshotName bytes, each quoted and followed by a comma
	// in JSON (no name the replica allows needs escaping), with room for
	// a TrimRequest's length.
	maxNamesBody = replica.MaxSnapshots*(replica.MaxSnapshotName+3) + 64
	// MaxGrowSize bounds the size an OpGrow asks for (64 TiB): a replica
	// keeps a map of two bytes per 4 KiB block in memory, 32 GiB at that
	// size, far beyond what an instance manager may hold; a larger size
	// is answered statusInvalid before anything is allocated.
	MaxGrowSize = 1 << 46
	// A chain's answer is bounded by MaxMessage: 250 snapshots with a few
	// labels each take tens of KiB; a chain whose labels would take more
	// is refused with an error saying so.
	// MaxInFlight and MaxInFlightBytes bound what one connection has in
	// flight: the server reads no further request until it is below
	// them (back pressure, not buffering).
	MaxInFlight      = 64
	MaxInFlightBytes = 64 << 20
	// DefaultTimeout is each request's deadline (Longhorn's
	// engine-replica-timeout, 8 s by default): past it, the client drops
	// the connection, as an engine drops a replica whose I/O fails.
	DefaultTimeout = 8 * time.Second
	// DefaultControlTimeout is the deadline of a purge and of a grow
	// (ControlTimeout). A purge copies the data of each removed snapshot
	// into its child, some 30 to 50 ms per 16 MiB on a local disk
	// (docs/benchmarks.md): a removed snapshot of 100 GiB takes some four
	// minutes, so 10 minutes lets a snapshot of about twice that merge on
	// a disk that is a little slower than measured. A grow extends the
	// head and syncs it, which a busy disk may hold up for longer than an
	// I/O's deadline. Past the deadline the client drops the connection
	// as it does at an I/O's; the engine holds the volume's writes
	// meanwhile either way, as a purge or a grow of a replica of its own
	// process does.
	DefaultControlTimeout = 10 * time.Minute
)

// ErrProtocol marks a peer that broke the protocol: a bad magic, an op or
// length out of bounds, a reply to no request. The connection is closed.
var ErrProtocol = errors.New("replica protocol")

// ErrTimeout marks a request that was not answered within its deadline:
// the connection is closed.
var ErrTimeout = errors.New("the replica did not answer in time")

// OpenRequest is what an engine opens a replica with.
type OpenRequest struct {
	// VolumeUID is the UID of the volume the replica belongs to: a
	// replica of another volume (one deleted and made again under its
	// name) is not opened.
	VolumeUID string `json:"volumeUID"`
	// Replica is the replica's name.
	Replica string `json:"replica"`
	// Engine is the engine instance, unique for each start of an engine.
	Engine string `json:"engine"`
	// Term is above every term the engine's replicas hold.
	Term uint64 `json:"term"`
	// Version is the protocol version the client speaks (ProtocolVersion);
	// a server of version 1 ignores it, a client of version 1 sends none.
	Version int `json:"version,omitempty"`
}

// OpenReply is what the replica says of itself once opened.
type OpenReply struct {
	Size  int64  `json:"size"`
	Epoch uint64 `json:"epoch"`
	Term  uint64 `json:"term"`
	// Version is the protocol version the server speaks; a server of
	// version 1 says none (0).
	Version int `json:"version,omitempty"`
	// Rebuilding: the replica is being rebuilt, its chain not complete
	// (replica.Rebuilding); an engine starts it ERR. Version 3.
	Rebuilding bool `json:"rebuilding,omitempty"`
}

// version is the server's protocol version, as its reply says.
func (r OpenReply) version() int {
	if r.Version <= 0 {
		return 1
	}
	return r.Version
}

// TrimRequest is an OpTrimKeeping's body: the range's length (from the
// request's offset) and the snapshots the trim keeps as if a view read
// them, by name.
type TrimRequest struct {
	Length uint64   `json:"length"`
	Keep   []string `json:"keep,omitempty"`
}

// SnapshotRequest is the snapshot an OpSnapshot takes
// (replica.CreateSnapshotWithID): every replica of an engine gets the
// same name, ID, time and labels.
type SnapshotRequest struct {
	Name        string            `json:"name"`
	ID          string            `json:"id"`
	UserCreated bool              `json:"userCreated"`
	Created     time.Time         `json:"created"`
	Labels      map[string]string `json:"labels,omitempty"`
}

// header is a message's fixed part: a request's op or a reply's status in
// kind.
type header struct {
	magic  uint32
	kind   byte
	id     uint64
	offset uint64
	length uint32
}

func (h header) encode() []byte {
	b := make([]byte, headerSize)
	h.put(b)
	return b
}

// put encodes the header into b, of at least headerSize bytes.
func (h header) put(b []byte) {
	_ = b[headerSize-1]
	binary.BigEndian.PutUint32(b[0:], h.magic)
	b[4] = h.kind
	b[5], b[6], b[7] = 0, 0, 0
	binary.BigEndian.PutUint64(b[8:], h.id)
	binary.BigEndian.PutUint64(b[16:], h.offset)
	binary.BigEndian.PutUint32(b[24:], h.length)
}

func readHeader(r io.Reader, magic uint32) (header, error) {
	var b [headerSize]byte
	if _, err := io.ReadFull(r, b[:]); err != nil {
		return header{}, err
	}
	h := header{magic: binary.BigEndian.Uint32(b[0:]), kind: b[4], id: binary.BigEndian.Uint64(b[8:]),
		offset: binary.BigEndian.Uint64(b[16:]), length: binary.BigEndian.Uint32(b[24:])}
	if h.magic != magic {
		return header{}, fmt.Errorf("%w: bad magic %#x", ErrProtocol, h.magic)
	}
	if b[5] != 0 || b[6] != 0 || b[7] != 0 {
		return header{}, fmt.Errorf("%w: reserved bytes set", ErrProtocol)
	}
	return h, nil
}

// requestBody is how many bytes of body follow a request's header: its
// data for a write, an open's or a snapshot's request, nothing else.
func requestBody(h header) (int, error) {
	switch h.kind {
	case OpOpen:
		if h.length > maxOpenBody {
			return 0, fmt.Errorf("%w: an open of %d bytes, above %d", ErrProtocol, h.length, maxOpenBody)
		}
		return int(h.length), nil
	case OpWrite:
		if h.length > MaxMessage {
			return 0, fmt.Errorf("%w: a write of %d bytes, above %d", ErrProtocol, h.length, MaxMessage)
		}
		return int(h.length), nil
	case OpRead, OpTrim:
		if h.kind == OpRead && h.length > MaxMessage {
			return 0, fmt.Errorf("%w: a read of %d bytes, above %d", ErrProtocol, h.length, MaxMessage)
		}
		return 0, nil
	case OpSnapshot:
		if h.length > maxSnapshotBody {
			return 0, fmt.Errorf("%w: a snapshot of %d bytes, above %d", ErrProtocol, h.length, maxSnapshotBody)
		}
		return int(h.length), nil
	case OpSync, OpSetEpoch, OpChain:
		return 0, nil
	case OpPurge, OpGrow:
		if h.length != 0 {
			return 0, fmt.Errorf("%w: op %d with a length of %d, not 0", ErrProtocol, h.kind, h.length)
		}
		return 0, nil
	case OpMarkRemoved, OpRevert:
		if h.length > maxNameBody {
			return 0, fmt.Errorf("%w: a snapshot's name of %d bytes, above %d", ErrProtocol, h.length, maxNameBody)
		}
		return int(h.length), nil
	case OpTrimKeeping:
		if h.length > maxNamesBody {
			return 0, fmt.Errorf("%w: a trim's keep list of %d bytes, above %d", ErrProtocol, h.length, maxNamesBody)
		}
		return int(h.length), nil
	case OpOpenLayers, OpLayerExtents, OpReadLayer, OpCloseLayers, OpBeginRebuild, OpWriteLayer, OpInstallChain:
		return rebuildBody(h)
	}
	return 0, fmt.Errorf("%w: unknown op %d", ErrProtocol, h.kind)
}

// ordered tells whether a request runs once every request before it on
// the connection is done, and before the next is read: those that say
// something of all the writes before them.
func ordered(op byte) bool {
	switch op {
	case OpSync, OpSnapshot, OpSetEpoch, OpChain, OpMarkRemoved, OpRevert, OpPurge, OpGrow,
		OpOpenLayers, OpCloseLayers, OpBeginRebuild, OpInstallChain:
		return true
	}
	return false
}
