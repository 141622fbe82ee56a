package chunkd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"iter"
	"sync"

	"google.golang.org/grpc/codes"
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
// Close releases the call early (always safe to defer). Not safe for
// concurrent use.
type Iterator[R, S any] struct {
	cancel     context.CancelFunc
	recv       func() ([]R, *S, error)
	totalBytes func(*S) uint64
	sender     *sender
	batch      []R
	current    R
	summary    *S
	err        error
	done       bool
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
		batch, summary, err := it.recv()
		switch {
		case errors.Is(err, io.EOF):
			it.finish(it.verify())
			return false
		case err != nil:
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
			it.batch = batch
		}
	}
	it.current, it.batch = it.batch[0], it.batch[1:]
	return true
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
	it.cancel()
	if readErr := it.sender.readError(); readErr != nil {
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
	sent, complete := it.sender.progress()
	if it.summary == nil {
		return status.Errorf(codes.DataLoss, "the stream ended without a summary; %d bytes were sent", sent)
	}
	if total := it.totalBytes(it.summary); total != sent {
		return status.Errorf(codes.DataLoss, "server summary reports total_bytes=%d but %d bytes were sent", total, sent)
	}
	if !complete {
		return status.Errorf(codes.DataLoss,
			"the server ended the stream before the input was sent in full: its summary reports total_bytes=%d after %d bytes were sent",
			it.totalBytes(it.summary), sent)
	}
	return nil
}

func protocolError(what string) error {
	return status.Error(codes.Internal, "chunkd: protocol violation by the server: "+what)
}

// sender streams an io.Reader as data messages on its own goroutine.
type sender struct {
	mu   sync.Mutex
	err  error
	sent uint64 // data bytes of the messages sent
	done bool   // all the input was sent; the client half-closed
}

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

// Chunk streams r to the server and returns an iterator over its chunks.
// The error is for bad Params; failures of the call come from Err.
func (c *Client) Chunk(ctx context.Context, r io.Reader, p Params) (*ChunkIterator, error) {
	chunking, fp, size, err := p.proto()
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	stream, err := c.stub.Chunk(ctx)
	if err != nil {
		cancel()
		return nil, err
	}
	s := &sender{}
	params := &pb.ChunkParams{Chunking: chunking, Fingerprint: fp}
	go s.run(r, size, func(data []byte, first bool) error {
		req := &pb.ChunkRequest{Data: data}
		if first {
			req.Params = params
		}
		return stream.Send(req)
	}, stream.CloseSend, cancel)
	return &ChunkIterator{
		cancel:     cancel,
		sender:     s,
		totalBytes: func(s *Summary) uint64 { return s.TotalBytes },
		recv: func() ([]Chunk, *Summary, error) {
			resp, err := stream.Recv()
			if err != nil {
				return nil, nil, err
			}
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
		},
	}, nil
}

// Dedup streams r to the server, which records its chunks in namespace's
// index; the iterator says per chunk whether it was new. An unknown
// Params.Hints (or any other name) is an error before any call is made.
func (c *Client) Dedup(ctx context.Context, namespace string, r io.Reader, p Params) (*DedupIterator, error) {
	chunking, fp, size, err := p.proto()
	if err != nil {
		return nil, err
	}
	hints, err := hintTest(p.Hints)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	stream, err := c.stub.Dedup(ctx)
	if err != nil {
		cancel()
		return nil, err
	}
	s := &sender{}
	params := &pb.DedupParams{Chunking: chunking, Fingerprint: fp, Namespace: namespace,
		StreamId: p.StreamID, Hints: hints}
	go s.run(r, size, func(data []byte, first bool) error {
		req := &pb.DedupRequest{Data: data}
		if first {
			req.Params = params
		}
		return stream.Send(req)
	}, stream.CloseSend, cancel)
	return &DedupIterator{
		cancel:     cancel,
		sender:     s,
		totalBytes: func(s *DedupSummary) uint64 { return s.TotalBytes },
		recv: func() ([]DedupChunk, *DedupSummary, error) {
			resp, err := stream.Recv()
			if err != nil {
				return nil, nil, err
			}
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
		},
	}, nil
}
