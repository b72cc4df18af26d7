package replica

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// lockFile is held, with an exclusive flock, by the process that has the
// replica open, for as long as it has: a second engine on the same
// replica (another instance manager, one started by hand, the manager's
// own in-process engines beside an instance manager's) cannot open it,
// neither to write beside the first nor to tidy files the first still
// uses. The lock goes with the process: a crash leaves nothing to clear.
const lockFile = "replica.lock"

// ErrLocked marks a replica another open holds.
var ErrLocked = errors.New("the replica is open in another engine")

// lockDir takes the replica folder's lock, without waiting, and writes
// this process's id in the file, for the message of whoever finds it
// taken.
func lockDir(dir string) (*os.File, error) {
	f, err := os.OpenFile(filepath.Join(dir, lockFile), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open replica %s: %w", dir, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		holder, _ := os.ReadFile(f.Name())
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("open replica %s: %w (process %s holds it)", dir, ErrLocked, strings.TrimSpace(string(holder)))
		}
		return nil, fmt.Errorf("open replica %s: lock: %w", dir, err)
	}
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return f, nil
}
