package backingimage

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/cadence-storage/longhorn-manager/internal/atomicfile"
)

// Meta is what MetaFile records next to a complete file.
type Meta struct {
	Name     string `json:"name"`
	UUID     string `json:"uuid"`
	Size     int64  `json:"size"`
	Checksum string `json:"checksum"`
}

// WriteMeta records meta in folder, crash-safely.
func WriteMeta(folder string, meta Meta) error {
	data, err := json.Marshal(meta)
	if err != nil {
		return err
	}
	return atomicfile.WriteFile(filepath.Join(folder, MetaFile), data)
}

// ReadMeta reads the record of folder's file and checks that the data
// file is there with the recorded size.
func ReadMeta(folder string) (Meta, error) {
	var meta Meta
	data, err := os.ReadFile(filepath.Join(folder, MetaFile))
	if err != nil {
		return meta, err
	}
	if err := json.Unmarshal(data, &meta); err != nil {
		return meta, fmt.Errorf("%s is corrupt: %w", filepath.Join(folder, MetaFile), err)
	}
	st, err := os.Stat(filepath.Join(folder, DataFile))
	if err != nil {
		return meta, err
	}
	if st.Size() != meta.Size {
		return meta, fmt.Errorf("%w: %s holds %d bytes, its record says %d", ErrSizeMismatch, filepath.Join(folder, DataFile), st.Size(), meta.Size)
	}
	return meta, nil
}
