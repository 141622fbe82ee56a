package chunkd

import (
	"bytes"
	"fmt"
	"io"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// holdStream opens a Chunk stream on c and keeps it open until the test
// ends; it returns once the server answered on it, so it counts against
// --max_streams.
func holdStream(t *testing.T, c *Client) {
	t.Helper()
	r, w := io.Pipe()
	t.Cleanup(func() { w.Close() })
	it, err := c.Chunk(testContext(t), r, Params{Fingerprint: "none"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(it.Close)
	go w.Write(randomBytes(47, DefaultMessageSize)) // one message, then no end
	if !it.Next() {
		t.Fatalf("the held stream ended: %v", it.Err())
	}
}

// TestResourceExhaustedKeepsTheServersMessage: with --max_streams=1 and one
// stream open, every Chunk and Dedup entry point fails with the server's
// RESOURCE_EXHAUSTED naming --max_streams.
func TestResourceExhaustedKeepsTheServersMessage(t *testing.T) {
	s := startServer(t, "--max_streams=1")
	c := dial(t, s.addr)
	holdStream(t, c)
	for name, read := range entryPoints {
		_, err := read(testContext(t), c, bytes.NewReader(randomBytes(3, 10_000)), Params{})
		msg := status.Convert(err).Message()
		if status.Code(err) != codes.ResourceExhausted || !strings.Contains(msg, "--max_streams") ||
			!strings.Contains(msg, "limit of 1 streams") {
			t.Errorf("%s: %v", name, err)
		}
		// The refusal says why in its ErrorInfo, wrapped or not.
		for _, e := range []error{err, fmt.Errorf("wrapped: %w", err)} {
			info := ErrorInfoOf(e)
			if info == nil || info.Reason != "STREAM_LIMIT" || info.Domain != "chunkd.dev" ||
				info.Metadata["flag"] != "--max_streams" || info.Metadata["limit"] != "1" {
				t.Errorf("%s: ErrorInfo %+v of %v", name, info, e)
			}
			if ReasonOf(e) != "STREAM_LIMIT" {
				t.Errorf("%s: ReasonOf(%v) = %q", name, e, ReasonOf(e))
			}
		}
	}
}

// TestNoReasonWithoutErrorInfo: errors without an ErrorInfo (the server's
// INVALID_ARGUMENT, the client's own, plain errors) have no reason.
func TestNoReasonWithoutErrorInfo(t *testing.T) {
	s := startServer(t)
	c := dial(t, s.addr)
	_, err := c.FindMissing(testContext(t), "bad ns", [][]byte{make([]byte, 32)})
	if status.Code(err) != codes.InvalidArgument || ReasonOf(err) != "" || ErrorInfoOf(err) != nil {
		t.Errorf("FindMissing: %v has reason %q", err, ReasonOf(err))
	}
	for _, e := range []error{nil, io.EOF, argumentError("namespace", "empty"),
		clientError(codes.DataLoss, "short")} {
		if ReasonOf(e) != "" || ErrorInfoOf(e) != nil {
			t.Errorf("%v has reason %q", e, ReasonOf(e))
		}
	}
}

// TestUnavailableFromEveryCall: nothing listens at the address.
func TestUnavailableFromEveryCall(t *testing.T) {
	addr := freePort(t)
	c := dial(t, addr)
	check := func(what string, err error) {
		t.Helper()
		if status.Code(err) != codes.Unavailable || !strings.Contains(status.Convert(err).Message(), addr) {
			t.Errorf("%s: %v, want UNAVAILABLE naming %s", what, err, addr)
		}
	}
	for name, read := range entryPoints {
		_, err := read(testContext(t), c, bytes.NewReader([]byte("abc")), Params{})
		check(name, err)
	}
	_, err := c.FindMissing(testContext(t), "ns", [][]byte{make([]byte, 32)})
	check("FindMissing", err)
	_, err = c.Release(testContext(t), "ns", [][]byte{make([]byte, 32)}, ReleaseOptions{})
	check("Release", err)
	_, err = c.ServerInfo(testContext(t))
	check("ServerInfo", err)
}

// TestInvalidArgumentKeepsTheServersMessage: the server's INVALID_ARGUMENT
// reaches the caller of every call with its message unchanged.
func TestInvalidArgumentKeepsTheServersMessage(t *testing.T) {
	s := startServer(t)
	c := dial(t, s.addr)
	const badNamespace = "namespace may contain only [A-Za-z0-9._-]; character 0x20 is not allowed"
	_, err := c.FindMissing(testContext(t), "bad ns", [][]byte{make([]byte, 32)})
	wantStatus(t, "FindMissing", err, codes.InvalidArgument, badNamespace)
	_, err = c.Release(testContext(t), "bad ns", [][]byte{make([]byte, 32)}, ReleaseOptions{})
	wantStatus(t, "Release", err, codes.InvalidArgument, badNamespace)
	it, err := c.Dedup(testContext(t), "bad ns", bytes.NewReader([]byte("abc")), Params{})
	if err != nil {
		t.Fatal(err)
	}
	_, _, err = it.Collect()
	wantStatus(t, "Dedup", err, codes.InvalidArgument, badNamespace)
	for name, read := range entryPoints {
		_, err := read(testContext(t), c, bytes.NewReader([]byte("abc")),
			Params{Algorithm: "crc32", NormalizationLevel: Level(2)})
		wantStatus(t, name, err, codes.InvalidArgument, "chunking.normalization_level is not a parameter of crc32 "+
			"(it takes min_size, avg_size, max_size); leave normalization_level unset")
	}
	_, err = entryPoints["Chunk Collect"](testContext(t), c, bytes.NewReader([]byte("abc")),
		Params{Algorithm: "fixed", MinSize: 4096})
	wantStatus(t, "fixed with MinSize", err, codes.InvalidArgument,
		"chunking.min_size is not a parameter of fixed (it takes avg_size); leave min_size unset")
}

// takes is the server's table of the ChunkingParams fields each algorithm
// uses, in the order of its messages.
var takes = map[string][]string{
	"fastcdc": {"min_size", "avg_size", "max_size", "normalization_level", "seed"},
	"crc32":   {"min_size", "avg_size", "max_size"},
	"seqcdc":  {"min_size", "max_size", "seq_mode", "seq_length", "skip_trigger", "skip_size"},
	"fixed":   {"avg_size"},
}

// setField sets the Params field of a ChunkingParams field to a value valid
// for the algorithms that use it.
var setField = map[string]func(*Params){
	"min_size":            func(p *Params) { p.MinSize = 2048 },
	"avg_size":            func(p *Params) { p.AvgSize = 8192 },
	"max_size":            func(p *Params) { p.MaxSize = 32768 },
	"normalization_level": func(p *Params) { p.NormalizationLevel = Level(2) },
	"seed":                func(p *Params) { p.Seed = 7 },
	"seq_mode":            func(p *Params) { p.SeqMode = "decreasing" },
	"seq_length":          func(p *Params) { p.SeqLength = 4 },
	"skip_trigger":        func(p *Params) { p.SkipTrigger = 40 },
	"skip_size":           func(p *Params) { p.SkipSize = 256 },
}

// TestParamsAnAlgorithmDoesNotTake: the client sends what the caller set
// and nothing else. Every algorithm works with zero Params and with all of
// its own fields set; any other field set alone is the server's
// INVALID_ARGUMENT naming it.
func TestParamsAnAlgorithmDoesNotTake(t *testing.T) {
	s := startServer(t)
	c := dial(t, s.addr)
	data := randomBytes(53, 100_000)
	chunk := func(p Params) (uint64, error) {
		return entryPoints["Chunk Collect"](testContext(t), c, bytes.NewReader(data), p)
	}
	for algorithm, fields := range takes {
		if total, err := chunk(Params{Algorithm: algorithm}); err != nil || total != uint64(len(data)) {
			t.Errorf("%s with zero Params: %v (total_bytes %d)", algorithm, err, total)
		}
		own := Params{Algorithm: algorithm}
		for _, field := range fields {
			setField[field](&own)
		}
		if total, err := chunk(own); err != nil || total != uint64(len(data)) {
			t.Errorf("%s with %+v: %v (total_bytes %d)", algorithm, own, err, total)
		}
		for field, set := range setField {
			if strings.Contains(" "+strings.Join(fields, " ")+" ", " "+field+" ") {
				continue
			}
			p := Params{Algorithm: algorithm}
			set(&p)
			_, err := chunk(p)
			wantStatus(t, fmt.Sprintf("%s with %s", algorithm, field), err, codes.InvalidArgument,
				fmt.Sprintf("chunking.%s is not a parameter of %s (it takes %s); leave %s unset",
					field, algorithm, strings.Join(fields, ", "), field))
		}
	}
}
