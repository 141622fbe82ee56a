package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math/rand"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	chunkd "github.com/chunkd/chunkd/clients/go"
	"github.com/chunkd/chunkd/clients/go/internal/chunkdtest"
)

// chunkdGo runs the command in process with a deadline and returns its exit
// status, stdout and stderr.
func chunkdGo(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	args = append([]string{args[0], "-timeout=60s"}, args[1:]...)
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), args, &stdout, &stderr)
	return code, stdout.String(), stderr.String()
}

// inputFile writes n random bytes to a file of the test.
func inputFile(t *testing.T, n int) string {
	t.Helper()
	data := make([]byte, n)
	rand.New(rand.NewSource(int64(n))).Read(data)
	path := filepath.Join(t.TempDir(), "input.bin")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// wantFailure checks a failed run: exit status, nothing on stdout unless
// stdout is given, and stderr exactly.
func wantFailure(t *testing.T, what string, got int, stdout, stderr string, code int, wantStdout, wantStderr string) {
	t.Helper()
	if got != code || stdout != wantStdout || stderr != wantStderr {
		t.Errorf("%s: exit %d, stdout %q, stderr %q; want exit %d, stdout %q, stderr %q",
			what, got, stdout, stderr, code, wantStdout, wantStderr)
	}
}

// TestShortOrMissingSummaryIsDataLoss: against a server whose summary does
// not count the bytes sent, or that sends none, chunk and dedup print
// DATA_LOSS like any failed call and exit 1; an honest server passes.
func TestShortOrMissingSummaryIsDataLoss(t *testing.T) {
	file := inputFile(t, 10_000)
	honest := chunkdtest.StartFake(t, chunkdtest.Honest)
	code, stdout, stderr := chunkdGo(t, "chunk", "-server", honest, "-message-size", "4096", file)
	wantFailure(t, "chunk, honest", code, stdout, stderr, 0, "0,10000,\n", "")
	code, stdout, stderr = chunkdGo(t, "dedup", "-server", honest, "-namespace", "ns", file)
	wantFailure(t, "dedup, honest", code, stdout, stderr, 0,
		file+" bytes=10000 unique_bytes=10000 chunks=1 unique_chunks=1 ratio=1.00\n"+
			"total bytes=10000 unique_bytes=10000 chunks=1 unique_chunks=1 ratio=1.00\n", "")

	short := chunkdtest.StartFake(t, chunkdtest.ShortSummary)
	const shortMessage = "chunkd-go: DATA_LOSS: server summary reports total_bytes=9999 but 10000 bytes were sent\n"
	code, stdout, stderr = chunkdGo(t, "chunk", "-server", short, "-message-size", "4096", file)
	// The record came before the summary; the exit status says it is not to
	// be trusted.
	wantFailure(t, "chunk, short summary", code, stdout, stderr, 1, "0,10000,\n", shortMessage)
	code, stdout, stderr = chunkdGo(t, "dedup", "-server", short, "-namespace", "ns", file)
	wantFailure(t, "dedup, short summary", code, stdout, stderr, 1, "", shortMessage)

	none := chunkdtest.StartFake(t, chunkdtest.NoSummary)
	const noneMessage = "chunkd-go: DATA_LOSS: the stream ended without a summary; 10000 bytes were sent\n"
	code, stdout, stderr = chunkdGo(t, "chunk", "-server", none, "-format", "json", file)
	wantFailure(t, "chunk, no summary", code, stdout, stderr, 1, "{\"offset\":0,\"length\":10000,\"fingerprint\":\"\"}\n", noneMessage)
	code, stdout, stderr = chunkdGo(t, "dedup", "-server", none, "-namespace", "ns", file)
	wantFailure(t, "dedup, no summary", code, stdout, stderr, 1, "", noneMessage)
}

// TestFailedCallsNameTheCode: errors of a real chunkd (and of a dead port)
// are printed as "chunkd-go: CODE: message", exit status 1.
func TestFailedCallsNameTheCode(t *testing.T) {
	file := inputFile(t, 10_000)

	dead := chunkdtest.FreePort(t)
	for _, args := range [][]string{
		{"chunk", "-server", dead, file},
		{"dedup", "-server", dead, "-namespace", "ns", file},
		{"info", "-server", dead},
	} {
		code, stdout, stderr := chunkdGo(t, args...)
		if code != 1 || stdout != "" || !strings.HasPrefix(stderr, "chunkd-go: UNAVAILABLE: ") ||
			!strings.Contains(stderr, dead) || strings.Count(stderr, "\n") != 1 {
			t.Errorf("%s on a dead port: exit %d, stdout %q, stderr %q", args[0], code, stdout, stderr)
		}
	}

	// The server's INVALID_ARGUMENT is a bad parameter: exit status 2. Each
	// value is in its range (chunkd-go checks those), the pair is not.
	addr := chunkdtest.Start(t)
	for _, args := range [][]string{
		{"chunk", "-server", addr, "-min", "8192", "-max", "4096", file},
		{"dedup", "-server", addr, "-namespace", "ns", "-algorithm", "crc32", "-avg", "3000", file},
	} {
		code, stdout, stderr := chunkdGo(t, args...)
		if code != 2 || stdout != "" || !strings.HasPrefix(stderr, "chunkd-go: INVALID_ARGUMENT: ") ||
			strings.Count(stderr, "\n") != 1 {
			t.Errorf("%q: exit %d, stdout %q, stderr %q", args, code, stdout, stderr)
		}
	}

	// One stream held open takes the only slot of a new server (a stream
	// that just failed may still count on the first).
	addr = chunkdtest.Start(t, "--max_streams=1")
	c, err := chunkd.Dial(addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	r, w := io.Pipe()
	defer w.Close()
	held, err := c.Chunk(ctx, r, chunkd.Params{Fingerprint: "none"})
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	go w.Write(make([]byte, chunkd.DefaultMessageSize)) // one message, then no end
	if !held.Next() {
		t.Fatalf("the held stream ended: %v", held.Err())
	}
	const exhausted = "chunkd-go: RESOURCE_EXHAUSTED: chunkd is serving its limit of 1 streams (--max_streams)"
	for _, args := range [][]string{
		{"chunk", "-server", addr, file},
		{"dedup", "-server", addr, "-namespace", "ns", file},
	} {
		code, stdout, stderr := chunkdGo(t, args...)
		if code != 1 || stdout != "" || !strings.HasPrefix(stderr, exhausted) || strings.Count(stderr, "\n") != 1 {
			t.Errorf("%s past --max_streams: exit %d, stdout %q, stderr %q", args[0], code, stdout, stderr)
		}
	}
}

// TestCodeNames: codes print under the gRPC names the other clients print,
// CANCELLED included (grpc-go spells it Canceled).
func TestCodeNames(t *testing.T) {
	for code, want := range map[codes.Code]string{codes.Canceled: "CANCELLED", codes.DeadlineExceeded: "DEADLINE_EXCEEDED",
		codes.DataLoss: "DATA_LOSS", codes.Unavailable: "UNAVAILABLE", codes.OK: "OK"} {
		if got := codeName(code); got != want {
			t.Errorf("codeName(%v) = %q, want %q", code, got, want)
		}
	}
	var stderr bytes.Buffer
	if exit := report(&stderr, "chunk", status.Error(codes.Canceled, "context canceled")); exit != 1 ||
		stderr.String() != "chunkd-go: CANCELLED: context canceled\n" {
		t.Errorf("a cancelled call: exit %d, stderr %q", exit, stderr.String())
	}
}

// TestFlagsTheAlgorithmDoesNotTake: a chunking flag the algorithm does not
// take is a usage error before any call (nothing listens at the address, so
// a call would print UNAVAILABLE), even with the flag's default value; the
// flags an algorithm takes, and none, work against chunkd.
func TestFlagsTheAlgorithmDoesNotTake(t *testing.T) {
	dead := chunkdtest.FreePort(t)
	value := map[string]string{"min": "2048", "avg": "8192", "max": "32768", "level": "2", "seed": "7",
		"seq-mode": "decreasing", "seq-length": "4", "skip-trigger": "40", "skip-size": "256",
		"horizon": "4096", "polynomial": "0x3DA3358B4DC173"}
	for algorithm, takes := range algorithmFlags {
		for _, name := range chunkingFlags {
			if slices.Contains(takes, name) {
				continue
			}
			want := "chunkd-go: --" + name + " is not a parameter of " + algorithm + " (it takes --" +
				strings.Join(takes, ", --") + "); leave --" + name + " out (see chunkd-go %s --help)\n"
			for _, args := range [][]string{
				{"chunk", "-server", dead, "-algorithm", algorithm, "-" + name, value[name], "FILE"},
				{"dedup", "-server", dead, "--namespace", "ns", "--algorithm", algorithm, "--" + name + "=" + value[name], "FILE"},
			} {
				code, stdout, stderr := chunkdGo(t, args...)
				wantFailure(t, strings.Join(args, " "), code, stdout, stderr, 2, "", fmt.Sprintf(want, args[0]))
			}
		}
	}
	// A flag's default value given explicitly is still a flag given; the
	// algorithm of a preset is the one in effect.
	code, stdout, stderr := chunkdGo(t, "chunk", "-server", dead, "-algorithm", "crc32", "-level", "1", "FILE")
	wantFailure(t, "crc32 -level 1", code, stdout, stderr, 2, "",
		"chunkd-go: --level is not a parameter of crc32 (it takes --min, --avg, --max); leave --level out (see chunkd-go chunk --help)\n")
	code, stdout, stderr = chunkdGo(t, "chunk", "-server", dead, "--preset", "seqcdc-8k", "--avg", "8192", "FILE")
	wantFailure(t, "seqcdc-8k --avg", code, stdout, stderr, 2, "",
		"chunkd-go: --avg is not a parameter of seqcdc (the algorithm of --preset seqcdc-8k) (it takes --min, --max, --seq-mode, --seq-length, --skip-trigger, --skip-size); leave --avg out (see chunkd-go chunk --help)\n")

	addr := chunkdtest.Start(t)
	file := inputFile(t, 100_000)
	for algorithm, takes := range algorithmFlags {
		own := []string{"-algorithm", algorithm}
		for _, name := range takes {
			own = append(own, "-"+name, value[name])
		}
		for _, flags := range [][]string{{"-algorithm", algorithm}, own} {
			for _, cmd := range [][]string{{"chunk"}, {"dedup", "-namespace", "go-flags-" + algorithm}} {
				args := append(append(append([]string{}, cmd...), "-server", addr), append(flags, file)...)
				code, stdout, stderr := chunkdGo(t, args...)
				if code != 0 || stderr != "" || stdout == "" {
					t.Errorf("%s: exit %d, stderr %q", strings.Join(args, " "), code, stderr)
				}
			}
		}
	}
}
