package chunkd

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/chunkd/chunkd/clients/go/internal/chunkdtest"
)

func TestParseIPTarget(t *testing.T) {
	good := []struct{ scheme, list, want string }{
		{"ipv4", "127.0.0.1:50051", "127.0.0.1:50051"},
		{"ipv4", "10.0.0.1:1,10.0.0.2:2", "10.0.0.1:1 10.0.0.2:2"},
		{"ipv4", "10.0.0.1", "10.0.0.1:443"},
		{"ipv6", "[::1]:50051,[fe80::1]:7", "[::1]:50051 [fe80::1]:7"},
		{"ipv6", "::1", "[::1]:443"},
		{"ipv6", "[::1]", "[::1]:443"},
	}
	for _, c := range good {
		addresses, err := parseIPTarget(c.scheme, c.list)
		if err != nil {
			t.Errorf("%s:%s: %v", c.scheme, c.list, err)
			continue
		}
		var got []string
		for _, a := range addresses {
			got = append(got, a.Addr)
		}
		if strings.Join(got, " ") != c.want {
			t.Errorf("%s:%s = %v, want %s", c.scheme, c.list, got, c.want)
		}
	}
	bad := []struct{ scheme, list, says string }{
		{"ipv4", "", "names no address"},
		{"ipv4", "localhost:50051", `"localhost:50051" is not an ipv4 address`},
		{"ipv4", "[::1]:50051", "is not an ipv4 address"},
		{"ipv6", "127.0.0.1:50051", "is not an ipv6 address"},
		{"ipv4", "127.0.0.1:0", "has no valid port"},
		{"ipv4", "127.0.0.1:http", "has no valid port"},
		{"ipv4", "127.0.0.1:1,", `"" is not an ipv4 address`},
	}
	for _, c := range bad {
		_, err := parseIPTarget(c.scheme, c.list)
		if err == nil || !strings.Contains(err.Error(), c.says) {
			t.Errorf("%s:%s: error %v, want one saying %q", c.scheme, c.list, err, c.says)
		}
	}
}

// TestIPv4TargetReachesEveryAddress: "ipv4:A,B" dials both servers and
// round_robin spreads the streams over them, as with chunkctl and Python.
func TestIPv4TargetReachesEveryAddress(t *testing.T) {
	a, b := chunkdtest.StartServer(t), chunkdtest.StartServer(t)
	c := dial(t, fmt.Sprintf("ipv4:%s,%s", a.Addr, b.Addr))
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		chunkStreams(t, c, 1)
		onA := a.Metric(t, "grpc_server_started_total", `grpc_method="Chunk"`)
		onB := b.Metric(t, "grpc_server_started_total", `grpc_method="Chunk"`)
		if onA > 0 && onB > 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 30 s of streams: %v on one server, %v on the other", onA, onB)
		}
	}
}
