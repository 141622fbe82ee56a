package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

func randomBytes(seed uint64, size int) []byte {
	r := rand.New(rand.NewPCG(seed, 0))
	data := make([]byte, size)
	for i := range data {
		data[i] = byte(r.Uint32())
	}
	return data
}

// lengths runs the command on data and parses its "offset,length" lines,
// checking that they tile the input.
func lengths(t *testing.T, data []byte, args ...string) []int {
	t.Helper()
	var out bytes.Buffer
	if err := run(append(args, "-"), bytes.NewReader(data), &out); err != nil {
		t.Fatalf("%v: %v", args, err)
	}
	var result []int
	offset := 0
	for _, line := range strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n") {
		if line == "" {
			continue
		}
		fields := strings.Split(line, ",")
		if len(fields) != 2 {
			t.Fatalf("%v: line %q is not offset,length", args, line)
		}
		o, err1 := strconv.Atoi(fields[0])
		n, err2 := strconv.Atoi(fields[1])
		if err1 != nil || err2 != nil || o != offset || n <= 0 {
			t.Fatalf("%v: line %q after %d bytes", args, line, offset)
		}
		offset += n
		result = append(result, n)
	}
	if offset != len(data) {
		t.Fatalf("%v: chunks cover %d of %d bytes", args, offset, len(data))
	}
	return result
}

func TestChunkSizesRespectTheParameters(t *testing.T) {
	data := randomBytes(1, 3<<20)
	for _, c := range []struct {
		args     []string
		min, max int
	}{
		{[]string{"-algorithm", "repmaxcdc", "-min", "4096", "-horizon", "32768"}, 4096, 8191},
		{[]string{"-algorithm", "repmaxcdc", "-min", "1000", "-horizon", "0"}, 1000, 1000},
		{[]string{"-algorithm", "rabin", "-min", "2048", "-avg", "8192", "-max", "16384"}, 2048, 16384},
		{[]string{"-algorithm", "buzhash", "-min", "1000", "-avg", "4000", "-max", "16000"}, 1000, 16000},
	} {
		got := lengths(t, data, c.args...)
		if len(got) < 2 {
			t.Fatalf("%v: %d chunks", c.args, len(got))
		}
		for i, n := range got[:len(got)-1] {
			if n < c.min || n > c.max {
				t.Errorf("%v: chunk %d has %d bytes, want [%d, %d]", c.args, i, n, c.min, c.max)
			}
		}
	}
}

func TestDefaultsAreChunkdsDefaults(t *testing.T) {
	data := randomBytes(2, 6<<20)
	for _, c := range []struct {
		algorithm string
		explicit  []string
	}{
		{"repmaxcdc", []string{"-min", "262144", "-horizon", "2097152"}},
		{"rabin", []string{"-min", "524288", "-avg", "1048576", "-max", "8388608", "-polynomial", "0x3DA3358B4DC173"}},
		{"buzhash", []string{"-min", "16384", "-avg", "65536", "-max", "262144"}},
	} {
		implicit := lengths(t, data, "-algorithm", c.algorithm)
		explicit := lengths(t, data, append([]string{"-algorithm", c.algorithm}, c.explicit...)...)
		if len(implicit) < 2 || !equal(implicit, explicit) {
			t.Errorf("%s: defaults give %v, explicit %v", c.algorithm, implicit, explicit)
		}
	}
}

func equal(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestThePolynomialChangesRabinsCuts(t *testing.T) {
	data := randomBytes(3, 1<<20)
	args := []string{"-algorithm", "rabin", "-min", "512", "-avg", "4096", "-max", "65536"}
	hex := lengths(t, data, append(args, "-polynomial", "0x3DA3358B4DC173")...)
	dec := lengths(t, data, append(args, "-polynomial", strconv.FormatUint(0x3DA3358B4DC173, 10))...)
	other := lengths(t, data, append(args, "-polynomial", "0x3D8F561D1A6FF5")...)
	if !equal(hex, dec) {
		t.Errorf("hexadecimal and decimal spellings differ")
	}
	if equal(hex, other) {
		t.Errorf("two polynomials gave the same %d chunks", len(hex))
	}
}

func TestEmptyInputHasNoChunks(t *testing.T) {
	for _, algorithm := range []string{"repmaxcdc", "rabin", "buzhash"} {
		if got := lengths(t, nil, "-algorithm", algorithm); len(got) != 0 {
			t.Errorf("%s: %v", algorithm, got)
		}
	}
}

func TestUsageErrors(t *testing.T) {
	for _, args := range [][]string{
		{"-algorithm", "fastcdc", "-"},
		{"-algorithm", "rabin", "-horizon", "10", "-"},
		{"-algorithm", "repmaxcdc", "-avg", "4096", "-"},
		{"-algorithm", "buzhash", "-polynomial", "0x3DA3358B4DC173", "-"},
		{"-algorithm", "rabin", "-avg", "3000", "-"},
		{"-algorithm", "rabin", "-polynomial", "0x1F", "-"},
		{"-algorithm", "rabin", "-polynomial", "0xZZ", "-"},
		{"-algorithm", "repmaxcdc", "-min", "63", "-"},
		{"-algorithm", "buzhash", "-min", "40", "-avg", "64", "-max", "64", "-"},
		{"-algorithm", "buzhash"},
		{"-algorithm", "buzhash", "-bench", "-"},
		{"-algorithm", "buzhash", "-bench", "-repeat", "0", "f"},
	} {
		err := run(args, bytes.NewReader(nil), &bytes.Buffer{})
		if !errors.Is(err, errUsage) {
			t.Errorf("%v: got %v, want a usage error", args, err)
		}
	}
}

func TestBenchPrintsOneJSONLine(t *testing.T) {
	data := randomBytes(4, 1<<20)
	path := filepath.Join(t.TempDir(), "data")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	args := []string{"-algorithm", "buzhash", "-min", "1000", "-avg", "4000", "-max", "16000"}
	var out bytes.Buffer
	if err := run(append(args, "-bench", "-repeat", "2", path), nil, &out); err != nil {
		t.Fatal(err)
	}
	var result map[string]any
	if err := json.Unmarshal(out.Bytes(), &result); err != nil || strings.Count(out.String(), "\n") != 1 {
		t.Fatalf("not one JSON line: %q (%v)", out.String(), err)
	}
	want := len(lengths(t, data, args...))
	if result["algorithm"] != "buzhash" || result["bytes"] != float64(len(data)) ||
		result["chunks"] != float64(want) {
		t.Errorf("got %v, want buzhash, %d bytes, %d chunks", result, len(data), want)
	}
	if s, ok := result["best_seconds"].(float64); !ok || s <= 0 {
		t.Errorf("best_seconds %v", result["best_seconds"])
	}
	if g, ok := result["gb_per_s"].(float64); !ok || g <= 0 {
		t.Errorf("gb_per_s %v", result["gb_per_s"])
	}
}
