package csi

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/cadence-storage/longhorn-manager/client"
)

// apiStatus turns an answer of the manager's API into the CSI status the
// spec names for it, keeping the manager's message (which names the
// field and the rule).
func apiStatus(err error, doing string) error {
	msg := fmt.Sprintf("%s: %v", doing, err)
	var ae *client.APIError
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return status.Error(codes.DeadlineExceeded, msg)
	case errors.Is(err, context.Canceled):
		return status.Error(codes.Canceled, msg)
	case !errors.As(err, &ae):
		return status.Error(codes.Unavailable, msg) // the manager did not answer
	case ae.Code == "InsufficientCapacity":
		return status.Error(codes.OutOfRange, msg)
	}
	switch ae.Status {
	case http.StatusBadRequest, http.StatusUnprocessableEntity:
		return status.Error(codes.InvalidArgument, msg)
	case http.StatusNotFound:
		return status.Error(codes.NotFound, msg)
	case http.StatusConflict:
		return status.Error(codes.FailedPrecondition, msg)
	case http.StatusServiceUnavailable, http.StatusTooManyRequests:
		return status.Error(codes.Unavailable, msg)
	case http.StatusUnauthorized:
		return status.Error(codes.Unauthenticated, msg) // the token the driver sends
	case http.StatusForbidden:
		return status.Error(codes.PermissionDenied, msg) // its account's RBAC
	}
	return status.Error(codes.Internal, msg)
}
