package replica

import (
	"encoding/json"
	"fmt"
	"os"

	"github.com/cadence-storage/longhorn-manager/internal/atomicfile"
)

const (
	volumeMetaFile = "volume.meta"
	// HeadName is what the writable top layer is called in snapshot lists.
	HeadName   = "volume-head"
	headPrefix = "volume-head-"
	snapPrefix = "volume-snap-"
	imgSuffix  = ".img"
)

// volumeMeta is the replica's one commit record: the head, its parent and
// every snapshot. Each change of the snapshot tree first adds files that
// nothing references yet, then rewrites this file atomically (the commit),
// then removes files nothing references any more. A crash therefore
// leaves the old tree or the new one, and opening the replica deletes the
// files neither references.
type volumeMeta struct {
	Size      int64 `json:"size"`
	BlockSize int64 `json:"blockSize"`
	// HeadIndex numbers head files, so a new head never reuses a name.
	HeadIndex  int                   `json:"headIndex"`
	HeadParent string                `json:"headParent"`
	Snapshots  map[string]*layerMeta `json:"snapshots"`
	// Backing is the read-only file under the oldest layer, if any.
	Backing *BackingFile `json:"backing,omitempty"`
	// Epoch orders the replicas of one volume by how current their data
	// is: when a replica fails, its engine raises the epoch of the
	// replicas that carry on before it acknowledges a write without it.
	// A replica whose epoch is below another's missed writes.
	Epoch uint64 `json:"epoch,omitempty"`
	// Term fences the engines that use the replica (term.go): the highest
	// term an engine opened it with, and that engine instance.
	Term       uint64 `json:"term,omitempty"`
	TermHolder string `json:"termHolder,omitempty"`
	// Rebuilding: the replica is being rebuilt (rebuild.go) and its
	// chain is not complete; no engine takes it for current.
	Rebuilding bool `json:"rebuilding,omitempty"`
}

// layerMeta describes one snapshot.
type layerMeta struct {
	// ID is the snapshot's identity, random and never reused: a name may
	// be taken again once its snapshot is purged, an ID may not. Empty
	// for a snapshot taken before IDs were recorded.
	ID          string            `json:"id,omitempty"`
	Parent      string            `json:"parent"`
	Removed     bool              `json:"removed"`
	UserCreated bool              `json:"userCreated"`
	Created     string            `json:"created"`
	Labels      map[string]string `json:"labels"`
	// Size is the volume's size when the snapshot was taken; 0 (a
	// snapshot taken before the volume first grew) means the volume's.
	Size int64 `json:"size,omitempty"`
}

func snapshotFile(name string) string { return snapPrefix + name + imgSuffix }

func headFile(index int) string { return fmt.Sprintf("%s%03d%s", headPrefix, index, imgSuffix) }

func readJSON(path string, v any) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(data, v); err != nil {
		return fmt.Errorf("%s is corrupt: %w", path, err)
	}
	return nil
}

// writeJSON replaces path atomically.
func writeJSON(path string, v any) error {
	data, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return atomicfile.WriteFile(path, data)
}
