package systembackup

import (
	"crypto/sha512"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/cadence-storage/longhorn-manager/engine/backupstore"
)

// The layout of a system backup in a target, as Longhorn's.
const (
	SubDirectory = "system-backups"
	ConfigFile   = "system-backup.cfg"
	ZipFile      = "system-backup.zip"

	// MaxArchiveSize bounds the zip read from a target; MaxConfigSize its
	// record.
	MaxArchiveSize = 64 << 20
	MaxConfigSize  = 64 << 10
)

// Config is system-backup.cfg, with Longhorn's field names.
type Config struct {
	Name              string
	LonghornVersion   string
	LonghornGitCommit string
	BackupTargetURL   string
	ManagerImage      string
	EngineImage       string
	CreatedAt         time.Time
	Checksum          string
}

func rootKey() string { return "backupstore/" + SubDirectory }

func dirKey(version, name string) string { return rootKey() + "/" + version + "/" + name }

// ConfigKey and ZipKey are where a system backup's record and archive are.
func ConfigKey(version, name string) string { return dirKey(version, name) + "/" + ConfigFile }

// ZipKey is where a system backup's archive is.
func ZipKey(version, name string) string { return dirKey(version, name) + "/" + ZipFile }

// CheckName refuses a name or version that cannot be a directory of the
// layout: empty, not a DNS subdomain (names) or holding a slash or dot
// segment (versions).
func CheckName(name string) error {
	if errs := validation.IsDNS1123Subdomain(name); len(errs) > 0 {
		return fmt.Errorf("system backup name %q: %s", name, strings.Join(errs, "; "))
	}
	return nil
}

// CheckVersion refuses a version that cannot be one directory.
func CheckVersion(version string) error {
	if version == "" || len(version) > 128 || version == "." || version == ".." || strings.ContainsAny(version, "/\\\x00") {
		return fmt.Errorf("system backup version %q: must be one path segment", version)
	}
	return nil
}

// Checksum is the SHA-512 of an archive, lower-case hex, as Longhorn's.
func Checksum(zip []byte) string {
	sum := sha512.Sum512(zip)
	return hex.EncodeToString(sum[:])
}

// Upload writes the archive, then its record: a record is only ever
// found beside a whole archive. A system backup of the same name and
// version already in the target is not overwritten, unless it is this
// one (the same creation time: an upload started again); nor is one
// whose record cannot be read.
func Upload(d backupstore.Driver, cfg Config, zip []byte) error {
	if err := CheckName(cfg.Name); err != nil {
		return err
	}
	if err := CheckVersion(cfg.LonghornVersion); err != nil {
		return err
	}
	existing, err := LoadConfig(d, cfg.LonghornVersion, cfg.Name)
	switch {
	case errors.Is(err, backupstore.ErrNotExist):
	case errors.Is(err, ErrMalformed):
		return fmt.Errorf("%w (%v): it is left as it is; choose another name", ErrOther, err)
	case err != nil:
		return err
	case !sameBackup(existing, cfg.CreatedAt):
		return fmt.Errorf("%w (made %s): it is left as it is; choose another name", ErrOther, existing.CreatedAt.UTC().Format(time.RFC3339))
	}
	cfg.Checksum = Checksum(zip)
	data, err := json.Marshal(cfg)
	if err != nil {
		return err
	}
	if err := d.Write(ZipKey(cfg.LonghornVersion, cfg.Name), zip); err != nil {
		return fmt.Errorf("write %s: %w", ZipFile, err)
	}
	if err := d.Write(ConfigKey(cfg.LonghornVersion, cfg.Name), data); err != nil {
		return fmt.Errorf("write %s: %w", ConfigFile, err)
	}
	return nil
}

// List returns the system backups in a target, name to version. A name
// under two versions is kept at the greater version (by string order,
// so that the answer does not depend on the listing's); an entry that
// is not a valid name or version is left out.
func List(d backupstore.Driver) (map[string]string, error) {
	versions, err := d.List(rootKey())
	if errors.Is(err, backupstore.ErrNotExist) {
		return map[string]string{}, nil
	}
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, v := range versions {
		v = path.Base(strings.TrimSuffix(v, "/"))
		if CheckVersion(v) != nil {
			continue
		}
		names, err := d.List(rootKey() + "/" + v)
		if errors.Is(err, backupstore.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, err
		}
		for _, n := range names {
			n = path.Base(strings.TrimSuffix(n, "/"))
			if CheckName(n) != nil {
				continue
			}
			if old, ok := out[n]; !ok || v > old {
				out[n] = v
			}
		}
	}
	return out, nil
}

// LoadConfig reads and checks a system backup's record: it must name
// the backup and version it was found under and carry a checksum.
func LoadConfig(d backupstore.Driver, version, name string) (*Config, error) {
	if err := CheckName(name); err != nil {
		return nil, err
	}
	if err := CheckVersion(version); err != nil {
		return nil, err
	}
	data, err := d.Read(ConfigKey(version, name), MaxConfigSize)
	if err != nil {
		return nil, err
	}
	var cfg Config
	if err := json.Unmarshal(data, &cfg); err != nil {
		return nil, fmt.Errorf("%w: %s of system backup %s: %v", ErrMalformed, ConfigFile, name, err)
	}
	if cfg.Name != name || cfg.LonghornVersion != version {
		return nil, fmt.Errorf("%w: %s of system backup %s names %q version %q, not the directory it is in", ErrMalformed, ConfigFile, name, cfg.Name, cfg.LonghornVersion)
	}
	if len(cfg.Checksum) != 2*sha512.Size {
		return nil, fmt.Errorf("%w: %s of system backup %s: Checksum %q is not a SHA-512", ErrMalformed, ConfigFile, name, cfg.Checksum)
	}
	return &cfg, nil
}

// ErrMalformed is a record that cannot be used.
var ErrMalformed = errors.New("malformed")

// ErrOther is a system backup in the target that is not the one asked
// about: another of the same name and version (another creation time),
// or one whose record is malformed. It is left as it is.
var ErrOther = errors.New("another system backup of that name is in the target")

// sameBackup tells whether a record is of the system backup made at
// createdAt (to the second, as Kubernetes keeps times).
func sameBackup(cfg *Config, createdAt time.Time) bool {
	return cfg.CreatedAt.Truncate(time.Second).Equal(createdAt.Truncate(time.Second))
}

// Download reads a system backup's archive and checks it against its
// record's checksum.
func Download(d backupstore.Driver, cfg *Config) ([]byte, error) {
	zip, err := d.Read(ZipKey(cfg.LonghornVersion, cfg.Name), MaxArchiveSize)
	if err != nil {
		return nil, fmt.Errorf("read %s of system backup %s: %w", ZipFile, cfg.Name, err)
	}
	if got := Checksum(zip); got != cfg.Checksum {
		return nil, fmt.Errorf("%s of system backup %s: checksum %s, its %s says %s", ZipFile, cfg.Name, got, ConfigFile, cfg.Checksum)
	}
	return zip, nil
}

// Delete removes the record, then the archive, of the system backup
// made at createdAt: a record is never left without its archive. One of
// the same name made at another time, or whose record is malformed, is
// another's: ErrOther, and it is left as it is. None there is no error.
func Delete(d backupstore.Driver, version, name string, createdAt time.Time) error {
	cfg, err := LoadConfig(d, version, name)
	switch {
	case errors.Is(err, backupstore.ErrNotExist):
		return nil
	case errors.Is(err, ErrMalformed):
		return fmt.Errorf("%w (%v)", ErrOther, err)
	case err != nil:
		return err
	case !sameBackup(cfg, createdAt):
		return fmt.Errorf("%w (made %s, not %s)", ErrOther, cfg.CreatedAt.UTC().Format(time.RFC3339), createdAt.UTC().Format(time.RFC3339))
	}
	for _, key := range []string{ConfigKey(version, name), ZipKey(version, name)} {
		if err := d.Delete(key); err != nil && !errors.Is(err, backupstore.ErrNotExist) {
			return fmt.Errorf("delete %s: %w", key, err)
		}
	}
	return nil
}
