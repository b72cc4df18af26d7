package csi

import (
	"fmt"
	"strings"
)

// A CSI snapshot is a Longhorn snapshot of a volume or a backup in the
// backup target, named by a handle as Longhorn's driver names them, so
// content made by one driver is read by the other:
// snap://<volume>/<snapshot> and bak://<volume>/<backup>.
const (
	snapshotTypeSnap = "snap"
	snapshotTypeBak  = "bak"
	// snapshotTypeBakOld is Longhorn's older name of bak, read in handles
	// and in the type parameter.
	snapshotTypeBakOld = "bs"

	// paramSnapshotType is the VolumeSnapshotClass parameter that picks
	// what a CSI snapshot is; without it, a backup (Longhorn's default).
	paramSnapshotType = "type"
)

// snapshotHandle is a parsed CSI snapshot ID.
type snapshotHandle struct {
	// kind is snapshotTypeSnap or snapshotTypeBak.
	kind string
	// volume is the volume of a snapshot; of a backup, its backup volume
	// (the volume it was taken of, perhaps in another cluster).
	volume string
	// name is the snapshot's or the backup's.
	name string
}

func (h snapshotHandle) String() string { return h.kind + "://" + h.volume + "/" + h.name }

// handleNameMaxLength bounds each name in a handle: an object's name.
const handleNameMaxLength = 253

// parseSnapshotHandle reads a handle. It comes from a VolumeSnapshotContent
// a user may have written, so each name is checked to be one an object can
// carry before it goes into a request's path.
func parseSnapshotHandle(id string) (snapshotHandle, error) {
	kind, rest, ok := strings.Cut(id, "://")
	if !ok {
		return snapshotHandle{}, fmt.Errorf("%q is not snap://<volume>/<snapshot> or bak://<volume>/<backup>", id)
	}
	if kind == snapshotTypeBakOld {
		kind = snapshotTypeBak
	}
	if kind != snapshotTypeSnap && kind != snapshotTypeBak {
		return snapshotHandle{}, fmt.Errorf("%q: the kind %q is not snap or bak", id, kind)
	}
	volume, name, ok := strings.Cut(rest, "/")
	if !ok {
		return snapshotHandle{}, fmt.Errorf("%q: no /<name> after the volume", id)
	}
	for _, part := range []struct{ what, value string }{{"volume", volume}, {"name", name}} {
		if err := checkHandleName(part.value); err != nil {
			return snapshotHandle{}, fmt.Errorf("%q: the %s %v", id, part.what, err)
		}
	}
	return snapshotHandle{kind: kind, volume: volume, name: name}, nil
}

// checkHandleName checks a name read from a handle: letters, digits, '-',
// '_' and '.', starting with a letter or a digit, at most
// handleNameMaxLength long.
func checkHandleName(s string) error {
	if s == "" || len(s) > handleNameMaxLength {
		return fmt.Errorf("%q must be 1 to %d characters", s, handleNameMaxLength)
	}
	for i, r := range s {
		alnum := r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9'
		if !alnum && (i == 0 || !strings.ContainsRune("-_.", r)) {
			return fmt.Errorf("%q may hold only letters, digits, '-', '_' and '.', and must start with a letter or a digit", s)
		}
	}
	return nil
}

// snapshotType reads a CreateSnapshot's parameters (the
// VolumeSnapshotClass's): type is snap or bak (bs, Longhorn's older name,
// is bak; none is bak, as Longhorn's default). Any other parameter, but
// the sidecar's own csi.storage.k8s.io/ ones, is refused: a class this
// driver cannot honour must not make something else than it says.
func snapshotType(params map[string]string) (string, error) {
	kind := snapshotTypeBak
	for key, value := range params {
		switch {
		case key == paramSnapshotType:
			switch value {
			case snapshotTypeSnap:
				kind = snapshotTypeSnap
			case snapshotTypeBak, snapshotTypeBakOld, "":
			default:
				return "", fmt.Errorf("parameters.%s: %q is not snap (a Longhorn snapshot, kept in the cluster) or bak (a backup in the backup target)", paramSnapshotType, value)
			}
		case strings.HasPrefix(key, "csi.storage.k8s.io/"):
		default:
			return "", fmt.Errorf("parameters.%s: not a parameter of driver.longhorn.io's VolumeSnapshotClass; it takes only %q (snap or bak)", key, paramSnapshotType)
		}
	}
	return kind, nil
}

// snapshotName is the Longhorn snapshot a CSI snapshot's name stands for:
// a name a Snapshot object can carry (lowercase letters, digits and '-'),
// the same for a retried call.
func snapshotName(name string) string { return objectName(name, "-") }
