package chunkd

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pb "github.com/chunkd/chunkd/clients/go/chunkdpb"
)

// dedupAll dedups data into ns and returns its records and summary.
func dedupAll(t *testing.T, c *Client, ns string, data []byte, p Params) ([]DedupChunk, DedupSummary) {
	t.Helper()
	it, err := c.Dedup(testContext(t), ns, bytes.NewReader(data), p)
	if err != nil {
		t.Fatal(err)
	}
	records, summary, err := it.Collect()
	if err != nil {
		t.Fatalf("Dedup %+v: %v", p, err)
	}
	if summary.TotalBytes != uint64(len(data)) {
		t.Fatalf("Dedup %+v: summary %+v for %d bytes", p, summary, len(data))
	}
	return records, summary
}

func sameChunks(t *testing.T, what string, got, want []DedupChunk) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d records, want %d", what, len(got), len(want))
	}
	for i := range want {
		g, w := got[i].Chunk, want[i].Chunk
		if g.Offset != w.Offset || g.Length != w.Length || !bytes.Equal(g.Fingerprint, w.Fingerprint) {
			t.Fatalf("%s: record %d is %d+%d %x, want %d+%d %x", what, i,
				g.Offset, g.Length, g.Fingerprint, w.Offset, w.Length, w.Fingerprint)
		}
	}
}

func TestHintNames(t *testing.T) {
	for value, want := range map[string]pb.HintTest{
		"": pb.HintTest_HINT_TEST_UNSPECIFIED, "off": pb.HintTest_HINT_TEST_OFF,
		"FF": pb.HintTest_HINT_TEST_FF, "ff_mt": pb.HintTest_HINT_TEST_FF_MT,
		"Ff_Rwt": pb.HintTest_HINT_TEST_FF_RWT, "ff_rwt_fpt": pb.HintTest_HINT_TEST_FF_RWT_FPT,
		"HINT_TEST_FF_MT": pb.HintTest_HINT_TEST_FF_MT, "hint_test_off": pb.HintTest_HINT_TEST_OFF,
		"5": pb.HintTest_HINT_TEST_FF_RWT_FPT, "0": pb.HintTest_HINT_TEST_UNSPECIFIED,
	} {
		got, err := hintTest(value)
		if err != nil || got != want {
			t.Errorf("hintTest(%q) = %v, %v; want %v", value, got, err, want)
		}
	}
	for _, value := range []string{"fast", "6", "-1", "ff-rwt", " off"} {
		if got, err := hintTest(value); err == nil {
			t.Errorf("hintTest(%q) = %v, want an error", value, got)
		}
	}
}

// TestDedupHints: a second pass over the same data with the default hints
// skips bytes and gives the first pass's records; off tries none;
// ff_rwt_fpt equals off record for record.
func TestDedupHints(t *testing.T) {
	s := startServer(t)
	c := dial(t, s.addr)
	data := randomBytes(23, 4<<20)
	ns := fmt.Sprintf("go-hints-%d", time.Now().UnixNano())
	first, sum1 := dedupAll(t, c, ns, data, Params{})
	if sum1.UniqueBytes != uint64(len(data)) || len(first) < 100 {
		t.Fatalf("first pass: %+v, %d records", sum1, len(first))
	}
	second, sum2 := dedupAll(t, c, ns, data, Params{})
	if sum2.HintsAccepted == 0 || sum2.HintSkippedBytes == 0 || sum2.HintsTried < sum2.HintsAccepted ||
		sum2.HintsAccepted+sum2.HintsRejected > sum2.HintsTried || sum2.HintSkippedBytes > sum2.TotalBytes {
		t.Fatalf("second pass with the default hints: %+v", sum2)
	}
	sameChunks(t, "second pass (default hints)", second, first)

	off, sumOff := dedupAll(t, c, ns, data, Params{Hints: "off"})
	if sumOff.HintsTried != 0 || sumOff.HintsAccepted != 0 || sumOff.HintSkippedBytes != 0 {
		t.Fatalf("hints off: %+v", sumOff)
	}
	sameChunks(t, "hints off", off, first)

	fpt, sumFpt := dedupAll(t, c, ns, data, Params{Hints: "FF_RWT_FPT"})
	if sumFpt.HintsAccepted == 0 {
		t.Fatalf("ff_rwt_fpt: %+v", sumFpt)
	}
	sameChunks(t, "ff_rwt_fpt against off", fpt, off)
	// The enum's own name means the same.
	if _, sum := dedupAll(t, c, ns, data, Params{Hints: "HINT_TEST_OFF"}); sum.HintsTried != 0 {
		t.Fatalf("HINT_TEST_OFF: %+v", sum)
	}
}

// TestUnknownHintsFailBeforeAnyCall: nothing listens at the address, so any
// call would end UNAVAILABLE; the error is the client's own *ArgumentError,
// INVALID_ARGUMENT as the server's refusal would be.
func TestUnknownHintsFailBeforeAnyCall(t *testing.T) {
	c := dial(t, freePort(t))
	it, err := c.Dedup(testContext(t), "ns", bytes.NewReader([]byte("abc")), Params{Hints: "ff_fast"})
	if err == nil {
		it.Close()
		t.Fatal("Dedup with Hints \"ff_fast\" returned an iterator")
	}
	var argErr *ArgumentError
	if !errors.As(err, &argErr) || argErr.Field != "Params.Hints" || status.Code(err) != codes.InvalidArgument {
		t.Fatalf("not the client's INVALID_ARGUMENT naming Params.Hints, so a call was made: %v", err)
	}
	msg := err.Error()
	for _, want := range []string{`"ff_fast"`, "Hints", "off, ff, ff_mt, ff_rwt, ff_rwt_fpt"} {
		if !strings.Contains(msg, want) {
			t.Errorf("error %q does not name %s", msg, want)
		}
	}
}

// TestHintsNeedFastCDC: the server refuses a hint test for crc32 with
// INVALID_ARGUMENT, which the iterator reports as the usual gRPC error;
// off is fine.
func TestHintsNeedFastCDC(t *testing.T) {
	s := startServer(t)
	c := dial(t, s.addr)
	data := randomBytes(5, 200_000)
	ns := fmt.Sprintf("go-hints-crc-%d", time.Now().UnixNano())
	p := Params{Algorithm: "crc32", Hints: "ff_rwt"}
	it, err := c.Dedup(testContext(t), ns, bytes.NewReader(data), p)
	if err != nil {
		t.Fatal(err)
	}
	_, _, err = it.Collect()
	var withStatus interface{ GRPCStatus() *status.Status }
	if status.Code(err) != codes.InvalidArgument || !errors.As(err, &withStatus) ||
		!strings.Contains(strings.ToLower(err.Error()), "hint") {
		t.Fatalf("crc32 with ff_rwt: %v", err)
	}
	t.Logf("server: %v", err)
	p.Hints = "off"
	if _, sum := dedupAll(t, c, ns, data, p); sum.HintsTried != 0 || sum.UniqueBytes != uint64(len(data)) {
		t.Fatalf("crc32 with hints off: %+v", sum)
	}
}
