package chunkd

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/resolver"
	"google.golang.org/grpc/resolver/manual"
	"google.golang.org/grpc/status"

	"github.com/chunkd/chunkd/clients/go/internal/chunkdtest"
)

// twoServerTarget is a target that resolves to both servers, as a dns:///
// name of a headless Service resolves to every pod.
func twoServerTarget(t *testing.T, a, b *chunkdtest.Server) (string, Option) {
	r := manual.NewBuilderWithScheme("chunkdtest")
	r.InitialState(resolver.State{Addresses: []resolver.Address{{Addr: a.Addr}, {Addr: b.Addr}}})
	return "chunkdtest:///two", WithDialOptions(grpc.WithResolvers(r))
}

// chunkStreams runs n Chunk streams one after the other.
func chunkStreams(t *testing.T, c *Client, n int) {
	t.Helper()
	for i := 0; i < n; i++ {
		it, err := c.Chunk(testContext(t), bytes.NewReader(randomBytes(int64(i), 10_000)), Params{})
		if err != nil {
			t.Fatal(err)
		}
		if _, _, err := it.Collect(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestRoundRobinSpreadsStreams: with the default service config, streams
// to a target naming two servers go to both (round_robin), once both are
// connected; gRPC's own default (pick_first, WithServiceConfig("{}")) sends
// them all to one.
func TestRoundRobinSpreadsStreams(t *testing.T) {
	a, b := chunkdtest.StartServer(t), chunkdtest.StartServer(t)
	streams := func() (float64, float64) {
		return a.Metric(t, "grpc_server_started_total", `grpc_method="Chunk"`),
			b.Metric(t, "grpc_server_started_total", `grpc_method="Chunk"`)
	}
	const n = 20
	target, resolve := twoServerTarget(t, a, b)
	c := dial(t, target, resolve)
	// The channel is READY with the first connection; the second joins the
	// rotation a moment later.
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		chunkStreams(t, c, 1)
		if onA, onB := streams(); onA > 0 && onB > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("after 60 s of streams one server has had none")
		}
	}
	startA, startB := streams()
	chunkStreams(t, c, n)
	onA, onB := streams()
	if onA-startA+onB-startB != n || onA-startA < n/4 || onB-startB < n/4 {
		t.Errorf("round_robin: %v streams on one server, %v on the other; want about %d each", onA-startA, onB-startB, n/2)
	}

	target, resolve = twoServerTarget(t, a, b)
	chunkStreams(t, dial(t, target, resolve, WithServiceConfig("{}")), n)
	moreA, moreB := streams()
	if moreA-onA+moreB-onB != n || (moreA != onA && moreB != onB) {
		t.Errorf("pick_first: %v and %v streams; want all %d on one server", moreA-onA, moreB-onB, n)
	}
}

// TestUnaryCallsRetryUnavailable: GetServerInfo, FindMissing and Release
// are tried up to 5 times on UNAVAILABLE; streams are not retried by gRPC;
// a caller's service config replaces the retry policy.
func TestUnaryCallsRetryUnavailable(t *testing.T) {
	flaky := chunkdtest.StartFlaky(t, 4) // every method fails 4 times, then answers
	c := dial(t, flaky.Addr)
	info, err := c.ServerInfo(testContext(t))
	if err != nil || info.Version != "flaky" || flaky.Calls("GetServerInfo") != 5 {
		t.Fatalf("ServerInfo after 4 UNAVAILABLE: %+v, %v, %d calls", info, err, flaky.Calls("GetServerInfo"))
	}
	fps := [][]byte{make([]byte, 32)}
	if missing, err := c.FindMissing(testContext(t), "ns", fps); err != nil || len(missing) != 1 ||
		flaky.Calls("FindMissing") != 5 {
		t.Fatalf("FindMissing after 4 UNAVAILABLE: %v, %v, %d calls", missing, err, flaky.Calls("FindMissing"))
	}
	if _, err := c.Release(testContext(t), "ns", fps, ReleaseOptions{}); err != nil || flaky.Calls("Release") != 5 {
		t.Fatalf("Release after 4 UNAVAILABLE: %v, %d calls", err, flaky.Calls("Release"))
	}
	// A Release without a RequestID gets a random one, the same on every
	// attempt, so that the retries are idempotent.
	ids := flaky.RequestIDs()
	if !regexp.MustCompile(`^[0-9a-f]{32}$`).MatchString(ids[0]) || strings.Count(strings.Join(ids, " "), ids[0]) != 5 {
		t.Errorf("request ids of one Release: %q", ids)
	}
	it, err := c.Chunk(testContext(t), bytes.NewReader([]byte("abc")), Params{})
	if err == nil {
		_, _, err = it.Collect()
	}
	if status.Code(err) != codes.Unavailable || flaky.Calls("Chunk") != 1 {
		t.Errorf("Chunk: %v after %d calls, want UNAVAILABLE after 1", err, flaky.Calls("Chunk"))
	}

	// Five failures exhaust the attempts; the caller gets the last one.
	flaky = chunkdtest.StartFlaky(t, 5)
	_, err = dial(t, flaky.Addr).ServerInfo(testContext(t))
	if status.Code(err) != codes.Unavailable || !strings.Contains(err.Error(), "call 5 of GetServerInfo") {
		t.Errorf("after 5 failures: %v", err)
	}
	flaky = chunkdtest.StartFlaky(t, 1)
	_, err = dial(t, flaky.Addr, WithServiceConfig("{}")).ServerInfo(testContext(t))
	if status.Code(err) != codes.Unavailable || flaky.Calls("GetServerInfo") != 1 {
		t.Errorf("without the retry policy: %v after %d calls", err, flaky.Calls("GetServerInfo"))
	}
	flaky = chunkdtest.StartFlaky(t, 1)
	_, err = dial(t, flaky.Addr, WithDialOptions(grpc.WithDefaultServiceConfig(`{"loadBalancingConfig": [{"pick_first": {}}]}`))).
		ServerInfo(testContext(t))
	if status.Code(err) != codes.Unavailable || flaky.Calls("GetServerInfo") != 1 {
		t.Errorf("with the caller's grpc.WithDefaultServiceConfig: %v after %d calls", err, flaky.Calls("GetServerInfo"))
	}
}

// TestRealServerUnavailableIsRetried: chunkd whose Redis index is down
// answers FindMissing and Release UNAVAILABLE; the client tries 5 times
// (chunkd counts them) and returns the server's message.
func TestRealServerUnavailableIsRetried(t *testing.T) {
	s := chunkdtest.StartServer(t, "--index=redis://"+chunkdtest.FreePort(t), "--redis_connect_timeout=100ms")
	c := dial(t, s.Addr)
	fps := [][]byte{make([]byte, 32)}
	_, err := c.FindMissing(testContext(t), "ns", fps)
	if status.Code(err) != codes.Unavailable || !strings.Contains(strings.ToLower(err.Error()), "redis") {
		t.Fatalf("FindMissing with Redis down: %v", err)
	}
	_, err = c.Release(testContext(t), "ns", fps, ReleaseOptions{RequestID: "go-retry"})
	if status.Code(err) != codes.Unavailable {
		t.Fatalf("Release with Redis down: %v", err)
	}
	for _, method := range []string{"FindMissing", "Release"} {
		got := s.Metric(t, "grpc_server_handled_total", fmt.Sprintf("grpc_method=%q", method), `grpc_code="Unavailable"`)
		if got != 5 {
			t.Errorf("%s: chunkd answered UNAVAILABLE %v times, want 5", method, got)
		}
	}
}

// TestArgumentErrorsAreInvalidArgument: every argument the client refuses
// itself is an *ArgumentError naming the field, with the code
// INVALID_ARGUMENT, and no call is made (nothing listens at the address).
func TestArgumentErrorsAreInvalidArgument(t *testing.T) {
	dead := freePort(t)
	c := dial(t, dead)
	ctx := testContext(t)
	in := bytes.NewReader([]byte("abc"))
	for field, call := range map[string]func() error{
		"Params.Algorithm":           func() error { _, err := c.Chunk(ctx, in, Params{Algorithm: "nope"}); return err },
		"Params.Fingerprint":         func() error { _, err := c.Chunk(ctx, in, Params{Fingerprint: "md5"}); return err },
		"Params.SeqMode":             func() error { _, err := c.Chunk(ctx, in, Params{SeqMode: "up"}); return err },
		"Params.MessageSize":         func() error { _, err := c.Chunk(ctx, in, Params{MessageSize: -1}); return err },
		"Params.Retries":             func() error { _, err := c.Dedup(ctx, "ns", in, Params{Retries: -1}); return err },
		"Params.Timeout":             func() error { _, err := c.Dedup(ctx, "ns", in, Params{Timeout: -1}); return err },
		"Params.Hints":               func() error { _, err := c.Dedup(ctx, "ns", in, Params{Hints: "fast"}); return err },
		"ReleaseOptions.Fingerprint": func() error { _, err := c.Release(ctx, "ns", nil, ReleaseOptions{Fingerprint: "x"}); return err },
		"WithToken":                  func() error { _, err := Dial(dead, WithToken("a b")); return err },
		"WithServiceConfig":          func() error { _, err := Dial(dead, WithServiceConfig("{not json")); return err },
		"TLSFiles":                   func() error { _, err := Dial(dead, WithTLSFiles(TLSFiles{Cert: "c.pem"})); return err },
	} {
		err := call()
		var argErr *ArgumentError
		if status.Code(err) != codes.InvalidArgument || !errors.As(err, &argErr) ||
			!strings.HasPrefix(status.Convert(err).Message(), "chunkd: ") {
			t.Errorf("%s: %v (code %v), want the client's INVALID_ARGUMENT", field, err, status.Code(err))
			continue
		}
		if field != "WithServiceConfig" && argErr.Field != field {
			t.Errorf("%s: the error names %q: %v", field, argErr.Field, err)
		}
	}
	// Retries has a ceiling, as chunkctl's --retries: an uncapped count
	// would wait out backoffs practically forever.
	_, err := c.Dedup(ctx, "ns", in, Params{Retries: MaxRetries + 1})
	var argErr *ArgumentError
	if !errors.As(err, &argErr) || argErr.Field != "Params.Retries" || !strings.Contains(argErr.Problem, "0..100") {
		t.Errorf("Retries %d: %v", MaxRetries+1, err)
	}
	canceled, cancel := context.WithCancel(ctx)
	cancel() // the call fails at once and is not replayed
	if _, err := c.Dedup(canceled, "ns", in, Params{Retries: MaxRetries}); err == nil || errors.As(err, &argErr) {
		t.Errorf("Retries %d is refused: %v", MaxRetries, err)
	}
}
