package chunkd

import (
	"bytes"
	"context"
	"io"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/chunkd/chunkd/clients/go/internal/chunkdtest"
)

// entryPoints reads a Chunk or Dedup stream of r to its end in each way the
// package offers and returns the summary's TotalBytes and the error.
var entryPoints = map[string]func(ctx context.Context, c *Client, r io.Reader, p Params) (uint64, error){
	"Chunk Next": func(ctx context.Context, c *Client, r io.Reader, p Params) (uint64, error) {
		it, err := c.Chunk(ctx, r, p)
		if err != nil {
			return 0, err
		}
		defer it.Close()
		for it.Next() {
		}
		return it.Summary().TotalBytes, it.Err()
	},
	"Chunk All": func(ctx context.Context, c *Client, r io.Reader, p Params) (uint64, error) {
		it, err := c.Chunk(ctx, r, p)
		if err != nil {
			return 0, err
		}
		defer it.Close()
		for range it.All() {
		}
		return it.Summary().TotalBytes, it.Err()
	},
	"Chunk Collect": func(ctx context.Context, c *Client, r io.Reader, p Params) (uint64, error) {
		it, err := c.Chunk(ctx, r, p)
		if err != nil {
			return 0, err
		}
		_, sum, err := it.Collect()
		return sum.TotalBytes, err
	},
	"Dedup Next": func(ctx context.Context, c *Client, r io.Reader, p Params) (uint64, error) {
		it, err := c.Dedup(ctx, "ns", r, p)
		if err != nil {
			return 0, err
		}
		defer it.Close()
		for it.Next() {
		}
		return it.Summary().TotalBytes, it.Err()
	},
	"Dedup All": func(ctx context.Context, c *Client, r io.Reader, p Params) (uint64, error) {
		it, err := c.Dedup(ctx, "ns", r, p)
		if err != nil {
			return 0, err
		}
		defer it.Close()
		for range it.All() {
		}
		return it.Summary().TotalBytes, it.Err()
	},
	"Dedup Collect": func(ctx context.Context, c *Client, r io.Reader, p Params) (uint64, error) {
		it, err := c.Dedup(ctx, "ns", r, p)
		if err != nil {
			return 0, err
		}
		_, sum, err := it.Collect()
		return sum.TotalBytes, err
	},
}

// wantStatus fails unless err is a gRPC status error with code and exactly
// message.
func wantStatus(t *testing.T, what string, err error, code codes.Code, message string) {
	t.Helper()
	s, ok := status.FromError(err)
	if !ok || s.Code() != code || s.Message() != message {
		t.Errorf("%s: err = %v (a status: %v, code %v), want %v %q", what, err, ok, s.Code(), code, message)
	}
}

// TestSummaryMustCoverTheBytesSent: a stream that a server ends OK with a
// summary whose total_bytes is not the number of bytes sent, or with no
// summary, fails with DATA_LOSS from every entry point, and yields no
// summary; an honest summary passes.
func TestSummaryMustCoverTheBytesSent(t *testing.T) {
	data := randomBytes(41, 10_000)
	p := Params{MessageSize: 4096} // three data messages
	for _, tc := range []struct {
		ending  chunkdtest.Ending
		input   []byte
		message string // "": no error
	}{
		{chunkdtest.Honest, data, ""},
		{chunkdtest.Honest, nil, ""},
		{chunkdtest.ShortSummary, data, "server summary reports total_bytes=9999 but 10000 bytes were sent"},
		{chunkdtest.NoSummary, data, "the stream ended without a summary; 10000 bytes were sent"},
		{chunkdtest.NoSummary, nil, "the stream ended without a summary; 0 bytes were sent"},
	} {
		c := dial(t, chunkdtest.StartFake(t, tc.ending))
		for name, read := range entryPoints {
			what := name + " of " + map[chunkdtest.Ending]string{chunkdtest.Honest: "an honest server",
				chunkdtest.ShortSummary: "a short summary", chunkdtest.NoSummary: "no summary"}[tc.ending]
			total, err := read(testContext(t), c, bytes.NewReader(tc.input), p)
			if tc.message == "" {
				if err != nil || total != uint64(len(tc.input)) {
					t.Errorf("%s: %v, total_bytes %d for %d bytes", what, err, total, len(tc.input))
				}
				continue
			}
			wantStatus(t, what, err, codes.DataLoss, tc.message)
			if status.Code(err) != codes.DataLoss {
				t.Errorf("%s: status.Code = %v", what, status.Code(err))
			}
			if total != 0 {
				t.Errorf("%s: Summary().TotalBytes = %d after DATA_LOSS, want the zero summary", what, total)
			}
		}
	}
}

// TestSummaryBeforeTheInputEndsIsDataLoss: a server that ends the stream OK
// while the client still has input to send has not chunked all of it, even
// when its summary counts the bytes it got.
func TestSummaryBeforeTheInputEndsIsDataLoss(t *testing.T) {
	c := dial(t, chunkdtest.StartFake(t, chunkdtest.EarlySummary))
	for name, read := range entryPoints {
		r, w := io.Pipe()
		t.Cleanup(func() { w.Close() })   // frees the sender blocked reading r
		go w.Write(randomBytes(43, 4096)) // one message; more input may follow
		_, err := read(testContext(t), c, r, Params{MessageSize: 4096})
		wantStatus(t, name, err, codes.DataLoss, "the server ended the stream before the input was sent in full: "+
			"its summary reports total_bytes=4096 after 4096 bytes were sent")
	}
}
