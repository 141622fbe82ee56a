package chunkd

import (
	"bytes"
	"errors"
	"io"
	"math/bits"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"google.golang.org/grpc/codes"

	"github.com/chunkd/chunkd/clients/go/internal/chunkdtest"
)

// readers returns a reader per file.
func readers(files [][]byte) []io.Reader {
	rs := make([]io.Reader, len(files))
	for i, f := range files {
		rs[i] = bytes.NewReader(f)
	}
	return rs
}

// parseSets parses specs with ParseSet.
func parseSets(t *testing.T, specs ...string) []EstimateSet {
	t.Helper()
	sets := make([]EstimateSet, len(specs))
	for i, spec := range specs {
		set, err := ParseSet(spec)
		if err != nil {
			t.Fatal(err)
		}
		sets[i] = set
	}
	return sets
}

// TestEstimateSendsFileMarks: every file, empty or not and whatever its
// split into messages, ends with one end_of_file mark; the server's
// progress reaches OnProgress.
func TestEstimateSendsFileMarks(t *testing.T) {
	c := dial(t, chunkdtest.StartFake(t, chunkdtest.Honest))
	sets := parseSets(t, "fastcdc")
	for _, files := range [][][]byte{
		{randomBytes(1, 10_000), nil, randomBytes(2, 8192)},
		{randomBytes(3, 4096)},
		{},
	} {
		var progress []EstimateProgress
		r, err := c.Estimate(testContext(t), sets, EstimateOptions{MessageSize: 4096,
			OnProgress: func(p EstimateProgress) { progress = append(progress, p) }}, readers(files)...)
		total := 0
		for _, f := range files {
			total += len(f)
		}
		want := EstimateProgress{uint64(total), uint64(len(files))}
		if err != nil || r.TotalBytes != want.Bytes || r.Files != want.Files || len(r.Sets) != 1 ||
			r.Sets[0].Label != "fake" || r.Fingerprint != "xxh128" || !reflect.DeepEqual(progress, []EstimateProgress{want}) {
			t.Errorf("%d files: %+v, %v, progress %v; want %+v", len(files), r, err, progress, want)
		}
	}
}

// TestEstimateResultMustCoverTheBytesSent: a result that does not count the
// bytes sent, none, or a response without a body is an error.
func TestEstimateResultMustCoverTheBytesSent(t *testing.T) {
	sets := parseSets(t, "fastcdc")
	for _, tc := range []struct {
		ending  chunkdtest.Ending
		code    codes.Code
		message string
	}{
		{chunkdtest.ShortSummary, codes.DataLoss, "server result reports total_bytes=9999 but 10000 bytes were sent"},
		{chunkdtest.NoSummary, codes.DataLoss, "the stream ended without a result; 10000 bytes were sent"},
		{chunkdtest.NoBody, codes.Internal, "chunkd: protocol violation by the server: a response without a body"},
	} {
		c := dial(t, chunkdtest.StartFake(t, tc.ending))
		r, err := c.Estimate(testContext(t), sets, EstimateOptions{MessageSize: 4096},
			bytes.NewReader(randomBytes(4, 6000)), bytes.NewReader(randomBytes(5, 4000)))
		wantStatus(t, "Estimate", err, tc.code, tc.message)
		if r != nil {
			t.Errorf("a result with the error: %+v", r)
		}
	}
	c := dial(t, chunkdtest.StartFake(t, chunkdtest.EarlySummary))
	r, w := io.Pipe()
	t.Cleanup(func() { w.Close() })   // frees the sender blocked reading r
	go w.Write(randomBytes(43, 4096)) // one message; more input may follow
	_, err := c.Estimate(testContext(t), sets, EstimateOptions{MessageSize: 4096}, r)
	wantStatus(t, "Estimate", err, codes.DataLoss, "the server ended the stream before the input was sent in full: "+
		"its result reports total_bytes=4096 after 4096 bytes were sent")
}

// TestEstimateReadError: an error reading a file ends the call with it.
func TestEstimateReadError(t *testing.T) {
	c := dial(t, chunkdtest.StartFake(t, chunkdtest.Honest))
	_, err := c.EstimatePaths(testContext(t), parseSets(t, "fastcdc"), EstimateOptions{},
		filepath.Join(t.TempDir(), "missing"))
	if !os.IsNotExist(err) {
		t.Errorf("a missing file: %v", err)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "a"), []byte("abc"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = c.Estimate(testContext(t), parseSets(t, "fastcdc"), EstimateOptions{},
		bytes.NewReader([]byte("abc")), &failingReader{n: 5000})
	if !errors.Is(err, errDisk) || err.Error() != "chunkd: reading the input: disk on fire" {
		t.Errorf("a failing reader: %v", err)
	}
}

// TestExpandPaths: a directory stands for its regular files, recursively,
// in sorted path order; files and "-" stay as given.
func TestExpandPaths(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{"b/x", "b.txt", "a/c/d", "a/c.bin"} {
		path := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(name), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(filepath.Join(dir, "empty"), 0o700); err != nil {
		t.Fatal(err)
	}
	got, err := ExpandPaths(filepath.Join(dir, "b.txt"), "-", dir)
	want := []string{filepath.Join(dir, "b.txt"), "-"}
	for _, name := range []string{"a/c.bin", "a/c/d", "b.txt", "b/x"} { // "." sorts before "/"
		want = append(want, filepath.Join(dir, name))
	}
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("ExpandPaths = %q, %v; want %q", got, err, want)
	}
}

// bucketOf is the lower bound of a chunk length's power-of-two bucket.
func bucketOf(length uint32) uint64 { return 1 << (bits.Len32(length) - 1) }
