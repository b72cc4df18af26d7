package datastore

import (
	"errors"
	"fmt"
	"net"
	"strconv"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
)

var (
	// ErrExportVolumeMissing: the volume an export names does not exist.
	ErrExportVolumeMissing = errors.New("the volume does not exist")
	// ErrExportVolumeNotAttached: the volume exists but its engine does
	// not run, so nothing can read it; attaching it lets the export go on.
	ErrExportVolumeNotAttached = errors.New("the volume is not attached")
)

// ExportSource is where an export-from-volume backing image reads from:
// the volume and its running engine.
type ExportSource struct {
	Volume *longhorn.Volume
	// EngineNode is the node that runs the volume's engine, and
	// EngineAddress that engine service's host:port.
	EngineNode    string
	EngineAddress string
}

// ValidateExportSource checks the source parameters of an
// export-from-volume backing image: volume-name names a volume that is
// attached (its engine runs, so the export can read it through the
// engine), and export-type is raw or qcow2 when given. The errors name
// the parameter and wrap ErrExportVolumeMissing or
// ErrExportVolumeNotAttached. The API checks it at creation, the data
// source controller before each start of the export.
func (ds *DataStore) ValidateExportSource(params map[string]string) (*ExportSource, error) {
	switch t := params[longhorn.DataSourceParameterExportType]; t {
	case "", longhorn.ExportTypeRaw, longhorn.ExportTypeQCOW2:
	default:
		return nil, fmt.Errorf("sourceParameters.%s %q: must be %s or %s", longhorn.DataSourceParameterExportType, t, longhorn.ExportTypeRaw, longhorn.ExportTypeQCOW2)
	}
	name := params[longhorn.DataSourceParameterVolumeName]
	if name == "" {
		return nil, fmt.Errorf("sourceParameters.%s: required for export-from-volume", longhorn.DataSourceParameterVolumeName)
	}
	v, err := ds.GetVolumeRO(name)
	if apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("sourceParameters.%s %q: %w", longhorn.DataSourceParameterVolumeName, name, ErrExportVolumeMissing)
	}
	if err != nil {
		return nil, err
	}
	notAttached := func(why string) error {
		return fmt.Errorf("sourceParameters.%s %q: %w (%s): an export reads the volume through its engine; attach it",
			longhorn.DataSourceParameterVolumeName, name, ErrExportVolumeNotAttached, why)
	}
	if v.Status.State != longhorn.VolumeStateAttached {
		state := string(v.Status.State)
		if state == "" {
			state = "new"
		}
		return nil, notAttached("it is " + state)
	}
	e, err := ds.GetEngineRO(EngineName(name))
	if apierrors.IsNotFound(err) {
		return nil, notAttached("it has no engine")
	}
	if err != nil {
		return nil, err
	}
	if e.Status.CurrentState != longhorn.InstanceStateRunning || e.Status.IP == "" || e.Status.Port == 0 {
		return nil, notAttached(fmt.Sprintf("its engine is %s", e.Status.CurrentState))
	}
	node := e.Spec.NodeID
	if node == "" {
		node = v.Status.CurrentNodeID
	}
	return &ExportSource{Volume: v, EngineNode: node, EngineAddress: net.JoinHostPort(e.Status.IP, strconv.Itoa(e.Status.Port))}, nil
}
