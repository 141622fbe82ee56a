// Package chunkdtest starts the servers the tests of the Go client talk to:
// a real chunkd ($CHUNKD_BIN) on a free loopback port, and Fake, an
// in-process ChunkService for the answers a real chunkd never gives.
package chunkdtest

import (
	"bytes"
	"context"
	"net"
	"os"
	"os/exec"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
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
