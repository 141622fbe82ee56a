package chunkd

import (
	"fmt"

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
