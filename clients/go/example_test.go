package chunkd_test

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"math/rand"
	"os"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	chunkd "github.com/chunkd/chunkd/clients/go"
	"github.com/chunkd/chunkd/clients/go/internal/chunkdtest"
)

// address is the server of the examples: a chunkd that TestMain starts.
var address = "127.0.0.1:50051"

// TestMain starts the chunkd ($CHUNKD_BIN) the examples talk to. Without
// CHUNKD_BIN (outside CI; make test always sets it) it runs the tests
// only, which skip.
func TestMain(m *testing.M) {
	flag.Parse()
	bin := os.Getenv("CHUNKD_BIN")
	if bin == "" && os.Getenv("CI") == "" {
		if run := flag.Lookup("test.run"); run.Value.String() == "" {
			fmt.Fprintln(os.Stderr, "CHUNKD_BIN is not set: the examples are not run (make test sets it)")
			_ = run.Value.Set("^Test")
		}
		os.Exit(m.Run())
	}
	server, err := chunkdtest.Launch(bin)
	if err != nil {
		fmt.Fprintln(os.Stderr, "starting chunkd for the examples:", err)
		os.Exit(1)
	}
	address = server.Addr
	code := m.Run()
	server.Stop()
	os.Exit(code)
}

// sample is 64 KiB of pseudo-random bytes, the same on every run.
func sample() []byte {
	data := make([]byte, 64<<10)
	rand.New(rand.NewSource(1)).Read(data)
	return data
}

// Chunk a stream: the package's example. input is any io.Reader, e.g. an
// *os.File.
func Example() {
	ctx := context.Background()
	input := bytes.NewReader(sample())

	c, err := chunkd.Dial(address) // chunkd.WithToken, chunkd.WithTLSFiles, ...
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	it, err := c.Chunk(ctx, input, chunkd.Params{Algorithm: "fastcdc", AvgSize: 16384})
	if err != nil {
		log.Fatal(err)
	}
	defer it.Close()
	for it.Next() {
		ch := it.Record() // Offset, Length, Fingerprint
		fmt.Printf("%d,%d,%x\n", ch.Offset, ch.Length, ch.Fingerprint[:8])
	}
	if err := it.Err(); err != nil {
		log.Fatal(err)
	}
	fmt.Println(it.Summary().TotalChunks, "chunks")
	// Output:
	// 0,17665,ab48029baf11771d
	// 17665,25767,b41da88f5d410ffe
	// 43432,22104,d37401a86a5434e1
	// 3 chunks
}

// Deduplicate the same bytes twice: the second time no chunk is new.
// Retries replays a stream that fails (the server restarts, ...) without
// counting any reference twice; it needs a seekable input.
func ExampleClient_Dedup() {
	ctx := context.Background()
	c, err := chunkd.Dial(address)
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	namespace := fmt.Sprintf("example-%d", time.Now().UnixNano())
	for pass := 1; pass <= 2; pass++ {
		it, err := c.Dedup(ctx, namespace, bytes.NewReader(sample()), chunkd.Params{Retries: 3})
		if err != nil {
			log.Fatal(err)
		}
		records, summary, err := it.Collect()
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("pass %d: %d chunks, %d new, first new: %v\n",
			pass, summary.TotalChunks, summary.UniqueChunks, records[0].IsNew)
	}
	// Output:
	// pass 1: 3 chunks, 3 new, first new: true
	// pass 2: 3 chunks, 0 new, first new: false
}

// Ask which chunks a namespace lacks, and drop references.
func ExampleClient_FindMissing() {
	ctx := context.Background()
	c, err := chunkd.Dial(address)
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	namespace := fmt.Sprintf("example-%d", time.Now().UnixNano())
	it, err := c.Dedup(ctx, namespace, bytes.NewReader(sample()), chunkd.Params{})
	if err != nil {
		log.Fatal(err)
	}
	records, _, err := it.Collect()
	if err != nil {
		log.Fatal(err)
	}
	stored := records[0].Fingerprint
	unknown := bytes.Repeat([]byte{0xab}, 32) // a sha256 no chunk has
	missing, err := c.FindMissing(ctx, namespace, [][]byte{stored, unknown})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("missing: %d of 2, the unknown one: %v\n", len(missing), bytes.Equal(missing[0], unknown))

	// Release drops one reference each; 0 left removes the entry.
	counts, err := c.Release(ctx, namespace, [][]byte{stored}, chunkd.ReleaseOptions{})
	if err != nil {
		log.Fatal(err)
	}
	missing, err = c.FindMissing(ctx, namespace, [][]byte{stored})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("references left: %d, missing now: %d\n", counts[0], len(missing))
	// Output:
	// missing: 1 of 2, the unknown one: true
	// references left: 0, missing now: 1
}

// What a server offers: algorithms, their parameters' ranges and defaults.
func ExampleClient_ServerInfo() {
	ctx := context.Background()
	c, err := chunkd.Dial(address)
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	info, err := c.ServerInfo(ctx)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("fingerprints:", info.Fingerprints)
	for _, a := range info.Algorithms {
		// A size the algorithm does not take has the zero Range (fixed
		// takes only AvgSize).
		size := a.MinSize
		if size.Max == 0 {
			size = a.AvgSize
		}
		fmt.Printf("%s: size %d..%d (default %d)", a.Name, size.Min, size.Max, size.Default)
		if level := a.NormalizationLevel; level != nil {
			fmt.Printf(", level %d..%d (default %d)", level.Min, level.Max, level.Default)
		}
		fmt.Println()
	}
	// Output:
	// fingerprints: [sha256 xxh128 none]
	// fastcdc: size 64..1048576 (default 4096), level 0..3 (default 1)
	// crc32: size 64..1048576 (default 2048)
	// seqcdc: size 64..1048576 (default 8192)
	// fixed: size 64..16777216 (default 16384)
	// repmaxcdc: size 64..4194304 (default 262144)
	// rabin: size 64..8388608 (default 524288)
	// buzhash: size 48..4194304 (default 16384)
}

// How a data set of two files, one a copy of the other, would deduplicate
// under two parameter sets, sent once; nothing is written to any index.
func ExampleClient_Estimate() {
	ctx := context.Background()
	c, err := chunkd.Dial(address)
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	var sets []chunkd.EstimateSet
	for _, spec := range []string{"fixed:avg=16384", "fastcdc:min=4096,avg=8192,max=32768"} {
		set, err := chunkd.ParseSet(spec) // the CLIs' --set syntax
		if err != nil {
			log.Fatal(err)
		}
		sets = append(sets, set)
	}
	data := sample()
	r, err := c.Estimate(ctx, sets, chunkd.EstimateOptions{}, bytes.NewReader(data), bytes.NewReader(data))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%d bytes in %d files\n", r.TotalBytes, r.Files)
	for _, s := range r.Sets {
		fmt.Printf("%s: unique %d of %d bytes, ratio %.1f\n", s.Label, s.UniqueBytes, s.Bytes, s.DedupRatio)
	}
	// Output:
	// 131072 bytes in 2 files
	// fixed:avg=16384: unique 65536 of 131072 bytes, ratio 2.0
	// fastcdc:min=4096,avg=8192,max=32768: unique 65536 of 131072 bytes, ratio 2.0
}

// Errors are gRPC status errors: status.Code tells a bad parameter
// (INVALID_ARGUMENT, from the server or found by the client) from a server
// that cannot be reached (UNAVAILABLE) and the rest.
func Example_errors() {
	ctx := context.Background()
	c, err := chunkd.Dial(address)
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	// crc32 has no normalization level: the server refuses it.
	it, err := c.Chunk(ctx, bytes.NewReader(sample()), chunkd.Params{Algorithm: "crc32", NormalizationLevel: chunkd.Level(2)})
	if err != nil {
		log.Fatal(err)
	}
	_, _, err = it.Collect()
	fmt.Println(status.Code(err) == codes.InvalidArgument, status.Convert(err).Message())

	// An unknown algorithm: the client refuses it before any call.
	_, err = c.Chunk(ctx, bytes.NewReader(sample()), chunkd.Params{Algorithm: "fastest"})
	var argErr *chunkd.ArgumentError
	fmt.Println(status.Code(err) == codes.InvalidArgument, errors.As(err, &argErr), argErr.Field)
	fmt.Println(err)
	// Output:
	// true chunking.normalization_level is not a parameter of crc32 (it takes min_size, avg_size, max_size); leave normalization_level unset
	// true true Params.Algorithm
	// chunkd: Params.Algorithm: unknown name "fastest" (fastcdc, crc32, seqcdc, fixed, repmaxcdc, rabin, buzhash)
}

// TestPackageDocMirrorsExample: the code in the package comment is
// Example's, so the compiler and Example's output check it too.
func TestPackageDocMirrorsExample(t *testing.T) {
	source, err := os.ReadFile("example_test.go")
	if err != nil {
		t.Fatal(err)
	}
	doc, err := os.ReadFile("client.go")
	if err != nil {
		t.Fatal(err)
	}
	// Example's body from its Dial to the line before "// Output:".
	body := string(source)
	body = body[strings.Index(body, "\n\tc, err := chunkd.Dial(address)")+1:]
	body = body[:strings.Index(body, "\t// Output:")]
	var want []string
	for _, line := range strings.Split(strings.TrimRight(body, "\n"), "\n") {
		want = append(want, strings.TrimPrefix(line, "\t"))
	}
	// The package comment's code block: the lines "//\t...".
	var got []string
	for _, line := range strings.Split(string(doc), "\n") {
		if code, ok := strings.CutPrefix(line, "//\t"); ok {
			got = append(got, code)
		} else if len(got) > 0 {
			break
		}
	}
	mirrored := strings.Replace(strings.Join(want, "\n"), "chunkd.Dial(address)", `chunkd.Dial("127.0.0.1:50051")`, 1)
	if strings.Join(got, "\n") != mirrored {
		t.Errorf("the package comment's example:\n%s\nis not Example's:\n%s", strings.Join(got, "\n"), mirrored)
	}
}
