package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	chunkd "github.com/chunkd/chunkd/clients/go"
	"github.com/chunkd/chunkd/clients/go/internal/chunkdtest"
)

// TestMain lets the tests run the command as a process: the test binary
// with CHUNKD_GO_AS_MAIN=1 is chunkd-go.
func TestMain(m *testing.M) {
	if os.Getenv("CHUNKD_GO_AS_MAIN") == "1" {
		main()
	}
	os.Exit(m.Run())
}

// process is chunkd-go as a process (see TestMain), with a deadline.
func process(t *testing.T, args ...string) *exec.Cmd {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	cmd := exec.CommandContext(ctx, os.Args[0], args...)
	cmd.Env = append(os.Environ(), "CHUNKD_GO_AS_MAIN=1")
	return cmd
}

func TestVersionAndHelp(t *testing.T) {
	for _, args := range [][]string{{"--version"}, {"-version"}} {
		code, stdout, stderr := chunkdGoRaw(args...)
		wantFailure(t, args[0], code, stdout, stderr, 0, "chunkd-go "+chunkd.Version+"\n", "")
	}
	code, stdout, stderr := chunkdGoRaw("--help")
	if code != 0 || !strings.HasPrefix(stdout, "Usage: chunkd-go COMMAND") || stderr != "" {
		t.Errorf("--help: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	for _, cmd := range []string{"chunk", "dedup", "info", "estimate"} {
		code, stdout, stderr := chunkdGoRaw(cmd, "--help")
		if code != 0 || !strings.HasPrefix(stdout, "Usage: chunkd-go "+cmd) || stderr != "" ||
			!strings.Contains(stdout, "\n  --tls-ca FILE ") || strings.Contains(stdout, "tls_ca") ||
			!strings.Contains(stdout, "\n  --timeout SECONDS ") || !strings.Contains(stdout, "\n  --progress WHEN ") {
			t.Errorf("%s --help: exit %d, stdout %q, stderr %q", cmd, code, stdout, stderr)
		}
		if got := strings.Contains(stdout, "--retries N"); got != (cmd == "chunk" || cmd == "dedup") {
			t.Errorf("%s --help lists --retries: %v", cmd, got)
		}
	}
	code, stdout, stderr = chunkdGoRaw()
	if code != 2 || stdout != "" || !strings.HasPrefix(stderr, "Usage:") {
		t.Errorf("no arguments: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	code, stdout, stderr = chunkdGoRaw("chop")
	wantFailure(t, "chop", code, stdout, stderr, 2, "", "chunkd-go: unknown command \"chop\" (see chunkd-go --help)\n")
}

// chunkdGoRaw runs the command in process without adding a timeout.
func chunkdGoRaw(args ...string) (int, string, string) {
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), args, &stdout, &stderr)
	return code, stdout.String(), stderr.String()
}

// TestUsageErrors: exit status 2 and one line naming the problem, with the
// hint to --help; nothing is called (nothing listens at the address).
func TestUsageErrors(t *testing.T) {
	dead := chunkdtest.FreePort(t)
	file := inputFile(t, 1000)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"chunk", "--server", dead, "--bogus", file}, "unknown flag --bogus"},
		{[]string{"chunk", "--server", dead, file, "--min"}, "flag --min needs an argument"},
		{[]string{"chunk", "--server", dead, "--min", "-5", file}, `invalid value "-5" for flag --min: expected an integer from 0 to 4294967295`},
		{[]string{"chunk", "--server", dead, "--timeout", "soon", file}, `invalid value "soon" for flag --timeout`},
		{[]string{"chunk", "--server", dead, "--format", "xml", file}, "expected one of text, csv, json"},
		{[]string{"chunk", "--server", dead, "--progress", "sometimes", file}, "expected one of auto, always, never"},
		{[]string{"chunk", "--server", dead, "--algorithm", "fastest", file}, "expected one of fastcdc"},
		{[]string{"chunk", "--server", dead, "--preset", "fastcdc-16k", file}, "expected one of fastcdc-reapi, seqcdc-8k, seqcdc-16k"},
		{[]string{"chunk", "--server", dead, "--preset", "seqcdc-8k", "--algorithm", "fastcdc", file}, "--preset seqcdc-8k is a seqcdc preset, but --algorithm is fastcdc"},
		{[]string{"chunk", "--server", dead, file, file}, `give exactly one FILE`},
		{[]string{"chunk", "--server", dead, "--message-size", "0", file}, "--message-size must be at least 1"},
		{[]string{"dedup", "--server", dead, file}, "missing --namespace NS"},
		{[]string{"dedup", "--server", dead, "--namespace", "ns", "--retries", "1", "-"}, `--retries cannot replay stdin ("-")`},
		{[]string{"dedup", "--server", dead, "--namespace", "ns", "-", "-"}, `stdin ("-") can be read only once`},
		{[]string{"dedup", "--server", dead, "--namespace", "ns", "--retries", "101", file}, "--retries: expected an integer in 0..100"},
		{[]string{"dedup", "--server", dead, "--namespace", "ns", "--retries", "1", "/dev/null"}, "--retries: /dev/null is not a regular file"},
		{[]string{"chunk", "--server", dead, "--retries", "1", "-"}, `--retries cannot replay stdin ("-")`},
		{[]string{"chunk", "--server", dead, "--retries", "1", "/dev/null"}, "--retries: /dev/null is not a regular file"},
		{[]string{"chunk", "--server", dead, "--retries", "101", file}, "--retries: expected an integer in 0..100"},
		{[]string{"dedup", "--server", dead, "--namespace", "ns", "--fingerprint", "none", file}, "dedup needs a fingerprint"},
		{[]string{"dedup", "--server", dead, "--namespace", "ns", "--hints", "fastest", file}, "off, ff, ff_mt, ff_rwt, ff_rwt_fpt"},
		{[]string{"info", "--server", dead, "extra"}, `unexpected argument "extra"`},
		{[]string{"chunk", "--server", dead, "--min", "1", file}, "--min 1 is out of range for fastcdc: 64..1048576"},
		{[]string{"chunk", "--server", dead, "--algorithm", "rabin", "--polynomial", "7", file}, "--polynomial 7 is out of range for rabin"},
		{[]string{"dedup", "--server", dead, "--namespace", "a/b", file}, `--namespace "a/b": only [A-Za-z0-9._-] are allowed`},
		{[]string{"dedup", "--server", dead, "--namespace", strings.Repeat("n", 129), file}, "--namespace has 129 characters; at most 128"},
		{[]string{"dedup", "--server", dead, "--namespace", "ns", "--algorithm", "crc32", "--hints", "ff", file}, "--hints ff needs --algorithm fastcdc, not crc32"},
		{[]string{"info", "--server", dead, "--tls-cert", "c.pem"}, "--tls-cert and --tls-key go together"},
	} {
		code, stdout, stderr := chunkdGoRaw(c.args...)
		hint := fmt.Sprintf(" (see chunkd-go %s --help)\n", c.args[0])
		if code != 2 || stdout != "" || !strings.HasPrefix(stderr, "chunkd-go: ") || !strings.Contains(stderr, c.want) ||
			!strings.HasSuffix(stderr, hint) || strings.Count(stderr, "\n") != 1 {
			t.Errorf("%q: exit %d, stdout %q, stderr %q; want 2 and %q", c.args, code, stdout, stderr, c.want)
		}
	}
	code, stdout, stderr := chunkdGoRaw("chunk", "--server", dead, "no-such-file")
	wantFailure(t, "a missing file", code, stdout, stderr, 1, "", "chunkd-go: open no-such-file: no such file or directory\n")
}

// TestSpellings: dashes or underscores, one dash or two, flags before or
// after the operands, --json or --format json: the same run.
func TestSpellings(t *testing.T) {
	addr := chunkdtest.Start(t)
	file := inputFile(t, 300_000)
	var outputs []string
	for _, args := range [][]string{
		{"chunk", "--server", addr, "--message-size", "4096", "--format", "json", file},
		{"chunk", "-server=" + addr, "-message_size=4096", "-json", file},
		{"chunk", file, "--server", addr, "--json", "--message_size", "4096"},
		{"chunk", "--server", addr, "--json", "--", file},
	} {
		code, stdout, stderr := chunkdGoRaw(args...)
		if code != 0 || stderr != "" {
			t.Fatalf("%q: exit %d, stderr %q", args, code, stderr)
		}
		outputs = append(outputs, stdout)
	}
	for i, out := range outputs[1:] {
		if out != outputs[0] {
			t.Errorf("spelling %d prints other chunks", i+1)
		}
	}
	text := func(args ...string) string {
		code, stdout, stderr := chunkdGoRaw(append([]string{"chunk", "--server", addr}, args...)...)
		if code != 0 || stderr != "" {
			t.Fatalf("%q: exit %d, stderr %q", args, code, stderr)
		}
		return stdout
	}
	if csv := text("--format", "csv", file); csv != text(file) || !strings.HasPrefix(csv, "0,") {
		t.Errorf("--format csv is not the text output")
	}
	if text("--preset", "fastcdc-reapi", file) != text("--min", "131072", "--avg", "524288", "--max", "2097152", "--level", "2", file) {
		t.Errorf("--preset fastcdc-reapi is not its parameters")
	}
	if text("--preset", "seqcdc-8k", "--max", "20000", file) != text("--algorithm", "seqcdc", "--min", "4096", "--max", "20000",
		"--seq-mode", "increasing", "--seq-length", "5", "--skip-trigger", "50", "--skip-size", "256", file) {
		t.Errorf("a flag beside --preset seqcdc-8k does not override it")
	}
	// Seconds with decimals, a Go duration, none: each long enough that the
	// outcome never depends on the machine's speed.
	for _, timeout := range []string{"30", "90.5", "1m", "0"} {
		if text("--timeout", timeout, file) != text(file) {
			t.Errorf("--timeout %s", timeout)
		}
	}
}

// jsonLines parses JSON Lines into objects, with numbers as json.Number.
func jsonLines(t *testing.T, text string) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, line := range strings.Split(strings.TrimSuffix(text, "\n"), "\n") {
		d := json.NewDecoder(strings.NewReader(line))
		d.UseNumber()
		var obj map[string]any
		if err := d.Decode(&obj); err != nil {
			t.Fatalf("line %q: %v", line, err)
		}
		out = append(out, obj)
	}
	return out
}

func keys(obj map[string]any) string {
	var k []string
	for key := range obj {
		k = append(k, key)
	}
	sort.Strings(k)
	return strings.Join(k, ",")
}

// TestJSONShapes: the JSON of chunk, dedup and info as docs/cli.md shows.
func TestJSONShapes(t *testing.T) {
	addr := chunkdtest.Start(t)
	file := inputFile(t, 200_000)
	code, stdout, _ := chunkdGoRaw("chunk", "--server", addr, "--json", file)
	records := jsonLines(t, stdout)
	if code != 0 || keys(records[0]) != "fingerprint,length,offset" || len(records[0]["fingerprint"].(string)) != 64 {
		t.Fatalf("chunk --json: exit %d, %v", code, records[0])
	}
	_, stdout, _ = chunkdGoRaw("chunk", "--server", addr, "--json", "--fingerprint", "none", file)
	if records = jsonLines(t, stdout); keys(records[0]) != "length,offset" {
		t.Fatalf("chunk --json --fingerprint none: %v", records[0])
	}

	const counters = "bytes,chunks,hint_skipped_bytes,hints_accepted,hints_rejected,hints_tried,ratio,unique_bytes,unique_chunks"
	code, stdout, _ = chunkdGoRaw("dedup", "--server", addr, "--namespace", "go-json", "--json", file, file)
	lines := jsonLines(t, stdout)
	if code != 0 || len(lines) != 3 {
		t.Fatalf("dedup --json: exit %d, %q", code, stdout)
	}
	for i, line := range lines {
		want := map[string]any{"file": nil}
		if i == 2 {
			want = map[string]any{"total": nil}
		}
		for _, k := range strings.Split(counters, ",") {
			want[k] = nil
		}
		if keys(line) != keys(want) {
			t.Errorf("dedup line %d keys %s, want %s", i, keys(line), keys(want))
		}
	}
	if lines[0]["file"] != file || lines[0]["ratio"] != json.Number("1") || lines[1]["ratio"] != json.Number("2") ||
		lines[2]["total"] != true || lines[2]["bytes"] != json.Number("400000") || lines[2]["ratio"] != json.Number("2") {
		t.Errorf("dedup --json: %q", stdout)
	}
	// Nothing unique: the ratio is null.
	_, stdout, _ = chunkdGoRaw("dedup", "--server", addr, "--namespace", "go-json", "--json", file)
	if lines = jsonLines(t, stdout); lines[0]["ratio"] != nil || lines[1]["ratio"] != nil || lines[0]["unique_bytes"] != json.Number("0") {
		t.Errorf("dedup --json, all duplicates: %q", stdout)
	}
	code, stdout, _ = chunkdGoRaw("dedup", "--server", addr, "--namespace", "go-json", file)
	if code != 0 || !strings.HasPrefix(stdout, file+" bytes=200000 unique_bytes=0 chunks=") ||
		!strings.Contains(stdout, " ratio=inf") {
		t.Errorf("dedup text, all duplicates: %q", stdout)
	}
	checkInfoJSON(t, addr)
}

func checkInfoJSON(t *testing.T, addr string) {
	code, stdout, stderr := chunkdGoRaw("info", "--server", addr, "--format", "json")
	info := jsonLines(t, strings.ReplaceAll(stdout, "\n", "")+"\n")[0]
	if code != 0 || keys(info) != "algorithms,chunking_backend,fingerprints,index_backend,max_inflight_bytes,max_message_bytes,version" {
		t.Fatalf("info --json: exit %d, stderr %q, %v", code, stderr, info)
	}
	if !reflect.DeepEqual(info["fingerprints"], []any{"sha256", "xxh128", "none"}) || info["index_backend"] != "memory" {
		t.Errorf("info --json: %v", info)
	}
	const algorithmKeys = "avg_size,avg_size_power_of_two,backend,backend_threads,horizon_size,max_size,min_size,name,normalization_level,polynomial"
	byName := map[string]map[string]any{}
	for _, a := range info["algorithms"].([]any) {
		a := a.(map[string]any)
		if keys(a) != algorithmKeys || keys(a["min_size"].(map[string]any)) != "default,max,min" {
			t.Errorf("info --json algorithm %v", a)
		}
		byName[a["name"].(string)] = a
	}
	crc32, repmax, rabin := byName["crc32"], byName["repmaxcdc"], byName["rabin"]
	if crc32["normalization_level"] != nil || crc32["horizon_size"] != nil || crc32["polynomial"] != nil ||
		byName["fastcdc"]["normalization_level"] == nil {
		t.Errorf("ranges an algorithm does not take are null: %v", crc32)
	}
	if !reflect.DeepEqual(repmax["avg_size"], map[string]any{"min": json.Number("0"), "max": json.Number("0"), "default": json.Number("0")}) {
		t.Errorf("a size repmaxcdc does not take: %v", repmax["avg_size"])
	}
	if rabin["polynomial"].(map[string]any)["default"] != json.Number("17349423945073011") {
		t.Errorf("rabin's polynomial: %v", rabin["polynomial"])
	}
	code, stdout, _ = chunkdGoRaw("info", "--server", addr)
	if code != 0 || !strings.Contains(stdout, "\n  fastcdc: min 64..") || !strings.Contains(stdout, "index backend: memory\n") {
		t.Errorf("info text: %q", stdout)
	}
}

// TestProgress: the line chunkctl and chunkd-client draw; on stderr with
// --progress always, never with never (and auto when stderr is not a
// terminal).
func TestProgress(t *testing.T) {
	for _, c := range []struct {
		done, total uint64
		seconds     float64
		want        string
	}{
		{512 << 10, 1 << 20, 1, "f [############------------]  50.0% 512.0 KiB/1.0 MiB 512.0 KiB/s ETA 0:01"},
		{3 << 20, 0, 2, "f 3.0 MiB 1.5 MiB/s"},
		{100, 1 << 30, 10, "f [------------------------]   0.0% 100 B/1.0 GiB 10 B/s ETA 29826:09:32"},
		{0, 1000, 0, "f [------------------------]   0.0% 0 B/1000 B 0 B/s"},
	} {
		if got := progressLine("f", c.done, c.total, c.seconds); got != c.want {
			t.Errorf("progressLine(%d, %d, %v) = %q, want %q", c.done, c.total, c.seconds, got, c.want)
		}
	}
	addr := chunkdtest.Start(t)
	file := inputFile(t, 100_000)
	for when, drawn := range map[string]bool{"always": true, "never": false, "auto": false} {
		for _, args := range [][]string{{"chunk"}, {"dedup", "--namespace", "go-progress"}} {
			args = append(args, "--server", addr, "--progress", when, file)
			code, _, stderr := chunkdGoRaw(args...)
			final := "\r\x1b[K" + file + " [########################] 100.0% 97.7 KiB/97.7 KiB "
			if code != 0 || strings.Contains(stderr, final) != drawn || (drawn && !strings.HasSuffix(stderr, "\n")) {
				t.Errorf("%q: exit %d, stderr %q", args, code, stderr)
			}
		}
	}
}

// TestRetries: --retries of chunk and dedup replays a file whose stream
// failed; chunk prints every chunk once.
func TestRetries(t *testing.T) {
	file := inputFile(t, 10_000)
	for _, c := range []struct {
		method string
		args   []string
		out    string
	}{
		{"Dedup", []string{"dedup", "--namespace", "ns"}, file + " bytes=10000 "},
		{"Chunk", []string{"chunk"}, "0,10000,"},
	} {
		flaky := chunkdtest.StartFlaky(t, 2)
		args := append(append([]string{}, c.args...), "--server", flaky.Addr, "--retries", "2", file)
		code, stdout, stderr := chunkdGoRaw(args...)
		// Each replay is announced as chunkctl announces it.
		replays := "chunkd-go: " + file + ": UNAVAILABLE: flaky: call 1 of " + c.method +
			"; sending it again in 0.10 s (retry 1 of 2)\n" +
			"chunkd-go: " + file + ": UNAVAILABLE: flaky: call 2 of " + c.method +
			"; sending it again in 0.20 s (retry 2 of 2)\n"
		if code != 0 || stderr != replays || !strings.HasPrefix(stdout, c.out) || flaky.Calls(c.method) != 3 {
			t.Errorf("%s --retries 2 after 2 failures: exit %d, stdout %q, stderr %q, %d calls",
				c.args[0], code, stdout, stderr, flaky.Calls(c.method))
		}
		if c.method == "Chunk" && strings.Count(stdout, "\n") != 1 {
			t.Errorf("chunk --retries printed %q; want the one chunk once", stdout)
		}
		flaky = chunkdtest.StartFlaky(t, 1)
		args = append(append([]string{}, c.args...), "--server", flaky.Addr, file)
		code, stdout, stderr = chunkdGoRaw(args...)
		wantFailure(t, "no --retries", code, stdout, stderr, 1, "", "chunkd-go: UNAVAILABLE: flaky: call 1 of "+c.method+"\n")
	}
}

// TestClosedStdoutAndInterrupt: stdout closed early ends the process at
// once with 141 and nothing on stderr; SIGINT with 130.
func TestClosedStdoutAndInterrupt(t *testing.T) {
	server := chunkdtest.StartServer(t)
	addr := server.Addr
	file := inputFile(t, 20<<20) // about 1300 lines: more than a pipe holds
	cmd := process(t, "chunk", "--server", addr, "--min", "64", "--avg", "256", "--max", "1024", file)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	if _, err := bufio.NewReader(stdout).ReadString('\n'); err != nil {
		t.Fatal(err)
	}
	stdout.Close() // as head -1 does
	err = cmd.Wait()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 141 || stderr.Len() != 0 {
		t.Errorf("stdout closed: %v, stderr %q; want exit status 141, nothing on stderr", err, stderr.String())
	}

	// The first stream may still count on the server after its process
	// ended: wait until it is gone, so that the count below is the new one.
	for deadline := time.Now().Add(60 * time.Second); server.Metric(t, "chunkd_active_streams") != 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the stream of the first chunkd-go chunk never ended on the server")
		}
	}
	cmd = process(t, "chunk", "--server", addr, "-")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr.Reset()
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer stdin.Close()
	if _, err := io.WriteString(stdin, "some bytes, then the input waits"); err != nil {
		t.Fatal(err)
	}
	// Interrupted once its stream runs (before, its handler may not be set).
	for deadline := time.Now().Add(60 * time.Second); server.Metric(t, "chunkd_active_streams") != 1; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the stream of chunkd-go chunk never started")
		}
	}
	_ = cmd.Process.Signal(syscall.SIGINT)
	err = cmd.Wait()
	if !errors.As(err, &exit) || exit.ExitCode() != 130 || !strings.Contains(stderr.String(), "chunkd-go: interrupted") {
		t.Errorf("SIGINT: %v, stderr %q; want exit status 130", err, stderr.String())
	}
}

// TestDedupRetriesAcrossARestart: chunkd on Redis is killed (SIGKILL) in the
// middle of `dedup --retries 3` and started again on the same port; the
// command succeeds with the report of a clean run, and every chunk's
// reference count is that of a clean run.
func TestDedupRetriesAcrossARestart(t *testing.T) {
	s := chunkdtest.StartServer(t, "--index=redis://"+chunkdtest.StartRedis(t))
	data := bytes.Repeat(randomData(73, 16<<20), 4) // 64 MiB; most chunks referenced 4 times
	file := filepath.Join(t.TempDir(), "input.bin")
	if err := os.WriteFile(file, data, 0o600); err != nil {
		t.Fatal(err)
	}
	dedup := func(ns string) (int, string, string) {
		return chunkdGo(t, "dedup", "--server", s.Addr, "--namespace", ns, "--retries", "3",
			"--message-size", "65536", file)
	}
	code, clean, stderr := dedup("go-cli-clean")
	if code != 0 || stderr != "" {
		t.Fatalf("clean run: exit %d, stderr %q", code, stderr)
	}

	// The relay holds the stream after 8 MiB: the server is killed and
	// restarted while the stream certainly runs, before the client can
	// reconnect, however fast either is.
	relay := chunkdtest.StartRelay(t, s.Addr, 8<<20)
	restarted, ended := make(chan error, 1), make(chan struct{})
	go func() {
		select {
		case <-relay.Held():
		case <-ended:
			restarted <- errors.New("the command ended before it had sent 8 MiB")
			return
		}
		s.Kill()
		err := s.Restart()
		relay.Release()
		restarted <- err
	}()
	code, retried, stderr := chunkdGo(t, "dedup", "--server", relay.Addr, "--namespace", "go-cli-retried",
		"--retries", "3", "--message-size", "65536", file)
	close(ended)
	if err := <-restarted; err != nil {
		t.Fatal(err)
	}
	// The replay is announced (a second one if the server was not back yet).
	announced := regexp.MustCompile(`^chunkd-go: .*input\.bin: UNAVAILABLE: .*; sending it again in [0-9.]+ s \(retry 1 of 3\)\n` +
		`(chunkd-go: .*input\.bin: .*; sending it again in [0-9.]+ s \(retry [23] of 3\)\n){0,2}$`)
	if code != 0 || !announced.MatchString(stderr) {
		t.Fatalf("dedup --retries 3 across a restart: exit %d, stderr %q", code, stderr)
	}
	if s.Metric(t, "grpc_server_started_total", `grpc_method="Dedup"`) != 1 {
		t.Fatal("the restarted server saw no Dedup: the stream ended before the kill, or was not replayed")
	}
	if strings.ReplaceAll(retried, "go-cli-retried", "") != strings.ReplaceAll(clean, "go-cli-clean", "") {
		t.Fatalf("the report differs from a clean run's:\n%s\n%s", retried, clean)
	}
	checkSameCounts(t, s.Addr, data, "go-cli-clean", "go-cli-retried")
}

func randomData(seed int64, n int) []byte {
	b := make([]byte, n)
	rand.New(rand.NewSource(seed)).Read(b)
	return b
}

// checkSameCounts releases one reference of every chunk of data in both
// namespaces: the counts left must be equal, and not all zero.
func checkSameCounts(t *testing.T, addr string, data []byte, a, b string) {
	t.Helper()
	c, err := chunkd.Dial(addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	it, err := c.Chunk(ctx, bytes.NewReader(data), chunkd.Params{})
	if err != nil {
		t.Fatal(err)
	}
	chunks, _, err := it.Collect()
	if err != nil {
		t.Fatal(err)
	}
	fps := make([][]byte, len(chunks))
	for i, ch := range chunks {
		fps[i] = ch.Fingerprint
	}
	var counts [2][]uint64
	for i, ns := range []string{a, b} {
		if counts[i], err = c.Release(ctx, ns, fps, chunkd.ReleaseOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if fmt.Sprint(counts[0]) != fmt.Sprint(counts[1]) || counts[0][len(fps)/2] == 0 {
		t.Fatalf("reference counts differ from a clean run's (or are all gone)")
	}
}
