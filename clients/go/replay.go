// replayer: when and how a stream with Params.Retries is sent again
// (docs/clients.md, "Replaying streams").

package chunkd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/status"
)

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
