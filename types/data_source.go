package types

import (
	"fmt"
	"regexp"
	"strings"
)

// A volume's spec.dataSource, Longhorn's: the volume is made from another
// volume's data, vol://<volume> (a snapshot of it taken for the clone) or
// snap://<volume>/<snapshot> (that snapshot).
const (
	DataSourceVolumePrefix   = "vol://"
	DataSourceSnapshotPrefix = "snap://"
)

// The names a data source may hold: a volume's (Longhorn's rule) and a
// snapshot's (the engine's), at most 63 characters.
var (
	dataSourceVolumePattern   = regexp.MustCompile(`^[a-z0-9][a-z0-9_.-]{0,62}$`)
	dataSourceSnapshotPattern = regexp.MustCompile(`^[a-zA-Z0-9][a-zA-Z0-9_.-]{0,62}$`)
)

// LabelSnapshotForCloning marks the snapshot of a source volume taken for
// a vol:// clone; its value is the clone's name. Longhorn's key.
const LabelSnapshotForCloning = "longhorn.io/for-cloning-volume"

// DataSource is a parsed spec.dataSource.
type DataSource struct {
	Volume string
	// Snapshot is empty for vol://: the clone takes a snapshot of its own.
	Snapshot string
}

// String is the spec.dataSource that names d.
func (d DataSource) String() string {
	if d.Snapshot == "" {
		return DataSourceVolumePrefix + d.Volume
	}
	return DataSourceSnapshotPrefix + d.Volume + "/" + d.Snapshot
}

// ParseDataSource reads a spec.dataSource, vol://<volume> or
// snap://<volume>/<snapshot>; the error says which rule it breaks.
func ParseDataSource(s string) (DataSource, error) {
	var d DataSource
	switch {
	case strings.HasPrefix(s, DataSourceVolumePrefix):
		d.Volume = strings.TrimPrefix(s, DataSourceVolumePrefix)
		if strings.Contains(d.Volume, "/") {
			return DataSource{}, fmt.Errorf("%q: vol:// names one volume, vol://<volume>", s)
		}
	case strings.HasPrefix(s, DataSourceSnapshotPrefix):
		rest := strings.TrimPrefix(s, DataSourceSnapshotPrefix)
		var ok bool
		if d.Volume, d.Snapshot, ok = strings.Cut(rest, "/"); !ok || strings.Contains(d.Snapshot, "/") {
			return DataSource{}, fmt.Errorf("%q: snap:// names a volume and one of its snapshots, snap://<volume>/<snapshot>", s)
		}
		if !dataSourceSnapshotPattern.MatchString(d.Snapshot) || d.Snapshot == "volume-head" {
			return DataSource{}, fmt.Errorf("%q: snapshot name %q must be 1 to 63 letters, digits, '.', '_' or '-', starting with a letter or digit, and not volume-head", s, d.Snapshot)
		}
	default:
		return DataSource{}, fmt.Errorf("%q: must be vol://<volume> or snap://<volume>/<snapshot>", s)
	}
	if !dataSourceVolumePattern.MatchString(d.Volume) {
		return DataSource{}, fmt.Errorf("%q: volume name %q must be 1 to 63 lower-case letters, digits, '.', '_' or '-', starting with a letter or digit", s, d.Volume)
	}
	return d, nil
}
