// Package chunkdtest starts the servers the tests of the Go client talk to:
// a real chunkd ($CHUNKD_BIN) on a free loopback port, and Fake, an
// in-process ChunkService for the answers a real chunkd never gives.
package chunkdtest

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"os"
	"os/exec"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	pb "github.com/chunkd/chunkd/clients/go/chunkdpb"
)

// Binary is $CHUNKD_BIN; the tests skip without it outside CI (`make test`
// always sets it) and fail without it in CI.
func Binary(t testing.TB) string {
	t.Helper()
	bin := os.Getenv("CHUNKD_BIN")
	if bin == "" {
		if os.Getenv("CI") != "" {
			t.Fatal("CHUNKD_BIN is not set (make test sets it to build/server/chunkd)")
		}
		t.Skip("CHUNKD_BIN is not set: no chunkd to test against (make test sets it)")
	}
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("CHUNKD_BIN: %v", err)
	}
	return bin
}

// FreePort returns a loopback address nothing listens on (any call to it
// fails with UNAVAILABLE).
func FreePort(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// Start starts chunkd with extra flags and waits until its health service
// reports SERVING; the server stops when the test ends. It returns the
// server's address.
func Start(t testing.TB, extra ...string) string {
	t.Helper()
	return StartWith(t, grpc.WithTransportCredentials(insecure.NewCredentials()), extra...)
}

// StartWith is Start with the credentials of the health checks.
func StartWith(t testing.TB, healthCreds grpc.DialOption, extra ...string) string {
	t.Helper()
	bin := Binary(t)
	addr, log := FreePort(t), &bytes.Buffer{}
	args := append([]string{"--listen=" + addr, "--metrics_listen=", "--index=memory"}, extra...)
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		select {
		case <-exited:
		case <-time.After(15 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
	})
	conn, err := grpc.NewClient(addr, healthCreds)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	health := healthpb.NewHealthClient(conn)
	deadline := time.Now().Add(30 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		resp, err := health.Check(ctx, &healthpb.HealthCheckRequest{})
		cancel()
		if err == nil && resp.GetStatus() == healthpb.HealthCheckResponse_SERVING {
			return addr
		}
		select {
		case err := <-exited:
			t.Fatalf("chunkd exited while starting (%v):\n%s", err, log)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("chunkd not SERVING after 30s (%v):\n%s", err, log)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Ending is how Fake ends a Chunk or Dedup stream that it answers OK.
type Ending int

const (
	// Honest sends one record covering the bytes received and a summary
	// with their number, as chunkd does.
	Honest Ending = iota
	// ShortSummary is Honest with total_bytes one less than was received.
	ShortSummary
	// NoSummary sends the record and ends the stream OK without a summary.
	NoSummary
	// EarlySummary answers after the first request, before the client has
	// sent all its input: a record and a summary of the bytes received so
	// far, then OK.
	EarlySummary
)

// fake is the ChunkService of StartFake.
type fake struct {
	pb.UnimplementedChunkServiceServer
	ending Ending
}

// StartFake serves a fake ChunkService on a free loopback port that ends
// every Chunk and Dedup stream as ending says; the server stops when the test
// ends. It returns the server's address.
func StartFake(t testing.TB, ending Ending) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := grpc.NewServer()
	pb.RegisterChunkServiceServer(s, &fake{ending: ending})
	served := make(chan struct{})
	go func() {
		defer close(served)
		_ = s.Serve(l)
	}()
	t.Cleanup(func() {
		s.Stop()
		<-served
	})
	return l.Addr().String()
}

// receive reads requests as the ending says and returns the number of data
// bytes received.
func receive[Req interface{ GetData() []byte }](ending Ending, recv func() (Req, error)) (uint64, error) {
	var n uint64
	for {
		req, err := recv()
		if errors.Is(err, io.EOF) {
			return n, nil
		}
		if err != nil {
			return n, err
		}
		n += uint64(len(req.GetData()))
		if ending == EarlySummary {
			return n, nil
		}
	}
}

func (f *fake) Chunk(stream grpc.BidiStreamingServer[pb.ChunkRequest, pb.ChunkResponse]) error {
	n, err := receive(f.ending, stream.Recv)
	if err != nil {
		return err
	}
	record := &pb.ChunkRecord{Offset: 0, Length: uint32(n)}
	if err := stream.Send(&pb.ChunkResponse{Body: &pb.ChunkResponse_Batch{
		Batch: &pb.ChunkBatch{Chunks: []*pb.ChunkRecord{record}}}}); err != nil {
		return err
	}
	if f.ending == NoSummary {
		return nil
	}
	if f.ending == ShortSummary {
		n--
	}
	return stream.Send(&pb.ChunkResponse{Body: &pb.ChunkResponse_Summary{
		Summary: &pb.ChunkSummary{TotalBytes: n, TotalChunks: 1}}})
}

func (f *fake) Dedup(stream grpc.BidiStreamingServer[pb.DedupRequest, pb.DedupResponse]) error {
	n, err := receive(f.ending, stream.Recv)
	if err != nil {
		return err
	}
	record := &pb.DedupRecord{Offset: 0, Length: uint32(n), IsNew: true}
	if err := stream.Send(&pb.DedupResponse{Body: &pb.DedupResponse_Batch{
		Batch: &pb.DedupBatch{Chunks: []*pb.DedupRecord{record}}}}); err != nil {
		return err
	}
	if f.ending == NoSummary {
		return nil
	}
	if f.ending == ShortSummary {
		n--
	}
	return stream.Send(&pb.DedupResponse{Body: &pb.DedupResponse_Summary{
		Summary: &pb.DedupSummary{TotalBytes: n, TotalChunks: 1, UniqueBytes: n, UniqueChunks: 1}}})
}
