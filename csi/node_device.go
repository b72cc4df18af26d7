package csi

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/sirupsen/logrus"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/cadence-storage/longhorn-manager/csi/nodestate"
	"github.com/cadence-storage/longhorn-manager/engine/device"
	"github.com/cadence-storage/longhorn-manager/engine/instancemanager"
	"github.com/cadence-storage/longhorn-manager/internal/hostexec"
)

// The device of a staged volume (nbdfuse on its NBD export, a loop device
// of nbdfuse's file: engine/device) is made and kept by a device.Service:
// the node's instance manager's (--instance-manager-dir), where it
// outlives this driver's process and container, or the driver's own
// Manager in its state directory where no instance manager runs (the
// default in-process runner, most tests). The state file says which
// (DeviceOwner), written before the device is asked for, so that a stage
// is undone where it was made whatever the driver is given now. A stage
// made by a driver before devices moved (its own nbdfuse, recorded in the
// state file: nodestate.OwnerLegacy) is checked, grown and undone by
// engine/device's own code on that record, and never made anew.

// owner is who makes the devices of new stages.
func (d *Driver) owner() string {
	if d.opts.InstanceManagerDir != "" {
		return nodestate.OwnerInstanceManager
	}
	return nodestate.OwnerDriver
}

// instanceManagerDevices is the client of the devices of the instance
// manager named name: the one serving in its folder under
// --instance-manager-dir, or, for "" or one of an earlier layout (which
// served in that folder itself, and has no folder of its own), the one
// serving there.
func (d *Driver) instanceManagerDevices(name string) (device.Service, error) {
	root := d.opts.InstanceManagerDir
	dir := root
	if name != "" {
		if own := filepath.Join(root, instancemanager.FolderName(name)); fileExists(instancemanager.SocketPath(own)) {
			dir = own
		}
	}
	d.imMu.Lock()
	defer d.imMu.Unlock()
	if svc, ok := d.ims[dir]; ok {
		return svc, nil
	}
	svc, err := instancemanager.DialDevices(dir)
	if err != nil {
		return nil, status.Errorf(codes.Unavailable, "instance manager %q in %s: %v", name, dir, err)
	}
	d.ims[dir] = svc
	return svc, nil
}

// localDevices is the driver's own device Manager, in its state
// directory; made (and what a driver before it left there adopted or
// undone) at its first use.
func (d *Driver) localDevices() (*device.Manager, error) {
	d.localOnce.Do(func() {
		d.local, d.localErr = device.NewManager(filepath.Join(d.stateDir(), "devices"), d.log.WithField("devices", "driver"))
		if d.localErr == nil {
			d.local.Recover()
		}
	})
	return d.local, d.localErr
}

// devicesFor is the Service that keeps st's device; nil, nil for a legacy
// stage.
func (d *Driver) devicesFor(st *stagedVolume) (device.Service, error) {
	switch st.DeviceOwner {
	case nodestate.OwnerLegacy:
		return nil, nil
	case nodestate.OwnerDriver:
		m, err := d.localDevices()
		if err != nil {
			return nil, status.Errorf(codes.Internal, "the driver's devices folder: %v", err)
		}
		return m, nil
	case nodestate.OwnerInstanceManager:
		if d.opts.InstanceManagerDir == "" {
			return nil, status.Errorf(codes.FailedPrecondition, "volume %s's device is kept by the node's instance manager, which this driver is not given (--instance-manager-dir)", st.VolumeID)
		}
		return d.instanceManagerDevices(st.InstanceManager)
	}
	return nil, status.Errorf(codes.Internal, "volume %s's state file names a device owner this driver does not know, %q", st.VolumeID, st.DeviceOwner)
}

// legacyFuseDir is where a driver before engine/device mounted a volume's
// nbdfuse.
func (d *Driver) legacyFuseDir(volumeID string) string {
	return filepath.Join(d.stateDir(), "fuse", volumeID)
}

// legacyRecord is a legacy stage's device as engine/device's record,
// sanitized: only what can be this volume's device in the driver's folder.
func (d *Driver) legacyRecord(st *stagedVolume) *device.Record {
	return device.Sanitize(&device.Record{VolumeID: st.VolumeID, Endpoint: st.Endpoint, FuseDir: st.FuseDir, FuseFile: st.FuseFile,
		NbdfusePID: st.NbdfusePID, Window: st.Window, Device: st.Device}, st.VolumeID, d.legacyFuseDir(st.VolumeID), d.log)
}

// deviceStatus is what the keeper of st's device says of it; found is
// false when it has none.
func (d *Driver) deviceStatus(ctx context.Context, st *stagedVolume) (ds device.Status, found bool, err error) {
	svc, err := d.devicesFor(st)
	if err != nil {
		return ds, false, err
	}
	if svc == nil {
		if st.FuseDir == "" && st.Device == "" {
			return ds, false, nil
		}
		return device.RecordStatus(d.legacyRecord(st)), true, nil
	}
	ds, err = svc.Get(ctx, st.VolumeID)
	if errors.Is(err, device.ErrNotFound) {
		return ds, false, nil
	}
	if err != nil {
		return ds, false, deviceError(st.VolumeID, "read the device of", err)
	}
	return ds, true, nil
}

// deviceStands says whether st's device still stands as st records it,
// and why not when not. An error (an instance manager that does not
// answer) is neither: nothing is undone on it.
func (d *Driver) deviceStands(ctx context.Context, st *stagedVolume) (bool, string, error) {
	ds, found, err := d.deviceStatus(ctx, st)
	switch {
	case err != nil:
		return false, "", err
	case !found:
		return false, "it has no device", nil
	case st.Device == "" || ds.Device != st.Device:
		return false, fmt.Sprintf("its device is %q, not the %q its stage records", ds.Device, st.Device), nil
	case !ds.Healthy:
		return false, ds.Why, nil
	}
	return true, "", nil
}

// stagedDevice is st's device while it is still the volume's (its loop
// device reads the volume's export, whatever else no longer stands): what
// is mounted on it is the volume's. "" when there is none.
func (d *Driver) stagedDevice(ctx context.Context, st *stagedVolume) (string, error) {
	if st.Device == "" {
		return "", nil
	}
	if st.DeviceOwner == nodestate.OwnerLegacy {
		if hostexec.LoopBackingFile(st.Device) == d.legacyRecord(st).FuseFile {
			return st.Device, nil
		}
		return "", nil
	}
	ds, found, err := d.deviceStatus(ctx, st)
	if err != nil || !found || !ds.Attached || ds.Device != st.Device {
		return "", err
	}
	return st.Device, nil
}

// connectDevice has st's device made of st.Endpoint by the keeper its
// owner names; st, saved with its owner, records the device.
func (d *Driver) connectDevice(ctx context.Context, st *stagedVolume, log *logrus.Entry) error {
	svc, err := d.devicesFor(st)
	if err != nil {
		return err
	}
	if svc == nil {
		return status.Errorf(codes.Internal, "volume %s: a stage of an earlier driver is not made anew", st.VolumeID)
	}
	ds, err := svc.Stage(ctx, st.VolumeID, st.Endpoint)
	if errors.Is(err, device.ErrPrecondition) {
		// A device the state file does not record: a stage cut short, or
		// a state file lost. It is the volume's, and unused here.
		log.WithError(err).Warn("Undoing a device of the volume that its stage does not record")
		if uerr := svc.Unstage(ctx, st.VolumeID); uerr != nil {
			return deviceError(st.VolumeID, "undo the unrecorded device of", uerr)
		}
		ds, err = svc.Stage(ctx, st.VolumeID, st.Endpoint)
	}
	if err != nil {
		return deviceError(st.VolumeID, "make a block device of", err)
	}
	st.Device = ds.Device
	if err := d.saveState(st); err != nil {
		return status.Error(codes.Internal, err.Error())
	}
	log.WithFields(logrus.Fields{"device": ds.Device, "endpoint": st.Endpoint, "owner": st.DeviceOwner, "size": ds.Size}).Info("The volume's device is made")
	return nil
}

// disconnectDevice undoes st's device where it is kept, flushing it.
func (d *Driver) disconnectDevice(ctx context.Context, st *stagedVolume, log *logrus.Entry) error {
	svc, err := d.devicesFor(st)
	if err != nil {
		return err
	}
	if svc == nil {
		if err := device.Release(d.legacyRecord(st), false, log); err != nil {
			return deviceError(st.VolumeID, "undo the device (made by an earlier driver) of", err)
		}
		return nil
	}
	if err := svc.Unstage(ctx, st.VolumeID); err != nil {
		return deviceError(st.VolumeID, "undo the device of", err)
	}
	return nil
}

// expandDevice grows st's device to its export's size now, and returns
// the device's size.
func (d *Driver) expandDevice(ctx context.Context, st *stagedVolume, log *logrus.Entry) (int64, error) {
	svc, err := d.devicesFor(st)
	if err != nil {
		return 0, err
	}
	var ds device.Status
	if svc == nil {
		ds, err = device.ExpandRecord(ctx, d.legacyRecord(st), log)
	} else {
		ds, err = svc.Expand(ctx, st.VolumeID)
	}
	if err != nil {
		return 0, deviceError(st.VolumeID, "grow the device of", err)
	}
	return ds.Size, nil
}

// deviceError is a device call's error as the code the CSI spec names.
func deviceError(volumeID, what string, err error) error {
	if _, ok := status.FromError(err); ok && !isDeviceKind(err) {
		return err
	}
	code := codes.Internal
	switch {
	case errors.Is(err, device.ErrUnavailable):
		code = codes.Unavailable
	case errors.Is(err, device.ErrInUse), errors.Is(err, device.ErrPrecondition):
		code = codes.FailedPrecondition
	case errors.Is(err, device.ErrInvalid):
		code = codes.InvalidArgument
	case errors.Is(err, device.ErrNotFound):
		code = codes.NotFound
	case errors.Is(err, context.DeadlineExceeded):
		code = codes.DeadlineExceeded
	case errors.Is(err, context.Canceled):
		code = codes.Canceled
	}
	return status.Errorf(code, "%s volume %s: %v", what, volumeID, err)
}

func isDeviceKind(err error) bool {
	for _, k := range []error{device.ErrUnavailable, device.ErrInUse, device.ErrPrecondition, device.ErrInvalid, device.ErrNotFound} {
		if errors.Is(err, k) {
			return true
		}
	}
	return false
}

// The host operations the Node service runs itself.
var (
	run      = hostexec.Run
	loopSize = device.LoopSize
)

func fileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}
