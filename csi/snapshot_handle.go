package csi

import (
	"fmt"
	"net/url"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
)

// A CSI snapshot is a Longhorn snapshot of a volume, a backup in the
// backup target, or a backing image exported from the volume, named by a
// handle as Longhorn's driver names them, so content made by one driver
// is read by the other: snap://<volume>/<snapshot>,
// bak://<volume>/<backup> and
// bi://backing?backingImage=<image>&backingImageDataSourceType=export-from-volume&export-type=<raw|qcow2>&volume-name=<volume>.
const (
	snapshotTypeSnap = "snap"
	snapshotTypeBak  = "bak"
	snapshotTypeBi   = "bi"
	// snapshotTypeBakOld is Longhorn's older name of bak, read in handles
	// and in the type parameter.
	snapshotTypeBakOld = "bs"

	// paramSnapshotType is the VolumeSnapshotClass parameter that picks
	// what a CSI snapshot is; without it, a backup (Longhorn's default).
	paramSnapshotType = "type"
	// paramBackupMode is a bak class's full or incremental (Longhorn's).
	paramBackupMode = "backupMode"
	// paramExportType and paramExportTypeOld are a bi class's raw or
	// qcow2 (Longhorn reads both names); paramBiDiskSelector and
	// paramBiNodeSelector its selectors of the image's disks and nodes.
	paramExportType     = "exportType"
	paramExportTypeOld  = "export-type"
	paramBiDiskSelector = "diskSelector"
	paramBiNodeSelector = "nodeSelector"

	// The query of a bi handle, Longhorn's keys.
	biHandlePrefix  = "bi://backing?"
	biKeyImage      = "backingImage"
	biKeySourceType = "backingImageDataSourceType"
	biKeyExportType = "export-type"
	biKeyVolume     = "volume-name"
	biSourceExport  = "export-from-volume"
	exportTypeRaw   = "raw"
	exportTypeQCOW2 = "qcow2"
	biHandleShape   = "bi://backing?backingImage=<image>&backingImageDataSourceType=export-from-volume&export-type=<raw|qcow2>&volume-name=<volume>"
)

// snapshotHandle is a parsed CSI snapshot ID.
type snapshotHandle struct {
	// kind is snapshotTypeSnap, snapshotTypeBak or snapshotTypeBi.
	kind string
	// volume is the volume of a snapshot; of a backup, its backup volume
	// (the volume it was taken of, perhaps in another cluster); of a
	// backing image, the volume it is exported from.
	volume string
	// name is the snapshot's, the backup's or the backing image's.
	name string
	// exportType is a backing image's raw or qcow2.
	exportType string
}

func (h snapshotHandle) String() string {
	if h.kind == snapshotTypeBi {
		// Longhorn's order of the keys, so a handle reads the same from
		// either driver.
		return fmt.Sprintf("%s%s=%s&%s=%s&%s=%s&%s=%s", biHandlePrefix, biKeyImage, url.QueryEscape(h.name),
			biKeySourceType, biSourceExport, biKeyExportType, url.QueryEscape(h.exportType), biKeyVolume, url.QueryEscape(h.volume))
	}
	return h.kind + "://" + h.volume + "/" + h.name
}

// handleNameMaxLength bounds each name in a handle: an object's name.
const handleNameMaxLength = 253

// parseSnapshotHandle reads a handle. It comes from a VolumeSnapshotContent
// a user may have written, so each name is checked to be one an object can
// carry before it goes into a request's path.
func parseSnapshotHandle(id string) (snapshotHandle, error) {
	kind, rest, ok := strings.Cut(id, "://")
	if !ok {
		return snapshotHandle{}, fmt.Errorf("%q is not snap://<volume>/<snapshot>, bak://<volume>/<backup> or %s", id, biHandleShape)
	}
	if kind == snapshotTypeBakOld {
		kind = snapshotTypeBak
	}
	if kind == snapshotTypeBi {
		return parseBiHandle(id)
	}
	if kind != snapshotTypeSnap && kind != snapshotTypeBak {
		return snapshotHandle{}, fmt.Errorf("%q: the kind %q is not snap, bak or bi", id, kind)
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

// parseBiHandle reads a bi handle, Longhorn's
// bi://backing?backingImage=<image>&backingImageDataSourceType=export-from-volume&export-type=<raw|qcow2>&volume-name=<volume>:
// each key once, no other key, the image and the volume names an object
// can carry; export-type absent is raw.
func parseBiHandle(id string) (snapshotHandle, error) {
	query, ok := strings.CutPrefix(id, biHandlePrefix)
	if !ok {
		return snapshotHandle{}, fmt.Errorf("%q is not %s", id, biHandleShape)
	}
	values, err := url.ParseQuery(query)
	if err != nil {
		return snapshotHandle{}, fmt.Errorf("%q: the query: %v", id, err)
	}
	keys := make([]string, 0, len(values))
	for k := range values {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		switch {
		case k != biKeyImage && k != biKeySourceType && k != biKeyExportType && k != biKeyVolume:
			return snapshotHandle{}, fmt.Errorf("%q: %s is not a key of a bi handle (%s)", id, k, biHandleShape)
		case len(values[k]) != 1:
			return snapshotHandle{}, fmt.Errorf("%q: %s is given %d times", id, k, len(values[k]))
		}
	}
	if t := values.Get(biKeySourceType); t != biSourceExport {
		return snapshotHandle{}, fmt.Errorf("%q: %s %q is not %s, the only source of a bi snapshot", id, biKeySourceType, t, biSourceExport)
	}
	h := snapshotHandle{kind: snapshotTypeBi, volume: values.Get(biKeyVolume), name: values.Get(biKeyImage), exportType: values.Get(biKeyExportType)}
	switch h.exportType {
	case "":
		h.exportType = exportTypeRaw
	case exportTypeRaw, exportTypeQCOW2:
	default:
		return snapshotHandle{}, fmt.Errorf("%q: %s %q is not raw or qcow2", id, biKeyExportType, h.exportType)
	}
	for _, part := range []struct{ what, value string }{{biKeyVolume, h.volume}, {biKeyImage, h.name}} {
		if err := checkHandleName(part.value); err != nil {
			return snapshotHandle{}, fmt.Errorf("%q: the %s %v", id, part.what, err)
		}
	}
	return h, nil
}

// snapshotClass is what a CreateSnapshot's parameters (the
// VolumeSnapshotClass's) ask for.
type snapshotClass struct {
	// kind is snapshotTypeSnap, snapshotTypeBak or snapshotTypeBi.
	kind string
	// backupMode is a bak class's full or incremental, "" when the class
	// names none (incremental).
	backupMode string
	// labels are a bak class's labels on its backups: as Longhorn, the
	// class's parameters but the sidecar's own.
	labels map[string]string
	// exportType is a bi class's raw (the default) or qcow2.
	exportType string
}

// reservedBackupLabels are label keys a class may not put on a backup:
// Longhorn's reserved ones, and those by which the manager tells a
// recurring job's backups (a class's would be counted in the job's
// retention, and deleted by it).
var reservedBackupLabels = []string{"KubernetesStatus", "ranchervm-base-image", "RecurringJob", "RecurringJobTick"}

// parseSnapshotClass reads a CreateSnapshot's parameters (the
// VolumeSnapshotClass's). type is snap, bak or bi (bs, Longhorn's older
// name, is bak; none is bak, as Longhorn's default). The sidecar's own
// csi.storage.k8s.io/ parameters are ignored. A snap class takes nothing
// else; a bak class takes backupMode, and, as Longhorn reads them, its
// other parameters are labels on the backup; a bi class takes exportType
// (or export-type) and empty diskSelector and nodeSelector. Anything
// else is refused, naming the parameter: a class this driver cannot
// honour must not make something else than it says.
func parseSnapshotClass(params map[string]string) (snapshotClass, error) {
	c := snapshotClass{kind: snapshotTypeBak}
	switch value := params[paramSnapshotType]; value {
	case snapshotTypeSnap, snapshotTypeBi:
		c.kind = value
	case snapshotTypeBak, snapshotTypeBakOld, "":
	default:
		return c, fmt.Errorf("parameters.%s: %q is not snap (a Longhorn snapshot, kept in the cluster), bak (a backup in the backup target) or bi (a backing image exported from the volume)", paramSnapshotType, value)
	}
	if c.kind == snapshotTypeBak {
		c.labels = map[string]string{}
	}
	keys := make([]string, 0, len(params))
	for k := range params {
		keys = append(keys, k)
	}
	sort.Strings(keys) // the same error for the same class
	for _, key := range keys {
		value := params[key]
		if key == paramSnapshotType || strings.HasPrefix(key, "csi.storage.k8s.io/") {
			continue
		}
		var err error
		switch c.kind {
		case snapshotTypeSnap:
			err = fmt.Errorf("parameters.%s: not a parameter of driver.longhorn.io's VolumeSnapshotClass of type snap; it takes only %q", key, paramSnapshotType)
		case snapshotTypeBak:
			err = c.bakParam(key, value)
		case snapshotTypeBi:
			err = c.biParam(key, value)
		}
		if err != nil {
			return snapshotClass{}, err
		}
	}
	if c.kind == snapshotTypeBak {
		// Longhorn's labels are the class's parameters, type and
		// backupMode as written; the type as this driver reads it, which
		// ListSnapshots tells a backup's snapshot by.
		c.labels[paramSnapshotType] = snapshotTypeBak
	}
	if c.kind == snapshotTypeBi && c.exportType == "" {
		c.exportType = exportTypeRaw
	}
	return c, nil
}

func (c *snapshotClass) bakParam(key, value string) error {
	if key == paramBackupMode {
		switch value {
		case "full", "incremental":
			c.backupMode = value
		default:
			return fmt.Errorf("parameters.%s: %q is not full (every block uploaded again) or incremental (only what the last backup does not hold)", key, value)
		}
		c.labels[key] = value
		return nil
	}
	// A label on the backup, as Longhorn reads it: a qualified name
	// (an optional DNS prefix and '/', then at most 63 letters, digits,
	// '-', '_', '.'), a value that is not empty.
	if errs := validation.IsQualifiedName(key); len(errs) > 0 {
		return fmt.Errorf("parameters.%s: a bak class's parameter other than %s and %s is a label on its backups, and this is no label key: %s", key, paramSnapshotType, paramBackupMode, errs[0])
	}
	if value == "" {
		return fmt.Errorf("parameters.%s: a bak class's parameter other than %s and %s is a label on its backups, and a label's value may not be empty", key, paramSnapshotType, paramBackupMode)
	}
	prefix, _, _ := strings.Cut(key, "/")
	if strings.Contains(key, "/") && (prefix == "longhorn.io" || strings.HasSuffix(prefix, ".longhorn.io")) || contains(reservedBackupLabels, key) {
		return fmt.Errorf("parameters.%s: a label the manager keeps for itself (longhorn.io/ and *.longhorn.io/ keys, %s) may not be set by a VolumeSnapshotClass", key, strings.Join(reservedBackupLabels, ", "))
	}
	c.labels[key] = value
	return nil
}

func (c *snapshotClass) biParam(key, value string) error {
	switch key {
	case paramExportType, paramExportTypeOld:
		if value != exportTypeRaw && value != exportTypeQCOW2 {
			return fmt.Errorf("parameters.%s: %q is not raw or qcow2, the formats a backing image is exported in", key, value)
		}
		if c.exportType != "" && c.exportType != value {
			// Sorted, export-type came first.
			return fmt.Errorf("parameters.%s: %q, but parameters.%s is %q: name the export type once", paramExportType, value, paramExportTypeOld, c.exportType)
		}
		c.exportType = value
	case paramBiDiskSelector, paramBiNodeSelector:
		if value != "" {
			return fmt.Errorf("parameters.%s: only \"\" is honoured: nodes and disks have no tags here, so no backing image can be placed by them", key)
		}
	default:
		return fmt.Errorf("parameters.%s: not a parameter of driver.longhorn.io's VolumeSnapshotClass of type bi; it takes %s, %s (or %s), %s and %s", key, paramSnapshotType, paramExportType, paramExportTypeOld, paramBiDiskSelector, paramBiNodeSelector)
	}
	return nil
}

// snapshotName is the Longhorn snapshot a CSI snapshot's name stands for:
// a name a Snapshot object can carry (lowercase letters, digits and '-'),
// the same for a retried call.
func snapshotName(name string) string { return objectName(name, "-") }
