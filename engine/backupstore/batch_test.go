package backupstore

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
)

// syncLog records what a FileDriver made durable: files by inode (a
// block is synced under its staged name and keeps its inode when renamed
// to its key) and folders by path.
type syncLog struct {
	mu    sync.Mutex
	files map[uint64]bool
	dirs  map[string]bool
}

func watchSyncs(t *testing.T, d *FileDriver) *syncLog {
	l := &syncLog{files: map[uint64]bool{}, dirs: map[string]bool{}}
	d.onSync = func(p string) {
		fi, err := os.Stat(p)
		if err != nil {
			t.Errorf("stat %s just synced: %v", p, err)
			return
		}
		l.mu.Lock()
		defer l.mu.Unlock()
		if fi.IsDir() {
			l.dirs[filepath.Clean(p)] = true
		} else {
			l.files[fi.Sys().(*syscall.Stat_t).Ino] = true
		}
	}
	return l
}

// unsynced lists the block files present at their keys whose content, or
// (with entries) whose entry in any folder up to the root, was not made
// durable.
func (l *syncLog) unsynced(root string, entries bool) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	_ = filepath.WalkDir(root, func(p string, e fs.DirEntry, err error) error {
		if err != nil || e.IsDir() || !strings.HasSuffix(p, ".blk") || strings.Contains(p, "/.staging/") {
			return nil
		}
		fi, err := os.Stat(p)
		if err != nil {
			return nil // renamed or removed meanwhile
		}
		if !l.files[fi.Sys().(*syscall.Stat_t).Ino] {
			out = append(out, p+" (content)")
		}
		for d := filepath.Dir(p); entries && d != filepath.Dir(filepath.Clean(root)); d = filepath.Dir(d) {
			if !l.dirs[d] {
				out = append(out, p+" (entry in "+d+")")
			}
		}
		return nil
	})
	return out
}

// configCheck is a FileDriver that, when a backup config is written,
// checks every block present is durable, as the config's readers trust.
type configCheck struct {
	*FileDriver
	log     *syncLog
	configs atomic.Int32
	bad     []string
}

func (c *configCheck) Write(key string, data []byte) error {
	if strings.Contains(key, "/backups/backup_") {
		c.configs.Add(1)
		c.bad = append(c.bad, c.log.unsynced(c.Root, true)...)
	}
	return c.FileDriver.Write(key, data)
}

// TestFileBackupBlocksAreDurableBeforeTheConfig: a file:// backup writes
// its blocks without waiting for each to reach the disk, yet every block,
// and its entry in every folder up to the root, is durable before the
// config naming it is written; and none appears at its key before its
// content is durable, so a crash never leaves a block a later backup
// would trust and reuse half written. Both with O_DIRECT and through the
// page cache.
func TestFileBackupBlocksAreDurableBeforeTheConfig(t *testing.T) {
	for _, direct := range []bool{true, false} {
		t.Run(fmt.Sprintf("O_DIRECT=%t", direct), func(t *testing.T) {
			root := t.TempDir()
			fd := &FileDriver{Root: root, noDirect: !direct}
			log := watchSyncs(t, fd)
			var early []string
			var mu sync.Mutex
			fd.syncHook = func(string) error {
				bad := log.unsynced(root, false)
				mu.Lock()
				defer mu.Unlock()
				early = append(early, bad...)
				return nil
			}
			d := &configCheck{FileDriver: fd, log: log}
			s := NewStore("file://"+root, d)
			data := distinctBlocks(7, 12)
			copy(data[5*BlockSize:], data[:BlockSize]) // a block twice: stored once
			for i, name := range []string{"b1", "b2"} {
				if i == 1 {
					copy(data[3*BlockSize:], random(8, 4096))
				}
				_, st, err := s.Backup(BackupRequest{Name: name, Volume: "vol", Snapshot: name, Source: &memSource{data: append([]byte(nil), data...)}, Concurrency: 3})
				if err != nil {
					t.Fatal(err)
				}
				if want := map[int]int{0: 11, 1: 1}[i]; st.BlocksUploaded != want {
					t.Errorf("backup %s uploaded %d blocks, want %d", name, st.BlocksUploaded, want)
				}
				mustRestore(t, s, "vol", name, data)
			}
			if d.configs.Load() != 2 || len(d.bad) > 0 || len(early) > 0 {
				t.Fatalf("%d configs written; blocks not durable when a config was written: %v; blocks at their key before their content was durable: %v", d.configs.Load(), d.bad, early)
			}
			if entries, err := os.ReadDir(filepath.Join(root, filepath.FromSlash(stagingKey("vol")))); err != nil || len(entries) != 0 {
				t.Fatalf("staging folder after the backups: %v, %v; want it empty", entries, err)
			}
		})
	}
}

// TestFileBackupInterruptedLeavesNoUntrustworthyBlock: a file:// backup
// stopped while its blocks are on their way to the disk (a crash, as far
// as the target can tell: the process would stop there) shows no backup,
// has put no block at its key that is not durable, leaves the rest in the
// staging folder only; a retry completes and restores, and a deletion
// removes what a crashed backup left staged.
func TestFileBackupInterruptedLeavesNoUntrustworthyBlock(t *testing.T) {
	root := t.TempDir()
	fd := &FileDriver{Root: root}
	log := watchSyncs(t, fd)
	var syncs atomic.Int32
	reached, crash := make(chan struct{}), make(chan struct{})
	fd.syncHook = func(string) error {
		if syncs.Add(1) == 4 {
			close(reached)
			<-crash
			return errors.New("the disk is gone")
		}
		return nil
	}
	s := NewStore("file://"+root, fd)
	data := distinctBlocks(9, 10)
	done := make(chan error, 1)
	go func() {
		_, _, err := s.Backup(BackupRequest{Name: "b1", Volume: "vol", Snapshot: "s1", Source: &memSource{data: data}})
		done <- err
	}()
	<-reached
	// Blocks are staged or in flight: none at its key is less than
	// durable (its folder entry may not be yet: lost in a crash, the
	// block is only missing, and uploaded again by the next backup).
	if bad := log.unsynced(root, false); len(bad) > 0 {
		t.Fatalf("while the backup runs, blocks at their key are not durable: %v", bad)
	}
	close(crash)
	if err := <-done; err == nil || !strings.Contains(err.Error(), "the disk is gone") {
		t.Fatalf("the interrupted backup: %v", err)
	}
	if bad := log.unsynced(root, false); len(bad) > 0 {
		t.Fatalf("after the interrupted backup, blocks at their key are not durable: %v", bad)
	}
	if l, err := s.List("vol"); err != nil || len(l) != 0 {
		t.Fatalf("the interrupted backup is listed: %v, %v", l, err)
	}
	// What a process that died would have left: staged blocks.
	left := filepath.Join(root, filepath.FromSlash(stagingKey("vol")), "backup-crashed")
	if err := os.MkdirAll(left, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(left, "1"), data[:4096], 0o644); err != nil {
		t.Fatal(err)
	}
	fd.syncHook = nil
	for _, name := range []string{"b2", "b3"} {
		if _, _, err := s.Backup(BackupRequest{Name: name, Volume: "vol", Snapshot: name, Source: &memSource{data: data}}); err != nil {
			t.Fatalf("backup %s after the interrupted one: %v", name, err)
		}
	}
	mustRestore(t, s, "vol", "b2", data)
	if err := s.Delete("vol", "b3"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(left); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("a deletion left what a crashed backup staged: %v", err)
	}
	mustRestore(t, s, "vol", "b2", data)
}

// TestFileWriteSyncsTheFoldersItMakes: a config written into folders that
// did not exist is durable with them: the entry of each, up to the root.
func TestFileWriteSyncsTheFoldersItMakes(t *testing.T) {
	root := t.TempDir()
	d := &FileDriver{Root: root}
	log := watchSyncs(t, d)
	key := backupCfgKey("vol", "b1")
	mustWrite(t, d, key, []byte("{}"))
	for dir := filepath.Dir(d.path(key)); ; dir = filepath.Dir(dir) {
		if !log.dirs[dir] {
			t.Errorf("%s was not synced", dir)
		}
		if dir == filepath.Clean(root) {
			break
		}
	}
}

// TestFileBackupReusingABlockSyncsItsFolders: a block found at its key may
// have been put there by another backup of the volume that has not synced
// its folders yet; a backup that reuses it makes them durable before its
// own config, or a crash could leave that config naming a block whose
// entry was lost.
func TestFileBackupReusingABlockSyncsItsFolders(t *testing.T) {
	root := t.TempDir()
	fd := &FileDriver{Root: root}
	log := watchSyncs(t, fd)
	d := &configCheck{FileDriver: fd, log: log}
	s := NewStore("file://"+root, d)
	data := distinctBlocks(13, 3)
	// Another backup's block: whole and durable at its key, its folders
	// (made for it) not synced yet.
	z, err := compress(CompressionLZ4, data[BlockSize:2*BlockSize], new(bytes.Buffer))
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(data[BlockSize : 2*BlockSize])
	p := fd.path(blockKey("vol", hex.EncodeToString(sum[:]), CompressionLZ4))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, z, 0o644); err != nil {
		t.Fatal(err)
	}
	fd.onSync(p)
	_, st, err := s.Backup(BackupRequest{Name: "b1", Volume: "vol", Snapshot: "s1", Source: &memSource{data: data}})
	if err != nil {
		t.Fatal(err)
	}
	if st.BlocksReused != 1 || st.BlocksUploaded != 2 {
		t.Fatalf("uploaded %d blocks and reused %d; want 2 and the one found", st.BlocksUploaded, st.BlocksReused)
	}
	if len(d.bad) > 0 {
		t.Fatalf("blocks not durable when the config was written: %v", d.bad)
	}
	mustRestore(t, s, "vol", "b1", data)
}
