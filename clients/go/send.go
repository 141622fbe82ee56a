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
	if s.copy(r, size, &first, false, func(data []byte, first, _ bool) error { return send(data, first) }, cancel) {
		s.finish(closeSend)
	}
}

// runFiles is run over n inputs in turn, open(i) giving input i and the
// function that closes it: send(data, first, endOfFile) sends one message,
// the last of each input marked endOfFile (an empty one when the input
// ended at a message's end). An error opening an input is a read error.
func (s *sender) runFiles(n int, open func(int) (io.Reader, func(), error), size int,
	send func([]byte, bool, bool) error, closeSend func() error, cancel context.CancelFunc) {
	defer close(s.finished)
	first := true
	for i := 0; i < n; i++ {
		r, closeInput, err := open(i)
		if err != nil {
			s.fail(err, cancel)
			return
		}
		ok := s.copy(r, size, &first, true, send, cancel)
		closeInput()
		if !ok {
			return
		}
	}
	if first && send(nil, true, false) != nil { // no input: the parameters alone
		return
	}
	s.finish(closeSend)
}

// copy sends r in messages of size bytes; *first says whether the next
// message is the stream's first (sent even when empty). With marks the
// message where r ends is sent, empty or not, with end true. It returns
// whether r was sent to its end; a read error is kept and cancels the call.
func (s *sender) copy(r io.Reader, size int, first *bool, marks bool,
	send func(data []byte, first, end bool) error, cancel context.CancelFunc) bool {
	for {
		buf := make([]byte, size) // a fresh buffer: gRPC may hold a sent message
		n, err := io.ReadFull(r, buf)
		end := errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF)
		if n > 0 || *first || (end && marks) {
			// Counted before the message can reach the server, so that a
			// summary never arrives ahead of the count of its bytes.
			s.mu.Lock()
			s.sent += uint64(n)
			s.mu.Unlock()
			if send(buf[:n], *first, end) != nil {
				s.mu.Lock()
				s.sent -= uint64(n)
				s.mu.Unlock()
				return false // the stream ended; Recv reports why
			}
			*first = false
		}
		if end {
			return true
		}
		if err != nil {
			s.fail(err, cancel)
			return false
		}
	}
}

// finish records that all the input was sent and half-closes the stream.
func (s *sender) finish(closeSend func() error) {
	s.mu.Lock()
	s.done = true
	s.mu.Unlock()
	_ = closeSend()
}

// fail keeps a read error and cancels the call.
func (s *sender) fail(err error, cancel context.CancelFunc) {
	s.mu.Lock()
	s.err = fmt.Errorf("chunkd: reading the input: %w", err)
	s.mu.Unlock()
	cancel()
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
