package device

import (
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/sirupsen/logrus"

	"github.com/cadence-storage/longhorn-manager/engine/nbd"

	"github.com/cadence-storage/longhorn-manager/internal/atomicfile"
)

// Record is what was made of a volume's device, written after each step
// so that what a failure, or a process that died, left can be undone. Its
// fields are those csi/nodestate kept for the driver's own nbdfuse before
// devices moved here, so that a stage of that version is undone by the
// same code (Release).
type Record struct {
	VolumeID string `json:"volumeID"`
	// Endpoint is the NBD URI of the volume's export.
	Endpoint string `json:"endpoint"`
	// FuseDir is where nbdfuse mounts the export, as the file FuseFile;
	// NbdfusePID is its process, in a session of its own.
	FuseDir    string `json:"fuseDir,omitempty"`
	FuseFile   string `json:"fuseFile,omitempty"`
	NbdfusePID int    `json:"nbdfusePID,omitempty"`
	// Window says nbdfuse reads the export's window.
	Window bool `json:"window,omitempty"`
	// Device is the loop device over FuseFile.
	Device string `json:"device,omitempty"`
}

// loopPattern are the names a loop device the records name may have.
var loopPattern = regexp.MustCompile(`^/dev/loop[0-9]{1,6}$`)

// fuseFileName is the file nbdfuse serves in its mount.
const fuseFileName = "disk"

// checkEndpoint accepts the NBD URIs of a volume's export as the engine
// gives them, nbd://HOST:PORT/NAME, without the window's suffix (the
// device adds it).
func checkEndpoint(endpoint string) error {
	u, err := url.Parse(endpoint)
	if err != nil || u.Scheme != "nbd" || u.Host == "" || u.Port() == "" || len(u.Path) < 2 ||
		u.RawQuery != "" || u.Fragment != "" || u.User != nil || strings.HasSuffix(u.Path, nbd.WindowSuffix) {
		return fmt.Errorf("%w: endpoint %q is not a volume's NBD export (nbd://HOST:PORT/NAME)", ErrInvalid, endpoint)
	}
	return nil
}

// Sanitize keeps of r only what it may say of volume's device made in
// fuseDir: a field that could name something else (another path, a device
// that is no loop device, a negative pid, an endpoint that is no NBD URI)
// is dropped, and logged. The pid is checked again each time it is used
// (isOurNbdfuse), and the loop device only acted on while it reads
// FuseFile.
func Sanitize(r *Record, volumeID, fuseDir string, log *logrus.Entry) *Record {
	out := &Record{VolumeID: volumeID, Window: r.Window}
	drop := func(field string, v any) {
		log.WithFields(logrus.Fields{"volume": volumeID, "field": field, "value": v}).Warn("Ignoring a field of the device's record that cannot be this volume's")
	}
	if r.VolumeID != volumeID {
		drop("volumeID", r.VolumeID)
	}
	if r.Endpoint != "" {
		if checkEndpoint(r.Endpoint) == nil {
			out.Endpoint = r.Endpoint
		} else {
			drop("endpoint", r.Endpoint)
		}
	}
	if r.FuseDir != "" && filepath.Clean(r.FuseDir) != fuseDir {
		drop("fuseDir", r.FuseDir)
	}
	if r.FuseFile != "" && filepath.Clean(r.FuseFile) != filepath.Join(fuseDir, fuseFileName) {
		drop("fuseFile", r.FuseFile)
	}
	// The folder is this volume's whatever the record says: what is left
	// there is undone.
	out.FuseDir, out.FuseFile = fuseDir, filepath.Join(fuseDir, fuseFileName)
	switch {
	case r.NbdfusePID > 1:
		out.NbdfusePID = r.NbdfusePID
	case r.NbdfusePID != 0:
		drop("nbdfusePID", r.NbdfusePID)
	}
	switch {
	case loopPattern.MatchString(r.Device):
		out.Device = r.Device
	case r.Device != "":
		drop("device", r.Device)
	}
	return out
}

// loadRecord reads a record; nil, nil when there is none.
func loadRecord(path string) (*Record, error) {
	data, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	r := &Record{}
	if err := json.Unmarshal(data, r); err != nil {
		return nil, fmt.Errorf("the device record %s is not JSON: %w", path, err)
	}
	return r, nil
}

// saveRecord writes a record atomically: a crash leaves the old one or the
// new one.
func saveRecord(path string, r *Record) error {
	data, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	return atomicfile.WriteFile(path, data)
}
