package backupstore

import (
	"context"
	"strings"
	"sync"
	"testing"
)

// FuzzDecodeBackup: a backup config from the target never panics the
// decoder, and one it accepts is safe to use: every block key stays in the
// volume's folder and every block lies inside the volume.
func FuzzDecodeBackup(f *testing.F) {
	sum := strings.Repeat("ab", 32)
	f.Add([]byte(`{"name":"b1","volumeName":"vol","volumeSize":4194304,"compression":"gzip","blocks":[{"offset":0,"checksum":"` + sum + `"},{"offset":2097152,"checksum":"` + sum + `"}]}`))
	f.Add([]byte(`{"name":"b1","volumeName":"vol","volumeSize":9223372036854775807,"compression":"gzip","blocks":[{"offset":9223372036852678656,"checksum":""}]}`))
	f.Add([]byte(`{"name":"b1","volumeName":"vol","volumeSize":1,"compression":"gzip","blocks":[{"offset":-2097152,"checksum":"` + sum + `"}]}`))
	f.Add([]byte(`{"name":"b1","volumeName":"vol","labels":{"a":"b"},"createdAt":"x"}`))
	f.Add([]byte(`null`))
	f.Fuzz(func(t *testing.T, data []byte) {
		info, err := decodeBackup(data, "vol", "b1")
		if err != nil {
			return
		}
		prev := int64(-1)
		for _, ref := range info.Blocks {
			key := blockKey("vol", ref.Checksum, info.Compression)
			if !strings.HasPrefix(key, volumeKey("vol")+"/blocks/") || strings.Contains(key, "..") {
				t.Fatalf("accepted block key %q", key)
			}
			if ref.Offset < 0 || ref.Offset >= info.VolumeSize || ref.Offset%BlockSize != 0 || ref.Offset <= prev {
				t.Fatalf("accepted block offset %d in a volume of %d", ref.Offset, info.VolumeSize)
			}
			prev = ref.Offset
		}
		if info.VolumeSize <= 0 || info.VolumeSize > MaxVolumeSize {
			t.Fatalf("accepted volume size %d", info.VolumeSize)
		}
	})
}

// FuzzDecodeVolume: a volume record never panics the decoder, and the
// last backup it names is a name that stays in the volume's folder.
func FuzzDecodeVolume(f *testing.F) {
	f.Add([]byte(`{"name":"vol","size":4194304,"lastBackupName":"backup-1"}`))
	f.Add([]byte(`{"name":"vol","size":-1,"lastBackupName":"../x"}`))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, data []byte) {
		v, err := decodeVolume(data, "vol")
		if err != nil {
			return
		}
		if v.LastBackupName != "" && (strings.Contains(v.LastBackupName, "/") || strings.HasPrefix(v.LastBackupName, ".")) {
			t.Fatalf("accepted last backup %q", v.LastBackupName)
		}
	})
}

// FuzzParseURL: a backup URL from a user never panics the parser, and the
// names it yields stay in the target.
func FuzzParseURL(f *testing.F) {
	f.Add("file:///t?backup=b1&volume=vol")
	f.Add("s3://bucket@us-east-1/path?backup=backup-1&volume=v")
	f.Add("file:///t?backup=..&volume=%2e%2e%2fetc")
	f.Fuzz(func(t *testing.T, u string) {
		_, volume, backup, err := ParseURL(u)
		if err != nil {
			return
		}
		for _, n := range []string{volume, backup} {
			if strings.Contains(n, "/") || strings.HasPrefix(n, ".") || n == "" {
				t.Fatalf("ParseURL(%q) yields the name %q", u, n)
			}
		}
	})
}

// FuzzVerify: a drill of a backup config and a block from the target,
// both untrusted, never panics nor fails to finish; it reports the block
// it reads bad unless its content hashes to its name.
func FuzzVerify(f *testing.F) {
	sum := strings.Repeat("ab", 32)
	f.Add([]byte(`{"name":"b1","volumeName":"vol","volumeSize":4194304,"compression":"lz4","blocks":[{"offset":0,"checksum":"`+sum+`"}]}`), []byte("\x04\x22\x4d\x18garbage"))
	f.Add([]byte(`{"name":"b1","volumeName":"vol","volumeSize":2097152,"compression":"gzip","snapshotDigest":"sha256:`+sum+`","blocks":[{"offset":0,"checksum":"`+sum+`"},{"offset":0,"checksum":"`+sum+`"}]}`), []byte("\x1f\x8b\x08\x00"))
	f.Add([]byte(`{"name":"b1","volumeName":"vol","volumeSize":1,"compression":"none","blocks":[{"offset":0,"checksum":"`+sum+`"}]}`), []byte{})
	f.Add([]byte(`{"name":"b1","volumeName":"vol","volumeSize":1,"compression":"none"}`), []byte("x"))
	f.Fuzz(func(t *testing.T, config, block []byte) {
		d := &memDriver{objects: map[string][]byte{}}
		s := NewStore("mem://fuzz", d)
		if err := d.Write(backupCfgKey("vol", "b1"), config); err != nil {
			t.Fatal(err)
		}
		for _, m := range []string{CompressionLZ4, CompressionGzip, CompressionNone} {
			if err := d.Write(blockKey("vol", sum, m), block); err != nil {
				t.Fatal(err)
			}
		}
		res, err := s.NewVerifier(2).Verify(context.Background(), "vol", "b1")
		if err != nil {
			return
		}
		if res.ConfigError == "" && res.Blocks > 0 && len(res.BadBlocks) == 0 {
			t.Fatalf("a drill passed the block %q as %s", block, sum)
		}
	})
}

// memDriver keeps objects in memory, for fuzzing: a file system's fsyncs
// would make each run cost milliseconds.
type memDriver struct {
	mu      sync.Mutex
	objects map[string][]byte
}

func (d *memDriver) Write(key string, data []byte) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.objects[key] = append([]byte(nil), data...)
	return nil
}

func (d *memDriver) Read(key string, limit int64) ([]byte, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	data, ok := d.objects[key]
	switch {
	case !ok:
		return nil, ErrNotExist
	case int64(len(data)) > limit:
		return nil, tooLarge(key, int64(len(data)), limit)
	}
	return append([]byte(nil), data...), nil
}

func (d *memDriver) Exists(key string) (bool, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	_, ok := d.objects[key]
	return ok, nil
}

func (d *memDriver) List(prefix string) ([]string, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	prefix = strings.TrimSuffix(prefix, "/") + "/"
	seen := map[string]bool{}
	var out []string
	for k := range d.objects {
		if rest, ok := strings.CutPrefix(k, prefix); ok {
			child := prefix + strings.SplitN(rest, "/", 2)[0]
			if !seen[child] {
				seen[child] = true
				out = append(out, child)
			}
		}
	}
	return out, nil
}

func (d *memDriver) Delete(key string) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	delete(d.objects, key)
	return nil
}
