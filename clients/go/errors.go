package chunkd

import (
	"fmt"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// ArgumentError is a bad argument the client finds before any call: an
// unknown name in Params, a negative size, Retries without a seekable
// source, a bad option of Dial. It is a gRPC status error with the code
// INVALID_ARGUMENT, like the server's answer to a bad parameter, so one
// check covers both:
//
//	if status.Code(err) == codes.InvalidArgument { ... }
//
// errors.As(err, &argErr) tells the client's own refusals apart (nothing
// was sent).
type ArgumentError struct {
	// Field names what is wrong: a Params field ("Params.Algorithm"), an
	// option ("WithServiceConfig") or an argument ("namespace").
	Field string
	// Problem says what is wrong with it, e.g. `unknown algorithm "nope"
	// (fastcdc, crc32, ...)`.
	Problem string
}

// Error is "chunkd: Field: Problem".
func (e *ArgumentError) Error() string {
	return fmt.Sprintf("chunkd: %s: %s", e.Field, e.Problem)
}

// GRPCStatus makes status.Code and status.Convert see INVALID_ARGUMENT with
// Error() as the message.
func (e *ArgumentError) GRPCStatus() *status.Status {
	return status.New(codes.InvalidArgument, e.Error())
}

// argumentError builds an *ArgumentError.
func argumentError(field, format string, args ...any) error {
	return &ArgumentError{Field: field, Problem: fmt.Sprintf(format, args...)}
}

// ErrorInfo is the google.rpc.ErrorInfo of a refusal of the server, read
// from the status details of the error (the grpc-status-details-bin
// trailer).
type ErrorInfo struct {
	// Reason tells refusals apart without reading the message: a value of
	// chunkd.v1.ErrorReason without its ERROR_REASON_ prefix, e.g.
	// "STREAM_LIMIT", "PER_TOKEN_STREAM_LIMIT", "INDEX_FULL" or
	// "UNAUTHENTICATED" (docs/clients.md, "Error reasons", lists them).
	Reason string
	// Domain is "chunkd.dev".
	Domain string
	// Metadata says more, e.g. the "flag" and the "limit" that refused.
	Metadata map[string]string
}

// ErrorInfoOf returns the ErrorInfo of err (any error that carries a gRPC
// status, wrapped or not), or nil when its status carries none: a call the
// server did not refuse for one of the reasons, or an error of the client.
func ErrorInfoOf(err error) *ErrorInfo {
	s, ok := status.FromError(err)
	if !ok || s == nil {
		return nil
	}
	for _, detail := range s.Details() {
		if info, ok := detail.(*errdetails.ErrorInfo); ok {
			return &ErrorInfo{Reason: info.GetReason(), Domain: info.GetDomain(), Metadata: info.GetMetadata()}
		}
	}
	return nil
}

// ReasonOf returns the reason of err's ErrorInfo (see ErrorInfo.Reason),
// or "" when it carries none:
//
//	if chunkd.ReasonOf(err) == "STREAM_LIMIT" { ... }
func ReasonOf(err error) string {
	if info := ErrorInfoOf(err); info != nil {
		return info.Reason
	}
	return ""
}

// ownError is an error the client found itself (a protocol violation by
// the server, records a replay cannot continue): a gRPC status error that
// is final, never replayed, whatever its code.
type ownError struct{ s *status.Status }

func (e *ownError) Error() string              { return e.s.Err().Error() }
func (e *ownError) GRPCStatus() *status.Status { return e.s }

func clientError(code codes.Code, format string, args ...any) error {
	return &ownError{status.Newf(code, "chunkd: "+format, args...)}
}

func protocolError(what string) error {
	return clientError(codes.Internal, "protocol violation by the server: %s", what)
}
