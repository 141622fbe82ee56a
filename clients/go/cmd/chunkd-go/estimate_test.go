package main

import (
	"bytes"
	"context"
	"encoding/json"
	"math/rand"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	chunkd "github.com/chunkd/chunkd/clients/go"
	"github.com/chunkd/chunkd/clients/go/internal/chunkdtest"
)

// TestEstimateUsageErrors: a bad command line exits 2 naming the problem,
// before any call (the server address has no server).
func TestEstimateUsageErrors(t *testing.T) {
	file := inputFile(t, 1000)
	server := "--server=" + chunkdtest.FreePort(t)
	seventeen := []string{"estimate", server, file}
	for i := 0; i < 17; i++ {
		seventeen = append(seventeen, "--set", "fixed")
	}
	hint := " (see chunkd-go estimate --help)\n"
	for _, c := range []struct {
		args   []string
		stderr string
	}{
		{[]string{"estimate", server, file}, "missing --set SPEC (e.g. --set fastcdc:avg=16384)"},
		{seventeen, "at most 16 --set, got 17"},
		{[]string{"estimate", server, "--set", "fastcdc:avg=16384", "--set", "fixed:min=4096", file},
			`--set "fixed:min=4096": min is not a parameter of fixed (it takes avg)`},
		{[]string{"estimate", server, "--set", "fastcdc:preset=seqcdc-16k", file},
			`--set "fastcdc:preset=seqcdc-16k": preset seqcdc-16k is a seqcdc preset, not fastcdc`},
		{[]string{"estimate", server, "--set", "nope", file},
			`--set "nope": unknown algorithm "nope" (fastcdc, crc32, seqcdc, fixed, repmaxcdc, rabin, buzhash)`},
		{[]string{"estimate", server, "--set", "fixed", "--sample", "0", file}, "--sample 0 is out of range: 1..1048576"},
		{[]string{"estimate", server, "--set", "fixed", "--sample", "1048577", file}, "--sample 1048577 is out of range: 1..1048576"},
		{[]string{"estimate", server, "--set", "fixed", "--fingerprint", "none", file},
			`invalid value "none" for flag --fingerprint: expected one of xxh128, sha256`},
		{[]string{"estimate", server, "--set", "fixed", "--namespace", "a b", file}, `--namespace "a b": only [A-Za-z0-9._-] are allowed`},
		{[]string{"estimate", server, "--set", "fixed"}, `missing FILE (a file, a directory or "-" for stdin)`},
		{[]string{"estimate", server, "--set", "fixed", "-", "-"}, `stdin ("-") can be read only once`},
		{[]string{"estimate", server, "--set", "fixed", "--plot", "out.pdf", file}, "--plot out.pdf: give a .png or .svg file name"},
	} {
		code, stdout, stderr := chunkdGo(t, c.args...)
		wantFailure(t, strings.Join(c.args, " "), code, stdout, stderr, 2, "", "chunkd-go: "+c.stderr+hint)
	}
	code, stdout, stderr := chunkdGo(t, "estimate", server, "--set", "fixed", file+".missing")
	if code != 1 || stdout != "" || !strings.Contains(stderr, "no such file or directory") {
		t.Errorf("a missing file: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
}

// dataSet writes three files with shared content to a directory of the
// test and returns their paths in sorted order.
func dataSet(t *testing.T) []string {
	t.Helper()
	base := make([]byte, 300_000)
	rand.New(rand.NewSource(81)).Read(base)
	extra := make([]byte, 50_000)
	rand.New(rand.NewSource(82)).Read(extra)
	dir := t.TempDir()
	var paths []string
	for i, data := range [][]byte{base, append(append([]byte{}, base[:150_000]...), extra...), base} {
		path := filepath.Join(dir, "v"+string(rune('1'+i)))
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		paths = append(paths, path)
	}
	return paths
}

// libraryEstimate is the library's estimate of paths with specs.
func libraryEstimate(t *testing.T, addr string, specs []string, opts chunkd.EstimateOptions, paths ...string) *chunkd.EstimateResult {
	t.Helper()
	c, err := chunkd.Dial(addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var sets []chunkd.EstimateSet
	for _, spec := range specs {
		set, err := chunkd.ParseSet(spec)
		if err != nil {
			t.Fatal(err)
		}
		sets = append(sets, set)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	r, err := c.EstimatePaths(ctx, sets, opts, paths...)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestEstimateCommand: estimate prints the library's table, or its JSON
// with --json; a directory is its files; --plot writes the JSON beside the
// picture's name and says how to draw it.
func TestEstimateCommand(t *testing.T) {
	addr := chunkdtest.Start(t)
	paths := dataSet(t)
	specs := []string{"fastcdc:min=4096,avg=16384,max=65536", "seqcdc:preset=seqcdc-8k", "fixed:avg=8192"}
	args := []string{"estimate", "--server", addr, "--progress", "never"}
	for _, spec := range specs {
		args = append(args, "--set", spec)
	}
	want := libraryEstimate(t, addr, specs, chunkd.EstimateOptions{}, paths...)
	code, stdout, stderr := chunkdGo(t, append(args, paths...)...)
	if code != 0 || stdout != want.Table() || stderr != "" ||
		!strings.HasSuffix(stdout, "\n\n800000 bytes in 3 files; sample 1 in 1; fingerprint xxh128\n") {
		t.Errorf("estimate: exit %d, stdout %q, stderr %q; want stdout %q", code, stdout, stderr, want.Table())
	}
	code, stdout, stderr = chunkdGo(t, append(args, "--json", filepath.Dir(paths[0]))...)
	var parsed map[string]any
	if code != 0 || stdout != string(want.JSON())+"\n" || stderr != "" || json.Unmarshal([]byte(stdout), &parsed) != nil {
		t.Errorf("estimate --json DIR: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	plot := filepath.Join(t.TempDir(), "estimate.svg")
	code, stdout, stderr = chunkdGo(t, append(args, "--plot", plot, paths[0], paths[1], paths[2])...)
	saved, err := os.ReadFile(strings.TrimSuffix(plot, ".svg") + ".json")
	jsonPath := strings.TrimSuffix(plot, ".svg") + ".json"
	if code != 0 || stdout != want.Table() || err != nil || string(saved) != string(want.JSON())+"\n" ||
		stderr != "wrote "+jsonPath+"; draw "+plot+" with: chunkd-client plot "+jsonPath+" "+plot+"\n" {
		t.Errorf("estimate --plot: exit %d, stdout %q, stderr %q, %s: %q, %v", code, stdout, stderr, jsonPath, saved, err)
	}
	sampled := libraryEstimate(t, addr, specs[:1], chunkd.EstimateOptions{SampleRate: 16}, paths...)
	code, stdout, stderr = chunkdGo(t, "estimate", "--server", addr, "--progress", "always", "--sample", "16",
		"--set", specs[0], "--json", paths[0], paths[1], paths[2])
	if code != 0 || stdout != string(sampled.JSON())+"\n" || !strings.HasPrefix(stderr, "\r\x1b[K3 files [") ||
		!strings.Contains(stderr, "] 100.0% ") || !strings.HasSuffix(stderr, "\n") {
		t.Errorf("estimate --sample 16 --progress always: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
}

// TestEstimateCommandStdinAndErrors: "-" reads stdin; the server's refusal
// of a set is a usage error naming it.
func TestEstimateCommandStdinAndErrors(t *testing.T) {
	addr := chunkdtest.Start(t)
	paths := dataSet(t)
	want := libraryEstimate(t, addr, []string{"fixed:avg=8192"}, chunkd.EstimateOptions{}, paths[0], paths[1])
	cmd := process(t, "estimate", "--server", addr, "--set", "fixed:avg=8192", "-", paths[1])
	data, err := os.ReadFile(paths[0])
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdin = bytes.NewReader(data)
	out, err := cmd.Output()
	if err != nil || string(out) != want.Table() {
		t.Errorf("estimate - FILE: %q, %v; want %q", out, err, want.Table())
	}
	code, stdout, stderr := chunkdGo(t, "estimate", "--server", addr, "--set", "fixed", "--set", "fastcdc:min=1", paths[0])
	if code != 2 || stdout != "" || !strings.HasPrefix(stderr, "chunkd-go: INVALID_ARGUMENT: ") ||
		!strings.Contains(stderr, "fastcdc:min=1") {
		t.Errorf("fastcdc:min=1: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
}
