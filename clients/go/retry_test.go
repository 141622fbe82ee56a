package chunkd

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/chunkd/chunkd/clients/go/internal/chunkdtest"
)

// crashingReader is a seekable input that runs crash once, the first time
// the reading passes at.
type crashingReader struct {
	*bytes.Reader
	at      int64
	crash   func()
	crashed atomic.Bool
}

func (r *crashingReader) Read(p []byte) (int, error) {
	pos, _ := r.Seek(0, io.SeekCurrent)
	if pos >= r.at && r.crashed.CompareAndSwap(false, true) {
		r.crash()
	}
	return r.Reader.Read(p)
}

// restartedMidway is data as an input that, once 8 MiB of it were read,
// kills the server (SIGKILL) and restarts it on the same port in the
// background, which reports on the channel. The kill waits (at most 30 s)
// until delivered, the caller's count of records, is above 0: on a loaded
// machine the server may not have answered any of the first 8 MiB yet.
func restartedMidway(s *chunkdtest.Server, data []byte, delivered *atomic.Int64) (*crashingReader, chan error) {
	restarted := make(chan error, 1)
	return &crashingReader{Reader: bytes.NewReader(data), at: 8 << 20, crash: func() {
		for wait := time.Now().Add(30 * time.Second); delivered.Load() == 0 && time.Now().Before(wait); {
			time.Sleep(5 * time.Millisecond)
		}
		s.Kill()
		go func() { restarted <- s.Restart() }()
	}}, restarted
}

// mustCollect is the records and summary of a stream that must succeed:
// mustCollect(c.Chunk(...))(t).
func mustCollect[R, S any](it *Iterator[R, S], err error) func(*testing.T) ([]R, S) {
	return func(t *testing.T) ([]R, S) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		records, summary, err := it.Collect()
		if err != nil {
			t.Fatal(err)
		}
		return records, summary
	}
}

// drainRestarted reads it to its end into got, counting the records in
// delivered (for restartedMidway), then waits for the restart; it returns
// the summary and the iteration's error.
func drainRestarted[R, S any](t *testing.T, it *Iterator[R, S], got *[]R, delivered *atomic.Int64,
	restarted chan error) (S, error) {
	t.Helper()
	for it.Next() {
		*got = append(*got, it.Record())
		delivered.Store(int64(len(*got)))
	}
	summary, err := it.Summary(), it.Err()
	it.Close()
	if restartErr := <-restarted; restartErr != nil {
		t.Fatal(restartErr)
	}
	return summary, err
}

// repeating is n copies of a random block: most chunks are referenced n
// times.
func repeating(seed int64, block, n int) []byte {
	b := randomBytes(seed, block)
	return bytes.Repeat(b, n)
}

// releaseCounts drops one reference of every fingerprint of records and
// returns the counts left.
func releaseCounts(t *testing.T, c *Client, ns string, records []DedupChunk) []uint64 {
	t.Helper()
	fps := make([][]byte, len(records))
	for i, r := range records {
		fps[i] = r.Fingerprint
	}
	counts, err := c.Release(testContext(t), ns, fps, ReleaseOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return counts
}

// TestDedupRetriesAcrossAServerRestart: chunkd on a Redis index is killed
// (SIGKILL) while a Dedup with Retries streams, then started again on the
// same port. The stream is replayed with its StreamID and the iteration
// goes on: the caller gets the records of one clean run, each once, and the
// reference counts equal those of a single run in another namespace.
func TestDedupRetriesAcrossAServerRestart(t *testing.T) {
	redis := chunkdtest.StartRedis(t)
	s := chunkdtest.StartServer(t, "--index=redis://"+redis)
	c := dial(t, s.Addr)
	data := repeating(61, 3<<20, 4) // 12 MiB
	// Each replay waits for the channel up to twice as long as the last
	// (1 s, 2 s, ...): six outlast the restart of chunkd on any machine.
	p := Params{MessageSize: 64 << 10, Retries: 6}

	clean := fmt.Sprintf("go-retry-clean-%d", time.Now().UnixNano())
	want, wantSummary := mustCollect(c.Dedup(testContext(t), clean, bytes.NewReader(data), p))(t)

	var delivered atomic.Int64
	in, restarted := restartedMidway(s, data, &delivered)
	ns := fmt.Sprintf("go-retry-%d", time.Now().UnixNano())
	// Records received before the kill are chunks the server committed:
	// the replay must then not count them again. The count at the first
	// replay is taken on the iterating goroutine (OnReplay runs on it).
	var replays []error
	var got []DedupChunk
	deliveredAtReplay := -1
	p.OnReplay = func(err error, _ time.Duration) {
		if replays = append(replays, err); len(replays) == 1 {
			deliveredAtReplay = len(got)
		}
	}
	it, err := c.Dedup(testContext(t), ns, in, p)
	if err != nil {
		t.Fatal(err)
	}
	summary, err := drainRestarted(t, it, &got, &delivered, restarted)
	if err != nil {
		t.Fatalf("Dedup with Retries across a restart: %v", err)
	}
	if !in.crashed.Load() || s.Metric(t, "grpc_server_started_total", `grpc_method="Dedup"`) != 1 {
		t.Fatal("the server was not restarted during the stream, or the stream was not replayed")
	}
	if len(replays) == 0 || status.Code(replays[0]) != codes.Unavailable || deliveredAtReplay <= 0 {
		t.Fatalf("replays %v; %d records delivered before the first: the kill must come after committed records",
			replays, deliveredAtReplay)
	}
	t.Logf("%d of %d records delivered before the replay", deliveredAtReplay, len(got))
	if fmt.Sprint(got) != fmt.Sprint(want) || summary != wantSummary {
		t.Fatalf("the replayed run gave %d records (summary %+v), a clean run %d (%+v)",
			len(got), summary, len(want), wantSummary)
	}
	wantCounts, gotCounts := releaseCounts(t, c, clean, want), releaseCounts(t, c, ns, got)
	if fmt.Sprint(gotCounts) != fmt.Sprint(wantCounts) {
		t.Fatalf("reference counts after the replayed run differ from a single run's:\n%v\n%v", gotCounts, wantCounts)
	}
	if wantCounts[len(wantCounts)/2] == 0 {
		t.Fatal("the data repeats, so a chunk in the middle is referenced more than once")
	}
}

// TestReplaysSkipWhatWasDelivered: a Dedup that fails after some records
// (DEADLINE_EXCEEDED of the per-call Timeout) is replayed; the iterator goes
// on past the records it gave, and counts equal one run's.
func TestReplaysSkipWhatWasDelivered(t *testing.T) {
	s := chunkdtest.StartServer(t)
	// The relay holds the first attempt after 2 MiB until its Timeout has
	// passed, however fast client and server are; the replay goes through.
	relay := chunkdtest.StartRelay(t, s.Addr, 2<<20)
	c := dial(t, relay.Addr)
	data := randomBytes(67, 4<<20)
	ns := fmt.Sprintf("go-replay-%d", time.Now().UnixNano())
	p := Params{MessageSize: 64 << 10, Retries: 1, Timeout: 5 * time.Second}
	p.OnReplay = func(error, time.Duration) { relay.Release() }
	it, err := c.Dedup(testContext(t), ns, bytes.NewReader(data), p)
	if err != nil {
		t.Fatal(err)
	}
	var records []DedupChunk
	next := uint64(0)
	for it.Next() {
		r := it.Record()
		if r.Offset != next {
			t.Fatalf("record at %d after one ending at %d", r.Offset, next)
		}
		next = r.Offset + uint64(r.Length)
		records = append(records, r)
	}
	if err := it.Err(); err != nil || next != uint64(len(data)) || it.Summary().TotalBytes != uint64(len(data)) {
		t.Fatalf("err %v, records to %d of %d, summary %+v", err, next, len(data), it.Summary())
	}
	if got := s.Metric(t, "grpc_server_started_total", `grpc_method="Dedup"`); got != 2 {
		t.Fatalf("%v Dedup streams, want 2 (one replay)", got)
	}
	for i, n := range releaseCounts(t, c, ns, records) {
		if n != 0 {
			t.Fatalf("chunk %d has %d references left after one release: the replay counted twice", i, n+1)
		}
	}
}

// TestDeadlineOfTheTimeoutIsReplayed: DEADLINE_EXCEEDED (the server's
// --stream_idle_timeout, or Params.Timeout) is replayed when the call has
// a Timeout, and final without one (the caller's context bounds it).
// A server answers it here, so no timer races the work.
func TestDeadlineOfTheTimeoutIsReplayed(t *testing.T) {
	data := randomBytes(67, 100_000)
	for _, timeout := range []time.Duration{time.Minute, 0} {
		flaky := chunkdtest.StartFlaky(t, 1)
		flaky.Code = codes.DeadlineExceeded
		it, err := dial(t, flaky.Addr).Dedup(testContext(t), "ns", bytes.NewReader(data),
			Params{Retries: 1, Timeout: timeout})
		if err == nil {
			_, _, err = it.Collect()
		}
		if timeout > 0 && (err != nil || flaky.Calls("Dedup") != 2) {
			t.Errorf("with a Timeout: %v after %d calls, want success after 2", err, flaky.Calls("Dedup"))
		}
		if timeout == 0 && (status.Code(err) != codes.DeadlineExceeded || flaky.Calls("Dedup") != 1) {
			t.Errorf("without a Timeout: %v after %d calls, want DEADLINE_EXCEEDED after 1", err, flaky.Calls("Dedup"))
		}
	}
}

// TestRetriesNeedASeekableInput and what is not retried.
func TestRetriesNeedASeekableInput(t *testing.T) {
	c := dial(t, freePort(t))
	_, err := c.Dedup(testContext(t), "ns", io.MultiReader(strings.NewReader("abc")), Params{Retries: 1})
	if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "Params.Retries") ||
		!strings.Contains(err.Error(), "io.ReadSeeker") {
		t.Fatalf("Retries with an io.Reader: %v", err)
	}
}

// TestRetriesReplayFailedStreams: streams that fail with UNAVAILABLE are
// replayed up to Retries more times, then the error is the last one.
func TestRetriesReplayFailedStreams(t *testing.T) {
	data := randomBytes(71, 100_000)
	flaky := chunkdtest.StartFlaky(t, 2)
	c := dial(t, flaky.Addr)
	it, err := c.Dedup(testContext(t), "ns", bytes.NewReader(data), Params{Retries: 2})
	if err != nil {
		t.Fatal(err)
	}
	if _, s, err := it.Collect(); err != nil || s.TotalBytes != uint64(len(data)) || flaky.Calls("Dedup") != 3 {
		t.Fatalf("Dedup, 2 failures, Retries 2: %v, %+v, %d calls", err, s, flaky.Calls("Dedup"))
	}
	chunks, err := c.Chunk(testContext(t), bytes.NewReader(data), Params{Retries: 1})
	if err == nil {
		_, _, err = chunks.Collect()
	}
	if status.Code(err) != codes.Unavailable || !strings.Contains(err.Error(), "call 2 of Chunk") {
		t.Fatalf("Chunk, 2 failures, Retries 1: %v", err)
	}
}

// TestReplaysThatCutOtherwise: the first attempt gives [0,100) and
// [100,200), then fails; a replay that cuts the input otherwise across
// offset 200, goes on past it, or repeats other records before it (other
// cuts, another fingerprint) is DATA_LOSS, final, rather than records that
// skip, repeat or contradict bytes; one that repeats them goes on.
func TestReplaysThatCutOtherwise(t *testing.T) {
	data := randomBytes(73, 300)
	first := spans(0, 100, 100, 200)
	for _, tc := range []struct {
		name   string
		replay []chunkdtest.Span
		want   string // in the DATA_LOSS error; "": none
	}{
		{"across", spans(0, 150, 150, 300), "a chunk [150, 300) across offset 200"},
		{"past", spans(0, 100, 100, 200, 250, 300), "goes on with a chunk at offset 250"},
		{"meeting", spans(0, 50, 50, 200, 200, 300),
			"has 2 chunks before offset 200 that differ from the 2 already returned"},
		{"other fingerprint", append(spans(0, 100), chunkdtest.Span{Offset: 100, Length: 100,
			Fingerprint: []byte("x")}, chunkdtest.Span{Offset: 200, Length: 100}),
			"has 2 chunks before offset 200 that differ"},
		{"repeating", spans(0, 100, 100, 200, 200, 300), ""},
	} {
		server := chunkdtest.StartScripted(t, first, tc.replay)
		c := dial(t, server.Addr)
		it, err := c.Dedup(testContext(t), "ns", bytes.NewReader(data), Params{Retries: 3})
		if err != nil {
			t.Fatal(err)
		}
		var offsets []uint64
		for it.Next() {
			offsets = append(offsets, it.Record().Offset)
		}
		err = it.Err()
		it.Close()
		if tc.want == "" {
			if err != nil || fmt.Sprint(offsets) != "[0 100 200]" || it.Summary().TotalBytes != 300 {
				t.Errorf("%s: %v, records at %v, summary %+v", tc.name, err, offsets, it.Summary())
			}
		} else if status.Code(err) != codes.DataLoss || !strings.Contains(err.Error(), tc.want) ||
			fmt.Sprint(offsets) != "[0 100]" {
			t.Errorf("%s: %v, records at %v; want DATA_LOSS %q after the records at [0 100]", tc.name, err, offsets, tc.want)
		}
		if server.Calls() != 2 {
			t.Errorf("%s: %d calls, want 2 (the client's DATA_LOSS is not replayed)", tc.name, server.Calls())
		}
	}
}

// spans are the records [bounds[0], bounds[1]), [bounds[2], bounds[3]), ...
func spans(bounds ...uint64) []chunkdtest.Span {
	var records []chunkdtest.Span
	for i := 0; i+1 < len(bounds); i += 2 {
		records = append(records, chunkdtest.Span{Offset: bounds[i], Length: bounds[i+1] - bounds[i]})
	}
	return records
}

// TestOnReplay: Params.OnReplay hears of each replay, with the error and
// the backoff, and not of an error the client found itself (a protocol
// violation of the server), which is never replayed.
func TestOnReplay(t *testing.T) {
	data := randomBytes(79, 10_000)
	flaky := chunkdtest.StartFlaky(t, 2)
	c := dial(t, flaky.Addr)
	var heard []string
	onReplay := func(err error, wait time.Duration) {
		heard = append(heard, fmt.Sprintf("%v: %s after %v", status.Code(err), status.Convert(err).Message(), wait))
	}
	it, err := c.Dedup(testContext(t), "ns", bytes.NewReader(data), Params{Retries: 2, OnReplay: onReplay})
	if err != nil {
		t.Fatal(err)
	}
	want := "[Unavailable: flaky: call 1 of Dedup after 100ms Unavailable: flaky: call 2 of Dedup after 200ms]"
	if _, _, err := it.Collect(); err != nil || fmt.Sprint(heard) != want {
		t.Fatalf("%v; OnReplay heard %q, want %q", err, heard, want)
	}

	heard = nil
	c = dial(t, chunkdtest.StartFake(t, chunkdtest.NoBody))
	it, err = c.Dedup(testContext(t), "ns", bytes.NewReader(data), Params{Retries: 2, OnReplay: onReplay})
	if err == nil {
		_, _, err = it.Collect()
	}
	if status.Code(err) != codes.Internal || !strings.Contains(err.Error(), "protocol violation") || len(heard) != 0 {
		t.Fatalf("a response without a body: %v; replays %q, want none", err, heard)
	}
}

// TestReplayWait: 0.1 s doubling per replay up to 2 s, however many replays
// (the shift does not overflow).
func TestReplayWait(t *testing.T) {
	for k, want := range map[int]time.Duration{1: 100 * time.Millisecond, 2: 200 * time.Millisecond,
		5: 1600 * time.Millisecond, 6: 2 * time.Second, 38: 2 * time.Second, MaxRetries: 2 * time.Second} {
		if got := replayWait(k); got != want {
			t.Errorf("replayWait(%d) = %v, want %v", k, got, want)
		}
	}
}

// TestChunkRetriesAcrossAServerRestart: chunkd is killed (SIGKILL) while a
// Chunk with Retries streams, after the caller has had records, then
// started again on the same port: the iteration goes on with the replay,
// and the caller gets the records of one clean run, each once, in order.
func TestChunkRetriesAcrossAServerRestart(t *testing.T) {
	s := chunkdtest.StartServer(t)
	c := dial(t, s.Addr)
	data := randomBytes(83, 12<<20)
	p := Params{MessageSize: 64 << 10, Retries: 3}
	want, wantSummary := mustCollect(c.Chunk(testContext(t), bytes.NewReader(data), p))(t)
	var delivered atomic.Int64
	in, restarted := restartedMidway(s, data, &delivered)
	var got []Chunk
	deliveredAtReplay := -1
	p.OnReplay = func(error, time.Duration) {
		if deliveredAtReplay < 0 {
			deliveredAtReplay = len(got)
		}
	}
	it, err := c.Chunk(testContext(t), in, p)
	if err != nil {
		t.Fatal(err)
	}
	summary, err := drainRestarted(t, it, &got, &delivered, restarted)
	if err != nil || deliveredAtReplay <= 0 {
		t.Fatalf("Chunk with Retries across a restart: %v; %d records delivered before the replay", err, deliveredAtReplay)
	}
	if fmt.Sprint(got) != fmt.Sprint(want) || summary != wantSummary {
		t.Fatalf("the replayed run gave %d records (summary %+v), a clean run %d (%+v)",
			len(got), summary, len(want), wantSummary)
	}
}

// TestCancelledIsReplayedUnlessTheCallerCancelled: a stream the server (or
// a proxy) ends CANCELLED is replayed; without Retries the CANCELLED is the
// error; a caller whose context ends, or who closes the client, is not
// replayed.
func TestCancelledIsReplayedUnlessTheCallerCancelled(t *testing.T) {
	data := randomBytes(89, 50_000)
	flaky := chunkdtest.StartFlaky(t, 1)
	flaky.Code = codes.Canceled
	c := dial(t, flaky.Addr)
	var heard []string
	onReplay := func(err error, _ time.Duration) { heard = append(heard, status.Convert(err).Message()) }
	it, err := c.Chunk(testContext(t), bytes.NewReader(data), Params{Retries: 1, OnReplay: onReplay})
	if err != nil {
		t.Fatal(err)
	}
	if _, s, err := it.Collect(); err != nil || s.TotalBytes != uint64(len(data)) ||
		fmt.Sprint(heard) != "[flaky: call 1 of Chunk]" {
		t.Fatalf("CANCELLED, Retries 1: %v, %+v, replays %q", err, s, heard)
	}
	flaky = chunkdtest.StartFlaky(t, 1)
	flaky.Code = codes.Canceled
	c = dial(t, flaky.Addr)
	if it, err = c.Chunk(testContext(t), bytes.NewReader(data), Params{}); err == nil {
		_, _, err = it.Collect()
	}
	if status.Code(err) != codes.Canceled {
		t.Fatalf("CANCELLED without Retries: %v", err)
	}

	s := chunkdtest.StartServer(t)
	for _, how := range []string{"context", "Close"} {
		c := dial(t, s.Addr)
		ctx, cancel := context.WithCancel(testContext(t))
		stalled := &crashingReader{Reader: bytes.NewReader(data), at: 1, crash: func() {
			if how == "context" {
				cancel()
			} else {
				c.Close()
			}
		}}
		heard = nil
		it, err := c.Chunk(ctx, stalled, Params{MessageSize: 1000, Retries: 3, OnReplay: onReplay})
		if err == nil {
			_, _, err = it.Collect()
		}
		cancel()
		if status.Code(err) != codes.Canceled || len(heard) != 0 {
			t.Errorf("the caller's %s ended the call: %v, replays %q", how, err, heard)
		}
	}
}

// TestATimeoutEndsAnAttemptWhileTheInputStalls: an input that gives some
// bytes and then blocks without ending: the call fails DEADLINE_EXCEEDED
// at Params.Timeout.
func TestATimeoutEndsAnAttemptWhileTheInputStalls(t *testing.T) {
	s := chunkdtest.StartServer(t)
	c := dial(t, s.Addr)
	read, write := io.Pipe()
	defer write.Close()
	go func() { _, _ = write.Write(randomBytes(97, 100_000)) }()
	it, err := c.Chunk(testContext(t), read, Params{Timeout: 500 * time.Millisecond})
	if err == nil {
		_, _, err = it.Collect()
	}
	if status.Code(err) != codes.DeadlineExceeded {
		t.Fatalf("a stalled input with a timeout: %v", err)
	}
}
