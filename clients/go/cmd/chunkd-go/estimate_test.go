package main

import (
	"strings"
	"testing"

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
