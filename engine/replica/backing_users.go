package replica

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
)

// ReplicasFolder is the folder of a disk that holds its replicas, a folder
// each: <disk>/replicas/<data directory name>.
const ReplicasFolder = "replicas"

// maxMetaSize bounds what BackingFileUsers reads of a replica's record:
// a real one holds the snapshot tree, a few KiB.
const maxMetaSize = 4 << 20

// BackingFileUsers names the replica folders under replicasDir (a disk's
// replicas folder) whose replica starts from the backing file at
// backingPath, as each replica's own record says: what must keep the file.
// A folder without a record (a replica never created) uses nothing; one
// whose record cannot be read is counted as a user, since keeping a file
// is safe and deleting it under a replica is not.
func BackingFileUsers(replicasDir, backingPath string) ([]string, error) {
	entries, err := os.ReadDir(replicasDir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	want := filepath.Clean(backingPath)
	var users []string
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		b, err := recordedBacking(filepath.Join(replicasDir, e.Name(), volumeMetaFile))
		switch {
		case errors.Is(err, fs.ErrNotExist):
		case err != nil:
			users = append(users, fmt.Sprintf("%s (its record cannot be read: %v)", e.Name(), err))
		case b != nil && filepath.Clean(b.Path) == want:
			users = append(users, e.Name())
		}
	}
	sort.Strings(users)
	return users, nil
}

// recordedBacking reads the backing file a replica record names, if any.
func recordedBacking(path string) (*BackingFile, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxMetaSize+1))
	if err != nil {
		return nil, err
	}
	if len(data) > maxMetaSize {
		return nil, fmt.Errorf("larger than %d bytes", maxMetaSize)
	}
	var meta struct {
		Backing *BackingFile `json:"backing"`
	}
	if err := json.Unmarshal(data, &meta); err != nil {
		return nil, err
	}
	return meta.Backing, nil
}
