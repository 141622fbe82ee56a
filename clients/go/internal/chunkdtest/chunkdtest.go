// Package chunkdtest starts the servers the tests of the Go client talk to:
// a real chunkd ($CHUNKD_BIN) on a free loopback port, and Fake, an
// in-process ChunkService for the answers a real chunkd never gives.
package chunkdtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

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
	s := &Server{bin: bin, Addr: FreePort(t), healthCreds: healthCreds,
		args: append([]string{"--metrics_listen=", "--index=memory"}, extra...)}
	if err := s.start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Stop)
	return s.Addr
}

// Server is a chunkd process that a test can kill and start again on the
// same addresses.
type Server struct {
	// Addr is the gRPC address, MetricsAddr that of /metrics ("" without).
	Addr, MetricsAddr string
	bin               string
	args              []string
	healthCreds       grpc.DialOption
	cmd               *exec.Cmd
	exited            chan error
	log               *bytes.Buffer
}

// StartServer starts chunkd ($CHUNKD_BIN) with /metrics on a port of its
// own, the memory index and extra flags (a later flag wins), and waits
// until it is SERVING; it stops when the test ends.
func StartServer(t testing.TB, extra ...string) *Server {
	t.Helper()
	s, err := Launch(Binary(t), extra...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Stop)
	return s
}

// Launch is StartServer without a test (for TestMain): the caller stops
// the server.
func Launch(bin string, extra ...string) (*Server, error) {
	addr, err := freePort()
	if err != nil {
		return nil, err
	}
	metrics, err := freePort()
	if err != nil {
		return nil, err
	}
	s := &Server{bin: bin, Addr: addr, MetricsAddr: metrics,
		healthCreds: grpc.WithTransportCredentials(insecure.NewCredentials()),
		args:        append([]string{"--metrics_listen=" + metrics, "--index=memory"}, extra...)}
	return s, s.start()
}

// start runs the process and waits until it is SERVING (30 s at most).
func (s *Server) start() error {
	s.log = &bytes.Buffer{}
	s.cmd = exec.Command(s.bin, append([]string{"--listen=" + s.Addr}, s.args...)...)
	s.cmd.Stdout, s.cmd.Stderr = s.log, s.log
	if err := s.cmd.Start(); err != nil {
		return err
	}
	s.exited = make(chan error, 1)
	go func(cmd *exec.Cmd, exited chan error) { exited <- cmd.Wait() }(s.cmd, s.exited)
	conn, err := grpc.NewClient(s.Addr, s.healthCreds)
	if err != nil {
		s.Kill()
		return err
	}
	defer conn.Close()
	health := healthpb.NewHealthClient(conn)
	deadline := time.Now().Add(30 * time.Second)
	for {
		// A refused connection fails at once; a loaded machine may take
		// seconds to answer.
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		resp, err := health.Check(ctx, &healthpb.HealthCheckRequest{})
		cancel()
		if err == nil && resp.GetStatus() == healthpb.HealthCheckResponse_SERVING {
			return nil
		}
		select {
		case err := <-s.exited:
			s.exited <- err
			return fmt.Errorf("chunkd exited while starting (%v):\n%s", err, s.log)
		default:
		}
		if time.Now().After(deadline) {
			s.Kill()
			return fmt.Errorf("chunkd not SERVING after 30s (%v):\n%s", err, s.log)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Stop interrupts the server (SIGINT) and waits for it, killing it after
// 15 s. Idempotent.
func (s *Server) Stop() {
	if s.cmd == nil {
		return
	}
	_ = s.cmd.Process.Signal(os.Interrupt)
	select {
	case <-s.exited:
	case <-time.After(15 * time.Second):
		_ = s.cmd.Process.Kill()
		<-s.exited
	}
	s.cmd = nil
}

// Kill kills the server at once (SIGKILL), as a crash would, and waits for
// it.
func (s *Server) Kill() {
	if s.cmd == nil {
		return
	}
	_ = s.cmd.Process.Kill()
	<-s.exited
	s.cmd = nil
}

// Restart starts the server again with the same flags and addresses.
func (s *Server) Restart() error {
	s.Kill()
	return s.start()
}

// Metric sums the samples of the metric name whose labels include every
// label of labels ("grpc_method=\"Chunk\""), read from /metrics.
func (s *Server) Metric(t testing.TB, name string, labels ...string) float64 {
	t.Helper()
	resp, err := http.Get("http://" + s.MetricsAddr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	sum := 0.0
	for _, line := range strings.Split(string(body), "\n") {
		if !strings.HasPrefix(line, name+"{") && !strings.HasPrefix(line, name+" ") {
			continue
		}
		matched := true
		for _, label := range labels {
			matched = matched && strings.Contains(line, label)
		}
		fields := strings.Fields(line)
		if v, err := strconv.ParseFloat(fields[len(fields)-1], 64); matched && err == nil {
			sum += v
		}
	}
	return sum
}

func freePort() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// StartRedis starts a redis-server (from $PATH) on a free loopback port,
// without persistence, and waits until it answers PING (10 s at most); it
// stops when the test ends. It returns its address.
func StartRedis(t testing.TB) string {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		t.Fatal("redis-server is not installed (make deps installs it)")
	}
	addr := FreePort(t)
	_, port, _ := net.SplitHostPort(addr)
	cmd := exec.Command(bin, "--port", port, "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
		"--dir", t.TempDir())
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if conn, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
			_ = conn.SetDeadline(time.Now().Add(time.Second))
			reply := make([]byte, 7)
			_, err = conn.Write([]byte("PING\r\n"))
			if err == nil {
				_, err = io.ReadFull(conn, reply)
			}
			conn.Close()
			if err == nil && string(reply) == "+PONG\r\n" {
				return addr
			}
		}
	}
	t.Fatalf("redis-server on %s did not answer PING within 10 s", addr)
	return ""
}

// Ending is how Fake ends a Chunk, Dedup or Estimate stream that it answers
// OK (a summary: Estimate's result).
type Ending int

const (
	// Honest sends one record covering the bytes received and a summary
	// with their number, as chunkd does.
	Honest Ending = iota
	// ShortSummary is Honest with total_bytes one less than was received.
	ShortSummary
	// NoSummary sends the record and ends the stream OK without a summary.
	NoSummary
	// NoBody sends a response with neither a batch nor a summary, then
	// ends the stream OK.
	NoBody
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
// every Chunk, Dedup and Estimate stream as ending says; the server stops
// when the test ends. It returns the server's address.
func StartFake(t testing.TB, ending Ending) string {
	t.Helper()
	return serveFake(t, &fake{ending: ending})
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
	if f.ending == NoBody {
		return stream.Send(&pb.ChunkResponse{})
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
	if f.ending == NoBody {
		return stream.Send(&pb.DedupResponse{})
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

// Estimate answers as the ending says: a progress message and a result
// (one set, labelled "fake") counting the bytes and the files received.
func (f *fake) Estimate(stream grpc.BidiStreamingServer[pb.EstimateRequest, pb.EstimateResponse]) error {
	var files uint64
	n, err := receive(f.ending, func() (*pb.EstimateRequest, error) {
		req, err := stream.Recv()
		if req.GetEndOfFile() {
			files++
		}
		return req, err
	})
	if err != nil {
		return err
	}
	if f.ending == NoBody {
		return stream.Send(&pb.EstimateResponse{})
	}
	if err := stream.Send(&pb.EstimateResponse{Body: &pb.EstimateResponse_Progress{
		Progress: &pb.EstimateProgress{Bytes: n, Files: files}}}); err != nil {
		return err
	}
	if f.ending == NoSummary {
		return nil
	}
	if f.ending == ShortSummary {
		n--
	}
	return stream.Send(&pb.EstimateResponse{Body: &pb.EstimateResponse_Result{Result: &pb.EstimateResult{
		Sets: []*pb.SetEstimate{{Label: "fake", Bytes: n}}, TotalBytes: n, Files: files, SampleRate: 1,
		Fingerprint: pb.FingerprintAlgorithm_FINGERPRINT_ALGORITHM_XXH128}}})
}

// Flaky is an in-process ChunkService whose calls of each method fail with
// UNAVAILABLE, or Code when it is set ("flaky: call N of METHOD"), until
// that method has failed Failures times; then Chunk and Dedup answer as
// Honest, GetServerInfo with the version "flaky", FindMissing with every
// fingerprint missing and Release with zero counts.
type Flaky struct {
	pb.UnimplementedChunkServiceServer
	// Addr is the server's address.
	Addr string
	// Code is the failures' code (set before the first call); OK means
	// UNAVAILABLE.
	Code     codes.Code
	failures int32
	calls    map[string]*atomic.Int32
	mu       sync.Mutex
	ids      []string // request_id of every Release call
}

// RequestIDs are the request_id of every Release call so far, in order.
func (f *Flaky) RequestIDs() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.ids...)
}

// serveFake serves service on a free loopback port until the test ends and
// returns its address.
func serveFake(t testing.TB, service pb.ChunkServiceServer) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := grpc.NewServer()
	pb.RegisterChunkServiceServer(s, service)
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

// StartFlaky serves a Flaky on a free loopback port until the test ends.
func StartFlaky(t testing.TB, failures int) *Flaky {
	t.Helper()
	f := &Flaky{failures: int32(failures), calls: map[string]*atomic.Int32{}}
	for _, m := range []string{"Chunk", "Dedup", "GetServerInfo", "FindMissing", "Release"} {
		f.calls[m] = &atomic.Int32{}
	}
	f.Addr = serveFake(t, f)
	return f
}

// Calls is the number of calls of method ("Dedup") so far.
func (f *Flaky) Calls(method string) int { return int(f.calls[method].Load()) }

// fail counts a call of method and returns its UNAVAILABLE, nil once
// Failures calls have failed.
func (f *Flaky) fail(method string) error {
	if n := f.calls[method].Add(1); n <= f.failures {
		code := f.Code
		if code == codes.OK {
			code = codes.Unavailable
		}
		return status.Errorf(code, "flaky: call %d of %s", n, method)
	}
	return nil
}

func (f *Flaky) Chunk(stream grpc.BidiStreamingServer[pb.ChunkRequest, pb.ChunkResponse]) error {
	if err := f.fail("Chunk"); err != nil {
		return err
	}
	return (&fake{ending: Honest}).Chunk(stream)
}

func (f *Flaky) Dedup(stream grpc.BidiStreamingServer[pb.DedupRequest, pb.DedupResponse]) error {
	if err := f.fail("Dedup"); err != nil {
		return err
	}
	return (&fake{ending: Honest}).Dedup(stream)
}

func (f *Flaky) GetServerInfo(context.Context, *pb.GetServerInfoRequest) (*pb.GetServerInfoResponse, error) {
	if err := f.fail("GetServerInfo"); err != nil {
		return nil, err
	}
	return &pb.GetServerInfoResponse{Version: "flaky"}, nil
}

func (f *Flaky) FindMissing(_ context.Context, req *pb.FindMissingRequest) (*pb.FindMissingResponse, error) {
	if err := f.fail("FindMissing"); err != nil {
		return nil, err
	}
	return &pb.FindMissingResponse{MissingFingerprints: req.GetFingerprints()}, nil
}

func (f *Flaky) Release(_ context.Context, req *pb.ReleaseRequest) (*pb.ReleaseResponse, error) {
	f.mu.Lock()
	f.ids = append(f.ids, req.GetRequestId())
	f.mu.Unlock()
	if err := f.fail("Release"); err != nil {
		return nil, err
	}
	return &pb.ReleaseResponse{RefCounts: make([]uint64, len(req.GetFingerprints()))}, nil
}

// Span is a record a Scripted server sends: bytes [Offset, Offset+Length)
// and their fingerprint (any bytes, or none).
type Span struct {
	Offset, Length uint64
	Fingerprint    []byte
}

// Scripted is an in-process ChunkService whose Dedup calls send the records
// of a script: call i reads all the input, then sends the spans of
// script[i] (as new chunks) in one batch; every call but
// the script's last then fails with UNAVAILABLE ("scripted: call N"), the
// last one (and any after it, which repeat it) sends a summary counting the
// bytes received and ends OK. It plays a server that cuts a replayed
// stream otherwise than the failed attempt.
type Scripted struct {
	pb.UnimplementedChunkServiceServer
	// Addr is the server's address.
	Addr   string
	script [][]Span
	calls  atomic.Int32
}

// StartScripted serves a Scripted on a free loopback port until the test
// ends.
func StartScripted(t testing.TB, script ...[]Span) *Scripted {
	t.Helper()
	f := &Scripted{script: script}
	f.Addr = serveFake(t, f)
	return f
}

// Calls is the number of Dedup calls so far.
func (f *Scripted) Calls() int { return int(f.calls.Load()) }

func (f *Scripted) Dedup(stream grpc.BidiStreamingServer[pb.DedupRequest, pb.DedupResponse]) error {
	n := int(f.calls.Add(1))
	received, err := receive(Honest, stream.Recv)
	if err != nil {
		return err
	}
	spans := f.script[min(n, len(f.script))-1]
	records := make([]*pb.DedupRecord, len(spans))
	for i, s := range spans {
		records[i] = &pb.DedupRecord{Offset: s.Offset, Length: uint32(s.Length), Fingerprint: s.Fingerprint,
			IsNew: true}
	}
	if err := stream.Send(&pb.DedupResponse{Body: &pb.DedupResponse_Batch{
		Batch: &pb.DedupBatch{Chunks: records}}}); err != nil {
		return err
	}
	if n < len(f.script) {
		return status.Errorf(codes.Unavailable, "scripted: call %d", n)
	}
	return stream.Send(&pb.DedupResponse{Body: &pb.DedupResponse_Summary{
		Summary: &pb.DedupSummary{TotalBytes: received, TotalChunks: uint64(len(spans)),
			UniqueBytes: received, UniqueChunks: uint64(len(spans))}}})
}
