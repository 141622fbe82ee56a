// sender: the requests of one stream, read from an io.Reader on their own
// goroutine; openStream starts one attempt of a stream.

package chunkd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"google.golang.org/grpc"
)

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
