// Iterator: the records of one stream as the caller reads them, the
// summary's check, and the switch to a replay when an attempt fails.

package chunkd

import (
	"context"
	"errors"
	"io"
	"iter"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

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
	var total uint64
	if it.summary != nil {
		total, _ = it.totals(it.summary)
	}
	if err := checkTotal("summary", it.summary != nil, total, sent, complete); err != nil {
		return err
	}
	if it.replay != nil {
		return it.given.checkSummary(it.totals(it.summary))
	}
	return nil
}

// checkTotal checks the answer of a stream the server ended OK: a what
// ("summary", "result") was received (has), counting total bytes, equal to
// the sent bytes, after the input was sent in full (complete); anything
// else is DATA_LOSS.
func checkTotal(what string, has bool, total, sent uint64, complete bool) error {
	if !has {
		return status.Errorf(codes.DataLoss, "the stream ended without a %s; %d bytes were sent", what, sent)
	}
	if total != sent {
		return status.Errorf(codes.DataLoss, "server %s reports total_bytes=%d but %d bytes were sent", what, total, sent)
	}
	if !complete {
		return status.Errorf(codes.DataLoss,
			"the server ended the stream before the input was sent in full: its %s reports total_bytes=%d after %d bytes were sent",
			what, total, sent)
	}
	return nil
}
