package chunkd

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"io"
	"iter"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/status"

	pb "github.com/chunkd/chunkd/clients/go/chunkdpb"
)

// Chunk is one chunk: bytes [Offset, Offset+Length) of the stream and their
// fingerprint (32 bytes for sha256, 16 for xxh128, empty for none).
type Chunk struct {
	Offset      uint64
	Length      uint32
	Fingerprint []byte
}

// DedupChunk is a chunk of a Dedup stream; IsNew is true when this stream
// added its fingerprint to the namespace, false for a duplicate.
type DedupChunk struct {
	Chunk
	IsNew bool
}

// Summary holds the totals of a finished Chunk stream.
type Summary struct {
	TotalBytes, TotalChunks uint64
}

// DedupSummary holds the totals of a finished Dedup stream, with what the
// RapidCDC next-chunk hints (Params.Hints) did: HintsTried hints tested,
// HintsAccepted taken as the next chunk without scanning, HintsRejected cut
// normally instead, and HintSkippedBytes the bytes of accepted hinted chunks
// (bytes the chunker did not scan). All four are 0 with hints off.
type DedupSummary struct {
	TotalBytes, TotalChunks, UniqueBytes, UniqueChunks         uint64
	HintsTried, HintsAccepted, HintsRejected, HintSkippedBytes uint64
}

// Iterator walks the records of one stream as the server makes them final:
//
//	for it.Next() { use(it.Record()) }
//	if err := it.Err(); err != nil { ... }
//	summary := it.Summary()
//
// With Params.Retries, a stream that fails is replayed on a new call (see
// Params.Retries) and the iteration goes on: the replay's records before
// the end of the last record Next already gave are dropped, once checked
// to repeat the records given exactly (offsets, lengths and fingerprints),
// so the caller gets every record once, in order, as from one clean stream
// (with a StreamID the server answers a replayed Dedup exactly as the
// first time, IsNew included; docs/design.md, "Write tokens and idempotent
// retries"). A replay that cuts the input otherwise (a record across the
// end of the records given, a gap after it, other records before it: the
// input changed, or hints other than off and ff_rwt_fpt cut by what the
// index learned meanwhile) ends the iteration with DATA_LOSS, as does a
// summary that does not count the records given. Summary is the completed
// attempt's; Err is the last attempt's error when every replay failed.
// Errors the client finds itself (DATA_LOSS, a protocol violation by the
// server) are never replayed.
//
// Close releases the call early (always safe to defer). Not safe for
// concurrent use.
type Iterator[R, S any] struct {
	call    *attempt[R, S]
	replay  func(error) (*attempt[R, S], error) // nil without Params.Retries
	totals  func(*S) (bytes, chunks uint64)
	key     func(R) recordKey
	given   delivered // the records given, with Params.Retries
	batch   []R
	current R
	summary *S
	err     error
	done    bool
}

// attempt is one call of a stream: its responses, the goroutine sending
// its input, and the cancel of its context.
type attempt[R, S any] struct {
	recv   func() ([]R, *S, error)
	cancel context.CancelFunc
	sender *sender
}

// ChunkIterator is what Client.Chunk returns.
type ChunkIterator = Iterator[Chunk, Summary]

// DedupIterator is what Client.Dedup returns.
type DedupIterator = Iterator[DedupChunk, DedupSummary]

// Next advances to the next record; false at the end or on an error.
func (it *Iterator[R, S]) Next() bool {
	for len(it.batch) == 0 {
		if it.done {
			return false
		}
		batch, summary, err := it.call.recv()
		switch {
		case errors.Is(err, io.EOF):
			it.finish(it.verify())
			return false
		case err != nil:
			if it.replay != nil {
				if err = it.restart(err); err == nil {
					continue
				}
			}
			it.finish(err)
			return false
		case summary != nil && it.summary != nil:
			it.finish(protocolError("a second summary"))
			return false
		case summary != nil:
			it.summary = summary
		case it.summary != nil:
			it.finish(protocolError("records after the summary"))
			return false
		default:
			if it.batch, err = it.fresh(batch); err != nil {
				it.finish(err)
				return false
			}
		}
	}
	it.current, it.batch = it.batch[0], it.batch[1:]
	return true
}

// fresh drops the records a replay repeats (see delivered); without
// Params.Retries every record is fresh.
func (it *Iterator[R, S]) fresh(batch []R) ([]R, error) {
	if it.replay == nil {
		return batch, nil
	}
	kept := batch[:0]
	for _, r := range batch {
		isNew, err := it.given.take(it.key(r))
		if err != nil {
			return nil, err
		}
		if isNew {
			kept = append(kept, r)
		}
	}
	return kept, nil
}

// recordKey is what a replay must repeat of a record.
type recordKey struct {
	offset      uint64
	length      uint32
	fingerprint []byte
}

// delivered are the records a stream with Params.Retries has given, as
// every replay must repeat them: where they end, how many there are, and a
// SHA-256 over their offsets, lengths and fingerprints (a few dozen bytes,
// however long the stream). After a replay starts, the records before that
// end are repeats, checked against the records given once the replay
// reaches it. A replay that does not repeat them exactly (a record across
// that end, a gap, other offsets, lengths or fingerprints before it) means
// the input, or the index the hints learn from, changed under the replay:
// DATA_LOSS, as are records that do not follow each other and a summary
// that does not add up to the records given.
type delivered struct {
	end, count uint64
	digest     hash.Hash
	// The repeats of a replay that is still before end; nil otherwise.
	repeat      hash.Hash
	repeatCount uint64
	replayed    bool
}

// replaying is called when a replay starts from the input's start.
func (d *delivered) replaying() {
	d.repeat, d.repeatCount, d.replayed = nil, 0, true
	if d.end > 0 {
		d.repeat = sha256.New()
	}
}

// gap is the DATA_LOSS of a record at offset that does not follow the
// records given.
func (d *delivered) gap(offset uint64) error {
	const what = "goes on with a chunk at offset %d, where the chunks already returned end at %d"
	if d.replayed {
		return changed(what, offset, d.end)
	}
	return clientError(codes.DataLoss, "the stream "+what, offset, d.end)
}

// take says whether a record is new to the caller (and counts it), or a
// repeat; DATA_LOSS for a replay that cuts otherwise.
func (d *delivered) take(k recordKey) (bool, error) {
	var head [12]byte
	binary.LittleEndian.PutUint64(head[:8], k.offset)
	binary.LittleEndian.PutUint32(head[8:], k.length)
	end := k.offset + uint64(k.length)
	if d.repeat == nil {
		if k.offset != d.end {
			return false, d.gap(k.offset)
		}
		if d.digest == nil {
			d.digest = sha256.New()
		}
		d.digest.Write(head[:])
		d.digest.Write(k.fingerprint)
		d.end, d.count = end, d.count+1
		return true, nil
	}
	switch {
	case k.offset >= d.end:
		return false, d.gap(k.offset)
	case end > d.end:
		return false, changed("has a chunk [%d, %d) across offset %d, where the chunks already returned end",
			k.offset, end, d.end)
	}
	d.repeat.Write(head[:])
	d.repeat.Write(k.fingerprint)
	d.repeatCount++
	if end == d.end {
		if d.repeatCount != d.count || !bytes.Equal(d.repeat.Sum(nil), d.digest.Sum(nil)) {
			return false, changed("has %d chunks before offset %d that differ from the %d already returned "+
				"(in offsets, lengths or fingerprints)", d.repeatCount, d.end, d.count)
		}
		d.repeat = nil
	}
	return false, nil
}

// checkSummary is DATA_LOSS unless the summary of the attempt that ended
// OK counts the records given, no more and no less.
func (d *delivered) checkSummary(totalBytes, totalChunks uint64) error {
	if d.repeat != nil {
		return changed("ended at offset %d, before offset %d, where the chunks already returned end",
			totalBytes, d.end)
	}
	if totalBytes != d.end || totalChunks != d.count {
		return clientError(codes.DataLoss,
			"the stream's summary counts %d bytes in %d chunks, but the chunks returned cover %d bytes in %d",
			totalBytes, totalChunks, d.end, d.count)
	}
	return nil
}

func changed(format string, args ...any) error {
	return clientError(codes.DataLoss, "the replayed stream "+format+
		": the source or the index changed under the replay", args...)
}

// restart ends the failed attempt and replaces it by a replay; the error
// when there is none to make (a read error of the input, an error that is
// not retried, no retries left).
func (it *Iterator[R, S]) restart(err error) error {
	it.call.cancel()
	it.call.sender.wait()
	if readErr := it.call.sender.readError(); readErr != nil {
		return readErr
	}
	next, err := it.replay(err)
	if err != nil {
		return err
	}
	it.call, it.summary = next, nil
	it.given.replaying()
	return nil
}

// Record is the record Next moved to.
func (it *Iterator[R, S]) Record() R { return it.current }

// Err is the error that ended the iteration, nil after a complete stream:
// a gRPC status error, or the error reading the input. A stream the server
// ended OK is complete only when its summary's TotalBytes is the number of
// bytes sent, after all the input was sent; otherwise Err is DATA_LOSS.
func (it *Iterator[R, S]) Err() error { return it.err }

// Summary is the server's totals; the zero value until Next returned false
// without an error.
func (it *Iterator[R, S]) Summary() S {
	if it.summary == nil || it.err != nil {
		var zero S
		return zero
	}
	return *it.summary
}

// All ranges over the remaining records:
//
//	for ch := range it.All() { ... }
//	if err := it.Err(); err != nil { ... }
//
// Breaking out of the loop leaves the call running until Close.
func (it *Iterator[R, S]) All() iter.Seq[R] {
	return func(yield func(R) bool) {
		for it.Next() {
			if !yield(it.Record()) {
				return
			}
		}
	}
}

// Collect reads the remaining records and returns them with the summary.
func (it *Iterator[R, S]) Collect() ([]R, S, error) {
	defer it.Close()
	var records []R
	for it.Next() {
		records = append(records, it.Record())
	}
	return records, it.Summary(), it.Err()
}

// Close abandons the call if it still runs. Idempotent.
func (it *Iterator[R, S]) Close() {
	if !it.done {
		it.finish(nil)
	}
}

func (it *Iterator[R, S]) finish(err error) {
	it.done = true
	it.call.cancel()
	if readErr := it.call.sender.readError(); readErr != nil {
		err = readErr
	}
	if err != nil && it.err == nil {
		it.err = err
	}
}

// verify checks a stream the server ended OK: it must have sent a summary
// whose total_bytes is the number of data bytes sent, after all the input
// was sent. Anything else is DATA_LOSS: the records cannot be trusted to
// cover the input.
func (it *Iterator[R, S]) verify() error {
	sent, complete := it.call.sender.progress()
	if it.summary == nil {
		return status.Errorf(codes.DataLoss, "the stream ended without a summary; %d bytes were sent", sent)
	}
	total, _ := it.totals(it.summary)
	if total != sent {
		return status.Errorf(codes.DataLoss, "server summary reports total_bytes=%d but %d bytes were sent", total, sent)
	}
	if !complete {
		return status.Errorf(codes.DataLoss,
			"the server ended the stream before the input was sent in full: its summary reports total_bytes=%d after %d bytes were sent",
			total, sent)
	}
	if it.replay != nil {
		return it.given.checkSummary(it.totals(it.summary))
	}
	return nil
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

// sender streams an io.Reader as data messages on its own goroutine.
type sender struct {
	mu       sync.Mutex
	err      error
	sent     uint64        // data bytes of the messages sent
	done     bool          // all the input was sent; the client half-closed
	finished chan struct{} // closed when run returns
}

func newSender() *sender { return &sender{finished: make(chan struct{})} }

// wait returns once run has returned: the input is no longer read.
func (s *sender) wait() { <-s.finished }

// progress returns the number of data bytes sent and whether that was all
// the input. The counts are updated before the half-close, so once the server
// answered it they are final.
func (s *sender) progress() (uint64, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.sent, s.done
}

func (s *sender) readError() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

// run reads r in messages of size bytes; send(data, first) sends one (the
// first carries the parameters, and is sent even for empty input). A read
// error is kept and cancels the call.
func (s *sender) run(r io.Reader, size int, send func([]byte, bool) error, closeSend func() error, cancel context.CancelFunc) {
	defer close(s.finished)
	first := true
	for {
		buf := make([]byte, size) // a fresh buffer: gRPC may hold a sent message
		n, err := io.ReadFull(r, buf)
		if n > 0 || first {
			// Counted before the message can reach the server, so that a
			// summary never arrives ahead of the count of its bytes.
			s.mu.Lock()
			s.sent += uint64(n)
			s.mu.Unlock()
			if send(buf[:n], first) != nil {
				s.mu.Lock()
				s.sent -= uint64(n)
				s.mu.Unlock()
				return // the stream ended; Recv reports why
			}
			first = false
		}
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			s.mu.Lock()
			s.done = true
			s.mu.Unlock()
			_ = closeSend()
			return
		}
		if err != nil {
			s.mu.Lock()
			s.err = fmt.Errorf("chunkd: reading the input: %w", err)
			s.mu.Unlock()
			cancel()
			return
		}
	}
}

// openStream starts one call of a stream: it opens the stream with
// start(ctx), sends r from a new goroutine with the parameters in the first
// request, and converts the responses. timeout (0: none) bounds the call.
func openStream[Req, Resp, R, S any](parent context.Context, timeout time.Duration, r io.Reader, size int,
	start func(context.Context) (grpc.BidiStreamingClient[Req, Resp], error),
	request func(data []byte, first bool) *Req,
	convert func(*Resp) ([]R, *S, error)) (*attempt[R, S], error) {
	var ctx context.Context
	var cancel context.CancelFunc
	if timeout > 0 {
		ctx, cancel = context.WithTimeout(parent, timeout)
	} else {
		ctx, cancel = context.WithCancel(parent)
	}
	stream, err := start(ctx)
	if err != nil {
		cancel()
		return nil, err
	}
	s := newSender()
	go s.run(r, size, func(data []byte, first bool) error {
		return stream.Send(request(data, first))
	}, stream.CloseSend, cancel)
	return &attempt[R, S]{
		cancel: cancel,
		sender: s,
		recv: func() ([]R, *S, error) {
			resp, err := stream.Recv()
			if err != nil {
				return nil, nil, err
			}
			return convert(resp)
		},
	}, nil
}

// replayer makes the replays of Params.Retries.
type replayer[R, S any] struct {
	client  *Client
	ctx     context.Context // the caller's
	timeout time.Duration
	source  io.ReadSeeker
	start   int64 // the source's position when the call was made
	left    int   // replays left
	made    int   // replays made
	open    func() (*attempt[R, S], error)
	notify  func(err error, wait time.Duration) // Params.OnReplay; may be nil
}

// newReplayer checks that r can be replayed: an io.ReadSeeker that tells
// its position.
func newReplayer[R, S any](c *Client, ctx context.Context, p Params, r io.Reader) (*replayer[R, S], error) {
	source, ok := r.(io.ReadSeeker)
	if !ok {
		return nil, argumentError("Params.Retries", "a replay needs an io.ReadSeeker to read the input again; %T is not one", r)
	}
	start, err := source.Seek(0, io.SeekCurrent)
	if err != nil {
		return nil, argumentError("Params.Retries", "a replay needs a seekable input: %v", err)
	}
	return &replayer[R, S]{client: c, ctx: ctx, timeout: p.Timeout, source: source, start: start, left: p.Retries,
		notify: p.OnReplay}, nil
}

// retried says whether err ends an attempt that is replayed: UNAVAILABLE,
// ABORTED, RESOURCE_EXHAUSTED and INTERNAL; DEADLINE_EXCEEDED of the
// per-call Timeout (not of the caller's context); CANCELLED that the
// caller did not cause (not its context, not Client.Close): a server
// stopped past its shutdown deadline, or a proxy that drops the stream,
// resets it with RST_STREAM CANCEL, which gRPC reports as CANCELLED. Never
// an error the client found itself.
func (p *replayer[R, S]) retried(err error) bool {
	var own *ownError
	if p.ctx.Err() != nil || errors.As(err, &own) {
		return false
	}
	switch status.Code(err) {
	case codes.Unavailable, codes.Aborted, codes.ResourceExhausted, codes.Internal:
		return true
	case codes.Canceled:
		return p.client.conn.GetState() != connectivity.Shutdown
	case codes.DeadlineExceeded:
		return p.timeout > 0
	}
	return false
}

// replayWait is the wait before replay k (from 1): 0.1 s × 2^(k-1), at most
// 2 s. The shift is capped, for 100 ms << 5 is past the ceiling already and
// an uncapped one would overflow from replay 38 on.
func replayWait(k int) time.Duration {
	return min(100*time.Millisecond<<min(k-1, 5), 2*time.Second)
}

// replay makes replays after err until one starts or none is left; it
// returns the started attempt, or the last error.
func (p *replayer[R, S]) replay(err error) (*attempt[R, S], error) {
	for p.left > 0 && p.retried(err) {
		p.left--
		p.made++
		wait := replayWait(p.made)
		if p.notify != nil {
			p.notify(err, wait)
		}
		select {
		case <-time.After(wait):
		case <-p.ctx.Done():
			return nil, err
		}
		p.client.waitReady(p.ctx, time.Second<<min(p.made-1, 5))
		if _, seekErr := p.source.Seek(p.start, io.SeekStart); seekErr != nil {
			return nil, fmt.Errorf("chunkd: seeking the input back for a replay: %w", seekErr)
		}
		var next *attempt[R, S]
		if next, err = p.open(); err == nil {
			return next, nil
		}
	}
	return nil, err
}

// startIterator opens the first attempt (replaying it while it fails to
// start, with retries) and returns the iterator over its records.
func startIterator[R, S any](p *replayer[R, S], open func() (*attempt[R, S], error),
	totals func(*S) (uint64, uint64), key func(R) recordKey) (*Iterator[R, S], error) {
	call, err := open()
	if err != nil && p != nil {
		p.open = open
		call, err = p.replay(err)
	}
	if err != nil {
		return nil, err
	}
	it := &Iterator[R, S]{call: call, totals: totals, key: key}
	if p != nil {
		p.open = open
		it.replay = p.replay
	}
	return it, nil
}

// Chunk streams r to the server and returns an iterator over its chunks.
// The error is for bad Params (an *ArgumentError) or a call that could not
// start; failures of the call come from Err.
func (c *Client) Chunk(ctx context.Context, r io.Reader, p Params) (*ChunkIterator, error) {
	chunking, fp, size, err := p.proto()
	if err != nil {
		return nil, err
	}
	params := &pb.ChunkParams{Chunking: chunking, Fingerprint: fp}
	open := func() (*attempt[Chunk, Summary], error) {
		return openStream(ctx, p.Timeout, r, size,
			func(ctx context.Context) (grpc.BidiStreamingClient[pb.ChunkRequest, pb.ChunkResponse], error) {
				return c.stub.Chunk(ctx)
			},
			func(data []byte, first bool) *pb.ChunkRequest {
				req := &pb.ChunkRequest{Data: data}
				if first {
					req.Params = params
				}
				return req
			},
			chunkResponse)
	}
	var replays *replayer[Chunk, Summary]
	if p.Retries > 0 {
		if replays, err = newReplayer[Chunk, Summary](c, ctx, p, r); err != nil {
			return nil, err
		}
	}
	return startIterator(replays, open, func(s *Summary) (uint64, uint64) { return s.TotalBytes, s.TotalChunks },
		func(ch Chunk) recordKey { return recordKey{ch.Offset, ch.Length, ch.Fingerprint} })
}

func chunkResponse(resp *pb.ChunkResponse) ([]Chunk, *Summary, error) {
	if sum := resp.GetSummary(); sum != nil {
		return nil, &Summary{sum.GetTotalBytes(), sum.GetTotalChunks()}, nil
	}
	if resp.GetBatch() == nil {
		return nil, nil, protocolError("a response without a body")
	}
	records := make([]Chunk, 0, len(resp.GetBatch().GetChunks()))
	for _, r := range resp.GetBatch().GetChunks() {
		records = append(records, Chunk{r.GetOffset(), r.GetLength(), r.GetFingerprint()})
	}
	return records, nil, nil
}

// Dedup streams r to the server, which records its chunks in namespace's
// index; the iterator says per chunk whether it was new. Bad Params (an
// unknown Hints name, Retries with an r that cannot seek, ...) are an
// *ArgumentError before any call is made. With Params.Retries the stream
// carries Params.StreamID, or a random one when it is empty.
func (c *Client) Dedup(ctx context.Context, namespace string, r io.Reader, p Params) (*DedupIterator, error) {
	chunking, fp, size, err := p.proto()
	if err != nil {
		return nil, err
	}
	hints, err := hintTest(p.Hints)
	if err != nil {
		return nil, err
	}
	var replays *replayer[DedupChunk, DedupSummary]
	if p.Retries > 0 {
		if replays, err = newReplayer[DedupChunk, DedupSummary](c, ctx, p, r); err != nil {
			return nil, err
		}
		if p.StreamID == "" {
			p.StreamID = randomID()
		}
	}
	params := &pb.DedupParams{Chunking: chunking, Fingerprint: fp, Namespace: namespace,
		StreamId: p.StreamID, Hints: hints}
	open := func() (*attempt[DedupChunk, DedupSummary], error) {
		return openStream(ctx, p.Timeout, r, size,
			func(ctx context.Context) (grpc.BidiStreamingClient[pb.DedupRequest, pb.DedupResponse], error) {
				return c.stub.Dedup(ctx)
			},
			func(data []byte, first bool) *pb.DedupRequest {
				req := &pb.DedupRequest{Data: data}
				if first {
					req.Params = params
				}
				return req
			},
			dedupResponse)
	}
	return startIterator(replays, open,
		func(s *DedupSummary) (uint64, uint64) { return s.TotalBytes, s.TotalChunks },
		func(ch DedupChunk) recordKey { return recordKey{ch.Offset, ch.Length, ch.Fingerprint} })
}

func dedupResponse(resp *pb.DedupResponse) ([]DedupChunk, *DedupSummary, error) {
	if sum := resp.GetSummary(); sum != nil {
		return nil, &DedupSummary{sum.GetTotalBytes(), sum.GetTotalChunks(),
			sum.GetUniqueBytes(), sum.GetUniqueChunks(), sum.GetHintsTried(),
			sum.GetHintsAccepted(), sum.GetHintsRejected(), sum.GetHintSkippedBytes()}, nil
	}
	if resp.GetBatch() == nil {
		return nil, nil, protocolError("a response without a body")
	}
	records := make([]DedupChunk, 0, len(resp.GetBatch().GetChunks()))
	for _, r := range resp.GetBatch().GetChunks() {
		records = append(records, DedupChunk{
			Chunk{r.GetOffset(), r.GetLength(), r.GetFingerprint()}, r.GetIsNew()})
	}
	return records, nil, nil
}
