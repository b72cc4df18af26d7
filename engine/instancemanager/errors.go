package instancemanager

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/cadence-storage/longhorn-manager/engine/device"
	"github.com/cadence-storage/longhorn-manager/engine/instance"
	"github.com/cadence-storage/longhorn-manager/engine/instancemanager/pb"
	"github.com/cadence-storage/longhorn-manager/engine/replica"
	"github.com/cadence-storage/longhorn-manager/engine/volumeengine"
)

// engineStatus is err as a gRPC status whose detail says which of the
// engine's errors it is (fromStatus reads it back).
func engineStatus(err error) error {
	if err == nil {
		return nil
	}
	if _, ok := status.FromError(err); ok {
		return err
	}
	detail := &pb.EngineError{Message: err.Error()}
	code := codes.Internal
	var held *volumeengine.HeldError
	var missing *instance.MissingDataError
	switch {
	case errors.As(err, &held):
		code, detail.Kind = codes.FailedPrecondition, pb.EngineError_HELD
		detail.HeldSnapshot, detail.HeldWhy, detail.HeldBackups = held.Snapshot, held.Why, held.Backups
		if !held.Until.IsZero() {
			detail.HeldUntil = held.Until.UTC().Format(time.RFC3339Nano)
		}
	case errors.As(err, &missing):
		code, detail.Kind = codes.FailedPrecondition, pb.EngineError_MISSING_DATA
		detail.MissingReplica, detail.MissingDir, detail.MissingNotExist = missing.Replica, missing.Dir, os.IsNotExist(missing.Err)
		if missing.Err != nil {
			detail.MissingCause = missing.Err.Error()
		}
	case errors.Is(err, volumeengine.ErrExists):
		code, detail.Kind = codes.AlreadyExists, pb.EngineError_EXISTS
	case errors.Is(err, volumeengine.ErrNotFound), errors.Is(err, replica.ErrNotFound):
		code, detail.Kind = codes.NotFound, pb.EngineError_NOT_FOUND
	case errors.Is(err, volumeengine.ErrInvalid):
		code, detail.Kind = codes.InvalidArgument, pb.EngineError_INVALID
	case errors.Is(err, volumeengine.ErrPrecondition):
		code, detail.Kind = codes.FailedPrecondition, pb.EngineError_PRECONDITION
	case errors.Is(err, volumeengine.ErrNoHealthyReplica):
		code, detail.Kind = codes.Unavailable, pb.EngineError_NO_HEALTHY_REPLICA
	}
	st, werr := status.New(code, err.Error()).WithDetails(detail)
	if werr != nil {
		return status.Error(code, err.Error())
	}
	return st.Err()
}

// engineError is an engine's error read back from a status: its text is
// the engine's, and errors.Is finds the engine's sentinels in it.
type engineError struct {
	msg  string
	kind []error
}

func (e *engineError) Error() string   { return e.msg }
func (e *engineError) Unwrap() []error { return e.kind }

// fromStatus is the error an engine call returned, as the engine returned
// it in process: its sentinel errors, HeldError and MissingDataError are
// found in it by errors.Is and errors.As.
func fromStatus(err error) error {
	if err == nil {
		return nil
	}
	st, ok := status.FromError(err)
	if !ok {
		return fmt.Errorf("%w: %w", instance.ErrUnreachable, err)
	}
	for _, d := range st.Details() {
		detail, ok := d.(*pb.EngineError)
		if !ok {
			continue
		}
		switch detail.Kind {
		case pb.EngineError_HELD:
			held := &volumeengine.HeldError{Snapshot: detail.HeldSnapshot, Why: detail.HeldWhy, Backups: detail.HeldBackups}
			if detail.HeldUntil != "" {
				held.Until, _ = time.Parse(time.RFC3339Nano, detail.HeldUntil)
			}
			return held
		case pb.EngineError_MISSING_DATA:
			cause := errors.New(detail.MissingCause)
			if detail.MissingNotExist {
				cause = fmt.Errorf("%s: %w", detail.MissingCause, fs.ErrNotExist)
			}
			return &instance.MissingDataError{Replica: detail.MissingReplica, Dir: detail.MissingDir, Err: cause}
		case pb.EngineError_EXISTS:
			return &engineError{detail.Message, []error{volumeengine.ErrExists, volumeengine.ErrInvalid}}
		case pb.EngineError_NOT_FOUND:
			return &engineError{detail.Message, []error{volumeengine.ErrNotFound, replica.ErrNotFound}}
		case pb.EngineError_INVALID:
			return &engineError{detail.Message, []error{volumeengine.ErrInvalid}}
		case pb.EngineError_PRECONDITION:
			return &engineError{detail.Message, []error{volumeengine.ErrPrecondition}}
		case pb.EngineError_NO_HEALTHY_REPLICA:
			return &engineError{detail.Message, []error{volumeengine.ErrNoHealthyReplica}}
		}
		return errors.New(detail.Message)
	}
	switch st.Code() {
	case codes.Canceled:
		return fmt.Errorf("%s: %w", st.Message(), context.Canceled)
	case codes.Unavailable, codes.DeadlineExceeded:
		return fmt.Errorf("%w: %s", instance.ErrUnreachable, st.Message())
	case codes.NotFound:
		// The engine is not (or no longer) in the instance manager.
		return &engineError{st.Message(), []error{ErrNoEngine}}
	case codes.Unimplemented:
		return &engineError{st.Message(), []error{ErrUnimplemented}}
	}
	return errors.New(st.Message())
}

// ErrUnimplemented: the instance manager, of an older version, does not
// know the call (one from before the replica RPCs serves no replica).
var ErrUnimplemented = errors.New("the instance manager does not know the call")

// ErrNoEngine: the engine called does not run in the instance manager
// (any more).
var ErrNoEngine = errors.New("the engine does not run in the instance manager")

// deviceStatus is a device's error (engine/device) as a gRPC status whose
// detail says which it is (fromDeviceStatus reads it back).
func deviceStatus(err error) error {
	if err == nil {
		return nil
	}
	detail := &pb.EngineError{Message: err.Error()}
	code := codes.Internal
	switch {
	case errors.Is(err, device.ErrNotFound):
		code, detail.Kind = codes.NotFound, pb.EngineError_NOT_FOUND
	case errors.Is(err, device.ErrInvalid):
		code, detail.Kind = codes.InvalidArgument, pb.EngineError_INVALID
	case errors.Is(err, device.ErrInUse):
		code, detail.Kind = codes.FailedPrecondition, pb.EngineError_IN_USE
	case errors.Is(err, device.ErrPrecondition):
		code, detail.Kind = codes.FailedPrecondition, pb.EngineError_PRECONDITION
	case errors.Is(err, device.ErrUnavailable):
		code = codes.Unavailable
	case errors.Is(err, context.Canceled):
		code = codes.Canceled
	case errors.Is(err, context.DeadlineExceeded):
		code = codes.DeadlineExceeded
	}
	st, werr := status.New(code, err.Error()).WithDetails(detail)
	if werr != nil {
		return status.Error(code, err.Error())
	}
	return st.Err()
}

// fromDeviceStatus is the error a device call returned, as the device's
// Manager returned it in process: errors.Is finds engine/device's kinds
// in it; an instance manager that does not answer is
// device.ErrUnavailable.
func fromDeviceStatus(err error) error {
	if err == nil {
		return nil
	}
	st, ok := status.FromError(err)
	if !ok {
		return fmt.Errorf("%w: the instance manager: %w", device.ErrUnavailable, err)
	}
	for _, d := range st.Details() {
		detail, ok := d.(*pb.EngineError)
		if !ok {
			continue
		}
		switch detail.Kind {
		case pb.EngineError_NOT_FOUND:
			return &engineError{detail.Message, []error{device.ErrNotFound}}
		case pb.EngineError_INVALID:
			return &engineError{detail.Message, []error{device.ErrInvalid}}
		case pb.EngineError_IN_USE:
			return &engineError{detail.Message, []error{device.ErrInUse}}
		case pb.EngineError_PRECONDITION:
			return &engineError{detail.Message, []error{device.ErrPrecondition}}
		}
	}
	switch st.Code() {
	case codes.Canceled:
		return fmt.Errorf("%s: %w", st.Message(), context.Canceled)
	case codes.Unavailable:
		return fmt.Errorf("%w: the instance manager: %s", device.ErrUnavailable, st.Message())
	case codes.DeadlineExceeded:
		return fmt.Errorf("the instance manager: %s: %w", st.Message(), context.DeadlineExceeded)
	case codes.Unimplemented:
		// An instance manager of a version before devices moved there.
		return fmt.Errorf("%w: the instance manager keeps no devices (a version before they moved there): %s", device.ErrUnavailable, st.Message())
	}
	return errors.New(st.Message())
}
