package chunkd

import (
	"bytes"
	"errors"
	"io"
	"math/bits"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

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

// versions are three files of one data set with shared content: a file, a
// copy of its first half with new bytes after, and the file again.
func versions() [][]byte {
	base := randomBytes(51, 400_000)
	second := append(append([]byte{}, base[:200_000]...), randomBytes(52, 100_000)...)
	return [][]byte{base, second, base}
}

// fromChunks is what an exact estimate of set over files must say,
// computed from Chunk's records of each file with xxh128 fingerprints.
func fromChunks(t *testing.T, c *Client, set EstimateSet, files [][]byte) SetEstimate {
	t.Helper()
	p := set.Params
	p.Fingerprint = "xxh128"
	want := SetEstimate{Label: set.Label}
	distinct := map[string]bool{}
	buckets := map[uint64]*SizeBucket{}
	for _, f := range files {
		it, err := c.Chunk(testContext(t), bytes.NewReader(f), p)
		if err != nil {
			t.Fatal(err)
		}
		records, _, err := it.Collect()
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range records {
			want.Bytes, want.Chunks = want.Bytes+uint64(r.Length), want.Chunks+1
			if !distinct[string(r.Fingerprint)] {
				distinct[string(r.Fingerprint)] = true
				want.UniqueBytes, want.UniqueChunks = want.UniqueBytes+uint64(r.Length), want.UniqueChunks+1
			}
			b := buckets[bucketOf(r.Length)]
			if b == nil {
				b = &SizeBucket{LowerBound: bucketOf(r.Length)}
				buckets[b.LowerBound] = b
			}
			b.Chunks, b.Bytes = b.Chunks+1, b.Bytes+uint64(r.Length)
		}
	}
	for bound := uint64(1); bound != 0; bound <<= 1 {
		if b := buckets[bound]; b != nil {
			want.Histogram = append(want.Histogram, *b)
		}
	}
	return want
}

// checkExact compares the exact estimate of set with Chunk's counts.
func checkExact(t *testing.T, set EstimateSet, got, want SetEstimate) {
	t.Helper()
	if got.Label != want.Label || got.Bytes != want.Bytes || got.Chunks != want.Chunks ||
		got.UniqueBytes != want.UniqueBytes || got.UniqueChunks != want.UniqueChunks ||
		!reflect.DeepEqual(got.Histogram, want.Histogram) || got.Sampled || got.SampledUniqueChunks != want.UniqueChunks {
		t.Errorf("%s: estimate %+v; Chunk gives %+v", set.Label, got, want)
	}
	if ratio := float64(got.Bytes) / float64(got.UniqueBytes); got.DedupRatio != ratio || ratio <= 1.2 {
		t.Errorf("%s: dedup ratio %v, want %v (> 1.2)", set.Label, got.DedupRatio, ratio)
	}
	if _, _, ok := got.Interval(); ok || got.Params.Algorithm != set.Params.Algorithm || len(got.IndexCosts) != 3 {
		t.Errorf("%s: interval %v, params %+v, index costs %+v", set.Label, ok, got.Params, got.IndexCosts)
	}
}

// checkSampled compares an estimate sampled 1 in rate with the exact one:
// the counts of every chunk are the same; the distinct ones, counted by the
// server's sketch of every fingerprint, are off by at most one on these few
// hundred chunks, and the sample holds fewer.
func checkSampled(t *testing.T, got, exact SetEstimate, rate uint64) {
	t.Helper()
	off := int64(got.UniqueChunks) - int64(exact.UniqueChunks)
	if !got.Sampled || got.Chunks != exact.Chunks || got.Bytes != exact.Bytes ||
		!reflect.DeepEqual(got.Histogram, exact.Histogram) || off < -1 || off > 1 ||
		(rate > 1 && got.SampledUniqueChunks >= exact.UniqueChunks) {
		t.Errorf("%s sampled 1 in %d: %+v; exact %+v", got.Label, rate, got, exact)
	}
}

// TestEstimateEqualsChunk: an exact estimate of several files counts what
// Chunk gives for each file on its own (distinct chunks over all files),
// for every algorithm, however the files are split into messages; a
// sampled one is the same whatever the split, with the same exact counts.
func TestEstimateEqualsChunk(t *testing.T) {
	s := startServer(t)
	c := dial(t, s.addr)
	files := versions()
	sets := parseSets(t, "fastcdc:min=4096,avg=16384,max=65536", "fastcdc", "crc32:min=2048,avg=8192,max=32768",
		"seqcdc:preset=seqcdc-8k", "fixed:avg=8192", "repmaxcdc:min=4096,horizon=16384",
		"rabin:min=4096,avg=16384,max=65536", "buzhash:min=4096,avg=16384,max=65536")
	exact, err := c.Estimate(testContext(t), sets, EstimateOptions{}, readers(files)...)
	if err != nil {
		t.Fatal(err)
	}
	if exact.TotalBytes != 1_100_000 || exact.Files != 3 || exact.SampleRate != 1 || exact.Fingerprint != "xxh128" ||
		len(exact.Sets) != len(sets) {
		t.Fatalf("result %+v", exact)
	}
	for i, set := range sets {
		checkExact(t, set, exact.Sets[i], fromChunks(t, c, set, files))
	}
	split, err := c.Estimate(testContext(t), sets, EstimateOptions{MessageSize: 1000}, readers(files)...)
	if err != nil || !reflect.DeepEqual(split, exact) {
		t.Errorf("in 1000-byte messages: %+v, %v", split, err)
	}
	const rate = 4
	sampled, err := c.Estimate(testContext(t), sets, EstimateOptions{SampleRate: rate}, readers(files)...)
	if err != nil {
		t.Fatal(err)
	}
	split, err = c.Estimate(testContext(t), sets, EstimateOptions{SampleRate: rate, MessageSize: 1000}, readers(files)...)
	if err != nil || !reflect.DeepEqual(split, sampled) || sampled.SampleRate != rate {
		t.Errorf("sampled, in 1000-byte messages: %+v, %v; in one: %+v", split, err, sampled)
	}
	for i, got := range sampled.Sets {
		checkSampled(t, got, exact.Sets[i], rate)
	}
}

// TestEstimatePathsWalksDirectories: a directory is its files in sorted
// path order, the same data set as the files given one by one.
func TestEstimatePathsWalksDirectories(t *testing.T) {
	s := startServer(t)
	c := dial(t, s.addr)
	files := versions()
	dir := t.TempDir()
	for i, name := range []string{"a/v1", "a/v1.5", "b"} { // sorted: a/v1, a/v1.5, b
		path := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, files[i], 0o600); err != nil {
			t.Fatal(err)
		}
	}
	sets := parseSets(t, "fastcdc:avg=8192", "fixed:avg=4096")
	want, err := c.Estimate(testContext(t), sets, EstimateOptions{}, readers(files)...)
	if err != nil {
		t.Fatal(err)
	}
	got, err := c.EstimatePaths(testContext(t), sets, EstimateOptions{}, dir)
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("EstimatePaths(dir) = %+v, %v; want %+v", got, err, want)
	}
}

// TestEstimateNamespace: with a namespace the result says how much of each
// set's unique data it holds, read only; SHA-256 is the default then.
func TestEstimateNamespace(t *testing.T) {
	s := startServer(t)
	c := dial(t, s.addr)
	held, other := randomBytes(61, 300_000), randomBytes(62, 200_000)
	sets := parseSets(t, "fastcdc:min=4096,avg=16384,max=65536", "fixed:avg=8192")
	p := sets[0].Params
	it, err := c.Dedup(testContext(t), "estimate-held", bytes.NewReader(held), p)
	if err != nil {
		t.Fatal(err)
	}
	_, dedup, err := it.Collect()
	if err != nil {
		t.Fatal(err)
	}
	r, err := c.Estimate(testContext(t), sets, EstimateOptions{Namespace: "estimate-held"},
		bytes.NewReader(held), bytes.NewReader(other))
	if err != nil {
		t.Fatal(err)
	}
	got := r.Sets[0]
	if r.Fingerprint != "sha256" || got.NamespaceBytes == nil || *got.NamespaceBytes != dedup.UniqueBytes ||
		got.NamespaceChunks == nil || *got.NamespaceChunks != dedup.UniqueChunks || r.Sets[1].NamespaceBytes == nil {
		t.Errorf("namespace holding %d bytes in %d chunks: %+v", dedup.UniqueBytes, dedup.UniqueChunks, r)
	}
	for i := 0; i < 2; i++ { // the estimate writes nothing: the namespace stays empty
		r, err = c.Estimate(testContext(t), sets, EstimateOptions{Namespace: "estimate-empty"}, bytes.NewReader(other))
		if err != nil || *r.Sets[0].NamespaceBytes != 0 || *r.Sets[0].NamespaceChunks != 0 {
			t.Errorf("an empty namespace, run %d: %+v, %v", i, r, err)
		}
	}
	r, err = c.Estimate(testContext(t), sets, EstimateOptions{}, bytes.NewReader(other))
	if err != nil || r.Fingerprint != "xxh128" || r.Sets[0].NamespaceBytes != nil || r.Sets[0].NamespaceChunks != nil {
		t.Errorf("without a namespace: %+v, %v", r, err)
	}
}

// TestEstimateErrors: a parameter out of range is INVALID_ARGUMENT naming
// the set; an exact estimate past --estimate_max_entries is
// RESOURCE_EXHAUSTED with the reason STREAM_MEMORY.
func TestEstimateErrors(t *testing.T) {
	s := startServer(t, "--estimate_max_entries=10")
	c := dial(t, s.addr)
	_, err := c.Estimate(testContext(t), parseSets(t, "fastcdc", "fastcdc:min=1"), EstimateOptions{},
		bytes.NewReader(randomBytes(71, 1000)))
	if status.Code(err) != codes.InvalidArgument || !strings.Contains(status.Convert(err).Message(), "fastcdc:min=1") ||
		ReasonOf(err) != "" {
		t.Errorf("min=1: %v", err)
	}
	_, err = c.Estimate(testContext(t), parseSets(t, "fixed:avg=1024"), EstimateOptions{},
		bytes.NewReader(randomBytes(72, 100_000)))
	if status.Code(err) != codes.ResourceExhausted || ReasonOf(err) != "STREAM_MEMORY" {
		t.Errorf("past --estimate_max_entries: %v (reason %q)", err, ReasonOf(err))
	}
	r, err := c.Estimate(testContext(t), parseSets(t, "fixed:avg=1024"), EstimateOptions{SampleRate: 64},
		bytes.NewReader(randomBytes(72, 100_000)))
	if err != nil || r.Sets[0].Chunks != 98 {
		t.Errorf("sampled 1 in 64: %+v, %v", r, err)
	}
}
