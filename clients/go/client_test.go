package chunkd

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/chunkd/chunkd/clients/go/internal/chunkdtest"
)

// testServer is a real chunkd on a free loopback port.
type testServer struct{ addr string }

func freePort(t *testing.T) string { return chunkdtest.FreePort(t) }

// startServer starts chunkd with extra flags and waits until its health
// service reports SERVING; the server stops when the test ends.
func startServer(t *testing.T, extra ...string) *testServer {
	t.Helper()
	return &testServer{addr: chunkdtest.Start(t, extra...)}
}

// startServerWith is startServer with the credentials of the health checks.
func startServerWith(t *testing.T, healthCreds grpc.DialOption, extra ...string) *testServer {
	t.Helper()
	return &testServer{addr: chunkdtest.StartWith(t, healthCreds, extra...)}
}

func dial(t *testing.T, addr string, opts ...Option) *Client {
	t.Helper()
	c, err := Dial(addr, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func repoFile(name string) string { return filepath.Join("..", "..", "tests", "data", name) }

type vector struct {
	offset uint64
	length uint32
	sha    string
}

// sekienVectors reads the public FastCDC 2020 vectors of seed 0.
func sekienVectors(t *testing.T) []vector {
	t.Helper()
	f, err := os.Open(repoFile("fastcdc2020_test_vectors.txt"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []vector
	seed := -1
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if strings.HasPrefix(line, "# Seed:") {
			seed, _ = strconv.Atoi(strings.TrimSpace(strings.TrimPrefix(line, "# Seed:")))
			continue
		}
		if line == "" || strings.HasPrefix(line, "#") || seed != 0 {
			continue
		}
		var v vector
		if _, err := fmt.Sscan(line, &v.offset, &v.length, &v.sha); err != nil {
			t.Fatalf("bad vector line %q: %v", line, err)
		}
		out = append(out, v)
	}
	if len(out) == 0 {
		t.Fatal("no vectors for seed 0")
	}
	return out
}

func TestChunkMatchesPublicVectors(t *testing.T) {
	s := startServer(t)
	c := dial(t, s.addr)
	f, err := os.Open(repoFile("SekienAkashita.jpg"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	it, err := c.Chunk(testContext(t), f, Params{
		MinSize: 4096, AvgSize: 16384, MaxSize: 65535, NormalizationLevel: Level(2),
		MessageSize: 10000,
	})
	if err != nil {
		t.Fatal(err)
	}
	chunks, summary, err := it.Collect()
	if err != nil {
		t.Fatal(err)
	}
	want := sekienVectors(t)
	if len(chunks) != len(want) {
		t.Fatalf("got %d chunks, want %d", len(chunks), len(want))
	}
	for i, ch := range chunks {
		if ch.Offset != want[i].offset || ch.Length != want[i].length ||
			hex.EncodeToString(ch.Fingerprint) != want[i].sha {
			t.Errorf("chunk %d: got %d,%d,%x want %+v", i, ch.Offset, ch.Length, ch.Fingerprint, want[i])
		}
	}
	if summary.TotalBytes != 109466 || summary.TotalChunks != uint64(len(want)) {
		t.Errorf("summary %+v", summary)
	}
}

func randomBytes(seed int64, n int) []byte {
	b := make([]byte, n)
	rand.New(rand.NewSource(seed)).Read(b)
	return b
}

func TestChunkFingerprintsAndFraming(t *testing.T) {
	s := startServer(t)
	c := dial(t, s.addr)
	data := randomBytes(7, 700_000)
	var lists [][]Chunk
	for _, size := range []int{777, 4096, 0} { // 0: DefaultMessageSize
		p := Params{Algorithm: "crc32", MinSize: 2048, AvgSize: 8192, MaxSize: 32768, MessageSize: size}
		it, err := c.Chunk(testContext(t), bytes.NewReader(data), p)
		if err != nil {
			t.Fatal(err)
		}
		chunks, summary, err := it.Collect()
		if err != nil {
			t.Fatal(err)
		}
		var offset uint64
		for i, ch := range chunks {
			sum := sha256.Sum256(data[ch.Offset : ch.Offset+uint64(ch.Length)])
			if ch.Offset != offset || !bytes.Equal(ch.Fingerprint, sum[:]) {
				t.Fatalf("chunk %d at %d (want %d): fingerprint %x, want %x", i, ch.Offset, offset, ch.Fingerprint, sum)
			}
			offset += uint64(ch.Length)
		}
		if offset != uint64(len(data)) || summary.TotalBytes != offset || summary.TotalChunks != uint64(len(chunks)) {
			t.Fatalf("covered %d bytes, summary %+v, %d chunks", offset, summary, len(chunks))
		}
		lists = append(lists, chunks)
	}
	for i := 1; i < len(lists); i++ {
		if fmt.Sprint(lists[i]) != fmt.Sprint(lists[0]) {
			t.Errorf("the chunks depend on the message size")
		}
	}
}

func TestDedupFindMissing(t *testing.T) {
	s := startServer(t)
	c := dial(t, s.addr)
	ctx := testContext(t)
	data := randomBytes(11, 300_000)
	ns := fmt.Sprintf("go-test-%d", time.Now().UnixNano())
	first, err := c.Dedup(ctx, ns, bytes.NewReader(data), Params{Fingerprint: "xxh128"})
	if err != nil {
		t.Fatal(err)
	}
	records, sum1, err := first.Collect()
	if err != nil {
		t.Fatal(err)
	}
	if sum1.UniqueBytes != uint64(len(data)) || sum1.TotalBytes != uint64(len(data)) {
		t.Fatalf("first pass %+v", sum1)
	}
	for _, r := range records {
		if !r.IsNew || len(r.Fingerprint) != 16 {
			t.Fatalf("first pass record %+v", r)
		}
	}
	second, err := c.Dedup(ctx, ns, bytes.NewReader(data), Params{Fingerprint: "xxh128"})
	if err != nil {
		t.Fatal(err)
	}
	defer second.Close()
	duplicates := 0
	for r := range second.All() {
		if r.IsNew {
			t.Fatalf("second pass: new chunk %+v", r)
		}
		duplicates++
	}
	if err := second.Err(); err != nil {
		t.Fatal(err)
	}
	sum2 := second.Summary()
	if duplicates != len(records) {
		t.Fatalf("second pass: %d records, want %d", duplicates, len(records))
	}
	if sum2.UniqueBytes != 0 || sum2.TotalChunks != sum1.TotalChunks {
		t.Fatalf("second pass %+v", sum2)
	}
	unknown := bytes.Repeat([]byte{0xab}, 16)
	missing, err := c.FindMissing(ctx, ns, [][]byte{records[0].Fingerprint, unknown})
	if err != nil {
		t.Fatal(err)
	}
	if len(missing) != 1 || !bytes.Equal(missing[0], unknown) {
		t.Fatalf("FindMissing = %x", missing)
	}
}

func TestErrorsCarryTheGRPCCode(t *testing.T) {
	s := startServer(t)
	c := dial(t, s.addr)
	it, err := c.Chunk(testContext(t), bytes.NewReader([]byte("abc")), Params{MinSize: 4})
	if err != nil {
		t.Fatal(err)
	}
	if it.Next() {
		t.Fatal("a record for invalid parameters")
	}
	if code := status.Code(it.Err()); code != codes.InvalidArgument || !strings.Contains(it.Err().Error(), "min_size") {
		t.Fatalf("err = %v (code %v)", it.Err(), code)
	}
	if _, err := c.FindMissing(testContext(t), "bad namespace!", nil); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("FindMissing with a bad namespace: %v", err)
	}
	if _, err := c.Chunk(testContext(t), bytes.NewReader(nil), Params{Algorithm: "nope"}); err == nil ||
		!strings.Contains(err.Error(), "nope") {
		t.Fatalf("unknown algorithm: %v", err)
	}
}

type failingReader struct{ n int }

var errDisk = errors.New("disk on fire")

func (r *failingReader) Read(p []byte) (int, error) {
	if r.n <= 0 {
		return 0, errDisk
	}
	n := min(len(p), r.n)
	r.n -= n
	return n, nil
}

func TestReadErrorIsReported(t *testing.T) {
	s := startServer(t)
	c := dial(t, s.addr)
	it, err := c.Chunk(testContext(t), &failingReader{n: 100_000}, Params{MessageSize: 4096})
	if err != nil {
		t.Fatal(err)
	}
	_, _, err = it.Collect()
	if !errors.Is(err, errDisk) {
		t.Fatalf("err = %v, want the reader's error", err)
	}
}

func TestServerInfo(t *testing.T) {
	s := startServer(t)
	c := dial(t, s.addr)
	info, err := c.ServerInfo(testContext(t))
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]AlgorithmInfo{}
	for _, a := range info.Algorithms {
		names[a.Name] = a
		// The kernel the algorithm's streams run, on the pool's threads.
		switch a.Backend {
		case "scalar", "avx2", "avx512":
		default:
			t.Errorf("%s: backend %q", a.Name, a.Backend)
		}
		if a.BackendThreads == 0 {
			t.Errorf("%s: backend_threads 0", a.Name)
		}
	}
	for _, want := range []string{"fastcdc", "crc32", "seqcdc", "fixed", "repmaxcdc", "rabin", "buzhash"} {
		if _, ok := names[want]; !ok {
			t.Errorf("algorithm %s missing from %v", want, names)
		}
	}
	if info.Version == "" || info.MaxMessageBytes != 4<<20 || info.IndexBackend != "memory" {
		t.Errorf("info %+v", info)
	}
	if fmt.Sprint(info.Fingerprints) != "[sha256 xxh128 none]" {
		t.Errorf("fingerprints %q", info.Fingerprints)
	}
	checkRanges(t, names)
}

// checkRanges checks the ranges of the parameters each algorithm takes;
// nil for the others.
func checkRanges(t *testing.T, names map[string]AlgorithmInfo) {
	fastcdc, crc32, repmax, rabin := names["fastcdc"], names["crc32"], names["repmaxcdc"], names["rabin"]
	if fastcdc.NormalizationLevel == nil || *fastcdc.NormalizationLevel != (Range{0, 3, 1}) ||
		fastcdc.HorizonSize != nil || fastcdc.Polynomial != nil || fastcdc.AvgSizePowerOfTwo {
		t.Errorf("fastcdc %+v", fastcdc)
	}
	if fastcdc.MinSize.Default == 0 || fastcdc.MinSize.Min > fastcdc.MinSize.Default ||
		fastcdc.MinSize.Default > fastcdc.MinSize.Max {
		t.Errorf("fastcdc min_size %+v", fastcdc.MinSize)
	}
	if crc32.NormalizationLevel != nil || !crc32.AvgSizePowerOfTwo {
		t.Errorf("crc32 %+v", crc32)
	}
	if repmax.HorizonSize == nil || repmax.HorizonSize.Default != 2<<20 || repmax.AvgSize != (Range{}) {
		t.Errorf("repmaxcdc %+v", repmax)
	}
	if rabin.Polynomial == nil || rabin.Polynomial.Default != 0x3DA3358B4DC173 ||
		rabin.Polynomial.Min != 1<<53 || rabin.Polynomial.Max != 1<<54-1 {
		t.Errorf("rabin %+v", rabin.Polynomial)
	}
}

func TestReleaseDropsReferences(t *testing.T) {
	s := startServer(t)
	c := dial(t, s.addr)
	ctx := testContext(t)
	data := randomBytes(23, 200_000)
	ns := fmt.Sprintf("go-release-%d", time.Now().UnixNano())
	var fps [][]byte
	for pass := 0; pass < 2; pass++ { // every chunk referenced twice
		it, err := c.Dedup(ctx, ns, bytes.NewReader(data), Params{})
		if err != nil {
			t.Fatal(err)
		}
		records, _, err := it.Collect()
		if err != nil {
			t.Fatal(err)
		}
		if pass == 0 {
			for _, r := range records {
				fps = append(fps, r.Fingerprint)
			}
		}
	}
	want := func(counts []uint64, n uint64) {
		t.Helper()
		if len(counts) != len(fps) {
			t.Fatalf("%d counts for %d fingerprints", len(counts), len(fps))
		}
		for i, got := range counts {
			if got != n {
				t.Fatalf("count %d = %d, want %d", i, got, n)
			}
		}
	}
	counts, err := c.Release(ctx, ns, fps, ReleaseOptions{RequestID: "go-release-1"})
	if err != nil {
		t.Fatal(err)
	}
	want(counts, 1)
	// A retry with the same id is applied once.
	counts, err = c.Release(ctx, ns, fps, ReleaseOptions{RequestID: "go-release-1"})
	if err != nil {
		t.Fatal(err)
	}
	want(counts, 1)
	counts, err = c.Release(ctx, ns, fps, ReleaseOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want(counts, 0)
	missing, err := c.FindMissing(ctx, ns, fps)
	if err != nil || len(missing) != len(fps) {
		t.Fatalf("after the last release FindMissing = %d of %d (%v)", len(missing), len(fps), err)
	}
	if _, err := c.Release(ctx, ns, fps, ReleaseOptions{Fingerprint: "none"}); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("fingerprint none: %v", err)
	}
}

func TestDedupRetriedWithAStreamIDCountsOnce(t *testing.T) {
	s := startServer(t)
	c := dial(t, s.addr)
	ctx := testContext(t)
	data := randomBytes(29, 150_000)
	ns := fmt.Sprintf("go-stream-id-%d", time.Now().UnixNano())
	var runs [][]DedupChunk
	for _, size := range []int{0, 7777} {
		it, err := c.Dedup(ctx, ns, bytes.NewReader(data), Params{StreamID: "go-s-1", MessageSize: size})
		if err != nil {
			t.Fatal(err)
		}
		records, _, err := it.Collect()
		if err != nil {
			t.Fatal(err)
		}
		runs = append(runs, records)
	}
	if fmt.Sprint(runs[0]) != fmt.Sprint(runs[1]) {
		t.Fatal("the retried stream answered differently")
	}
	fps := make([][]byte, len(runs[0]))
	for i, r := range runs[0] {
		fps[i] = r.Fingerprint
	}
	counts, err := c.Release(ctx, ns, fps, ReleaseOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for i, n := range counts {
		if n != 0 {
			t.Fatalf("fingerprint %d still has %d references: the retry counted twice", i, n)
		}
	}
}
