package chunkd

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

// constructedResult is an estimate of two sets, the second sampled.
func constructedResult(namespace bool) *EstimateResult {
	costs := func(entries uint64) []IndexCost {
		return []IndexCost{{"memory", "memory", entries, entries * 100}, {"rocksdb", "disk", entries, entries * 50},
			{"redis", "memory", entries, entries * 150}}
	}
	r := &EstimateResult{TotalBytes: 1048576, Files: 3, SampleRate: 64, Fingerprint: "sha256", Sets: []SetEstimate{
		{Label: "fastcdc:min=4096,avg=16384,max=65536", Params: Params{Algorithm: "fastcdc", MinSize: 4096,
			AvgSize: 16384, MaxSize: 65536, NormalizationLevel: Level(1)},
			Bytes: 1048576, Chunks: 64, UniqueChunks: 60, UniqueBytes: 983040, DedupRatio: 1048576.0 / 983040,
			Histogram:     []SizeBucket{{4096, 4, 20000}, {8192, 30, 400000}, {16384, 30, 628576}},
			MeanChunkSize: 16384, MinChunkSize: 4096, P50ChunkSize: 16000, P90ChunkSize: 30000, P99ChunkSize: 60000,
			MaxChunkSize: 65536, SampledUniqueChunks: 60, IndexCosts: costs(60)},
		{Label: "seqcdc:preset=seqcdc-16k", Params: Params{Algorithm: "seqcdc", MinSize: 8192, MaxSize: 32768,
			SeqMode: "decreasing", SeqLength: 5, SkipTrigger: 50, SkipSize: 512},
			Bytes: 1048576, Chunks: 100, UniqueChunks: 1024, UniqueBytes: 699051, DedupRatio: 1.5,
			Histogram: []SizeBucket{{8192, 100, 1048576}}, MeanChunkSize: 10485.76, MinChunkSize: 8192,
			P50ChunkSize: 9000, P90ChunkSize: 12000, P99ChunkSize: 32768, MaxChunkSize: 32768,
			Sampled: true, SampledUniqueChunks: 16, RatioLow: 1.2, RatioHigh: 1.8, IndexCosts: costs(1024)},
	}}
	if namespace {
		for i := range r.Sets {
			held, chunks := uint64(4096*(i+1)), uint64(i+1)
			r.Sets[i].NamespaceBytes, r.Sets[i].NamespaceChunks = &held, &chunks
		}
	}
	return r
}

func TestEstimateTable(t *testing.T) {
	want := "" +
		"set                                     bytes  chunks  unique_chunks  unique_bytes  dedup_ratio  ratio_interval  mean_size    p50    p90    p99\n" +
		"fastcdc:min=4096,avg=16384,max=65536  1048576      64             60        983040        1.067               -      16384  16000  30000  60000\n" +
		"seqcdc:preset=seqcdc-16k              1048576     100           1024        699051        1.500     1.200-1.800      10486   9000  12000  32768\n" +
		"\n" +
		"set                                   index_entries  memory_bytes  rocksdb_disk_bytes  redis_memory_bytes\n" +
		"fastcdc:min=4096,avg=16384,max=65536             60          6000                3000                9000\n" +
		"seqcdc:preset=seqcdc-16k                       1024        102400               51200              153600\n" +
		"\n" +
		"1048576 bytes in 3 files; sample 1 in 64; fingerprint sha256\n"
	if got := constructedResult(false).Table(); got != want {
		t.Errorf("Table:\n%s\nwant:\n%s", got, want)
	}
	got := constructedResult(true).Table()
	lines := strings.Split(got, "\n")
	if !strings.HasSuffix(lines[0], "    p99  namespace_bytes") || !strings.HasSuffix(lines[1], "  60000             4096") ||
		!strings.HasSuffix(lines[2], "  32768             8192") || strings.Join(lines[3:], "\n") != strings.Join(strings.Split(want, "\n")[3:], "\n") {
		t.Errorf("Table with a namespace:\n%s", got)
	}
	for _, line := range lines {
		if strings.HasSuffix(line, " ") {
			t.Errorf("trailing space in %q", line)
		}
	}
}

func TestEstimateJSON(t *testing.T) {
	want := `{"sets": [{"set": "fastcdc:min=4096,avg=16384,max=65536", "algorithm": "fastcdc", ` +
		`"parameters": {"min_size": 4096, "avg_size": 16384, "max_size": 65536, "normalization_level": 1, ` +
		`"seed": 0}, "bytes": 1048576, "chunks": 64, "unique_bytes": 983040, "unique_chunks": 60, ` +
		`"dedup_ratio": 1.066667, "ratio_interval": null, "sampled": false, "sampled_unique_chunks": 60, ` +
		`"histogram": [[4096, 4], [8192, 30], [16384, 30]], "histogram_bytes": [[4096, 20000], [8192, 400000], ` +
		`[16384, 628576]], "mean_chunk_size": 16384.0, "chunk_sizes": {"min": 4096, "p50": 16000, "p90": 30000, ` +
		`"p99": 60000, "max": 65536}, "namespace_bytes": null, "namespace_chunks": null, ` +
		`"index": [{"backend": "memory", "medium": "memory", "entries": 60, "bytes": 6000}, ` +
		`{"backend": "rocksdb", "medium": "disk", "entries": 60, "bytes": 3000}, {"backend": "redis", ` +
		`"medium": "memory", "entries": 60, "bytes": 9000}]}, {"set": "seqcdc:preset=seqcdc-16k", ` +
		`"algorithm": "seqcdc", "parameters": {"min_size": 8192, "max_size": 32768, "seq_mode": "decreasing", ` +
		`"seq_length": 5, "skip_trigger": 50, "skip_size": 512}, "bytes": 1048576, "chunks": 100, ` +
		`"unique_bytes": 699051, "unique_chunks": 1024, "dedup_ratio": 1.5, "ratio_interval": [1.2, 1.8], ` +
		`"sampled": true, "sampled_unique_chunks": 16, "histogram": [[8192, 100]], "histogram_bytes": [[8192, ` +
		`1048576]], "mean_chunk_size": 10485.76, "chunk_sizes": {"min": 8192, "p50": 9000, "p90": 12000, ` +
		`"p99": 32768, "max": 32768}, "namespace_bytes": 4096, "namespace_chunks": 1, ` +
		`"index": [{"backend": "memory", "medium": "memory", "entries": 1024, "bytes": 102400}, ` +
		`{"backend": "rocksdb", "medium": "disk", "entries": 1024, "bytes": 51200}, {"backend": "redis", ` +
		`"medium": "memory", "entries": 1024, "bytes": 153600}]}], "total_bytes": 1048576, "files": 3, ` +
		`"sample_rate": 64, "fingerprint": "sha256"}`
	r := constructedResult(false)
	held, chunks := uint64(4096), uint64(1)
	r.Sets[1].NamespaceBytes, r.Sets[1].NamespaceChunks = &held, &chunks
	if got := string(r.JSON()); got != want {
		t.Errorf("JSON:\n%s\nwant:\n%s", got, want)
	}
	var compact bytes.Buffer
	marshalled, err := json.Marshal(r)
	if err != nil || json.Compact(&compact, []byte(want)) != nil || string(marshalled) != compact.String() {
		t.Errorf("json.Marshal: %s, %v", marshalled, err)
	}
	var parsed map[string]any
	if err := json.Unmarshal(r.JSON(), &parsed); err != nil {
		t.Errorf("the JSON does not parse: %v", err)
	}
}

// TestJSONNumbersAndStrings: floats and strings as Python's json module
// writes them, floats rounded to 6 decimals.
func TestJSONNumbersAndStrings(t *testing.T) {
	for x, want := range map[float64]string{0: "0.0", 2: "2.0", 1.23456789: "1.234568", 1.0000004: "1.0",
		1234.5: "1234.5", 0.00001: "1e-05", 0.0000004: "0.0", 0.00012345: "0.000123", 3e16: "3e+16", 100: "100.0"} {
		if got := jsonFloat(x); got != want {
			t.Errorf("jsonFloat(%v) = %s; want %s", x, got, want)
		}
	}
	if got, want := jsonString("a\"b\\c\n\x01\x7fé😀"), `"a\"b\\c\n\u0001\u007f\u00e9\ud83d\ude00"`; got != want {
		t.Errorf("jsonString = %s; want %s", got, want)
	}
	empty := &EstimateResult{Files: 0, SampleRate: 1, Fingerprint: "xxh128", Sets: []SetEstimate{
		{Label: "fixed", Params: Params{Algorithm: "fixed", AvgSize: 16384}}}}
	if got := string(empty.JSON()); !strings.Contains(got, `"parameters": {"avg_size": 16384}, `) ||
		!strings.Contains(got, `"dedup_ratio": 0.0, "ratio_interval": null, `) ||
		!strings.Contains(got, `"histogram": [], "histogram_bytes": [], `) || !strings.Contains(got, `"index": []}`) {
		t.Errorf("empty data set: %s", got)
	}
}
