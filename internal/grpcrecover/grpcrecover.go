// Package grpcrecover keeps a panic in one gRPC handler from taking the
// server's process down: the engines of a node, or every backing image of
// a disk, would go with it. The handler's call answers codes.Internal, the
// panic is logged with the method, the request's volume or file and the
// stack, and the server goes on serving.
package grpcrecover

import (
	"context"
	"fmt"
	"runtime/debug"

	"github.com/sirupsen/logrus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// ServerOptions returns the options that recover panics in unary and
// stream handlers; other interceptors may be chained after them.
func ServerOptions(log logrus.FieldLogger) []grpc.ServerOption {
	return []grpc.ServerOption{
		grpc.ChainUnaryInterceptor(UnaryServerInterceptor(log)),
		grpc.ChainStreamInterceptor(StreamServerInterceptor(log)),
	}
}

// UnaryServerInterceptor recovers a panic in a unary handler.
func UnaryServerInterceptor(log logrus.FieldLogger) grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (resp any, err error) {
		defer func() {
			if r := recover(); r != nil {
				err = recovered(log, info.FullMethod, req, r)
			}
		}()
		return handler(ctx, req)
	}
}

// StreamServerInterceptor recovers a panic in a stream handler. The
// request is read by the handler itself: the last message it received
// names the volume or file in the log.
func StreamServerInterceptor(log logrus.FieldLogger) grpc.StreamServerInterceptor {
	return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) (err error) {
		rs := &recordingStream{ServerStream: ss}
		defer func() {
			if r := recover(); r != nil {
				err = recovered(log, info.FullMethod, rs.last, r)
			}
		}()
		return handler(srv, rs)
	}
}

type recordingStream struct {
	grpc.ServerStream
	last any
}

func (s *recordingStream) RecvMsg(m any) error {
	err := s.ServerStream.RecvMsg(m)
	if err == nil {
		s.last = m
	}
	return err
}

// recovered logs the panic r of a handler of method and returns the
// status the call answers. The stack stays in the log: the caller learns
// only that the server failed.
func recovered(log logrus.FieldLogger, method string, req any, r any) error {
	fields := logrus.Fields{"method": method, "panic": fmt.Sprint(r), "stack": string(debug.Stack())}
	// The requests name their volume (the engine) or their file (the
	// backing image manager).
	if v, ok := req.(interface{ GetVolume() string }); ok && v.GetVolume() != "" {
		fields["volume"] = v.GetVolume()
	}
	if v, ok := req.(interface{ GetName() string }); ok && v.GetName() != "" {
		fields["name"] = v.GetName()
	}
	if v, ok := req.(interface{ GetUuid() string }); ok && v.GetUuid() != "" {
		fields["uuid"] = v.GetUuid()
	}
	log.WithFields(fields).Error("Recovered a panic in a gRPC handler")
	return status.Errorf(codes.Internal, "internal error in %s: the server logged it and goes on serving", method)
}
