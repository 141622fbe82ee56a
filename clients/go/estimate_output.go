// The text table and the JSON object of an EstimateResult, as the
// command-line clients print them (docs/estimate.md).

package chunkd

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Table is the text the command-line clients print for r: a table of the
// sets' sizes and ratios, a table of their index costs and a line of
// totals (docs/estimate.md), each line ending in "\n".
func (r *EstimateResult) Table() string {
	withNamespace := false
	for _, s := range r.Sets {
		withNamespace = withNamespace || s.NamespaceBytes != nil
	}
	sizes := [][]string{{"set", "bytes", "chunks", "unique_chunks", "unique_bytes", "dedup_ratio", "ratio_interval",
		"mean_size", "p50", "p90", "p99"}}
	costs := [][]string{{"set", "index_entries", "memory_bytes", "rocksdb_disk_bytes", "redis_memory_bytes"}}
	if withNamespace {
		sizes[0] = append(sizes[0], "namespace_bytes")
	}
	u := func(v uint64) string { return strconv.FormatUint(v, 10) }
	for _, s := range r.Sets {
		interval := "-"
		if low, high, ok := s.Interval(); ok {
			interval = fmt.Sprintf("%.3f-%.3f", low, high)
		}
		row := []string{s.Label, u(s.Bytes), u(s.Chunks), u(s.UniqueChunks), u(s.UniqueBytes),
			fmt.Sprintf("%.3f", s.DedupRatio), interval, fmt.Sprintf("%.0f", s.MeanChunkSize),
			u(uint64(s.P50ChunkSize)), u(uint64(s.P90ChunkSize)), u(uint64(s.P99ChunkSize))}
		if withNamespace {
			row = append(row, "-")
			if s.NamespaceBytes != nil {
				row[len(row)-1] = u(*s.NamespaceBytes)
			}
		}
		sizes = append(sizes, row)
		row = []string{s.Label, u(s.UniqueChunks)}
		for _, backend := range []string{"memory", "rocksdb", "redis"} {
			cell := "-"
			for _, c := range s.IndexCosts {
				if c.Backend == backend {
					cell = u(c.Bytes)
				}
			}
			row = append(row, cell)
		}
		costs = append(costs, row)
	}
	return table(sizes) + "\n" + table(costs) + "\n" +
		fmt.Sprintf("%d bytes in %d files; sample 1 in %d; fingerprint %s\n",
			r.TotalBytes, r.Files, max(r.SampleRate, 1), r.Fingerprint)
}

// table lays rows out: columns two spaces apart, each as wide as its widest
// cell, the first left-aligned and the others right-aligned.
func table(rows [][]string) string {
	var widths []int
	for _, row := range rows {
		for i, cell := range row {
			if i == len(widths) {
				widths = append(widths, 0)
			}
			widths[i] = max(widths[i], utf8.RuneCountInString(cell))
		}
	}
	var b strings.Builder
	for _, row := range rows {
		for i, cell := range row {
			pad := strings.Repeat(" ", widths[i]-utf8.RuneCountInString(cell))
			if i == 0 {
				b.WriteString(cell + pad)
			} else {
				b.WriteString("  " + pad + cell)
			}
		}
		b.WriteString("\n")
	}
	return b.String()
}

// JSON is the object the command-line clients print for r with --json
// (docs/estimate.md), on one line without its newline: keys in a fixed
// order, spaced and floats rounded to 6 decimals as Python's json.dumps
// writes them (", ", ": ", 2.0, 1.234567), so that every client prints the
// same bytes.
func (r *EstimateResult) JSON() []byte {
	sets := make([]string, len(r.Sets))
	for i := range r.Sets {
		sets[i] = r.Sets[i].json()
	}
	return []byte(jsonObject("sets", jsonList(sets), "total_bytes", jsonUint(r.TotalBytes), "files", jsonUint(r.Files),
		"sample_rate", jsonUint(uint64(max(r.SampleRate, 1))), "fingerprint", jsonString(r.Fingerprint)))
}

// MarshalJSON makes encoding/json give r's JSON (which it re-spaces).
func (r *EstimateResult) MarshalJSON() ([]byte, error) { return r.JSON(), nil }

func (s *SetEstimate) json() string {
	names, values := s.Params.parameters()
	parameters := make([]string, 0, 2*len(names))
	for i, name := range names {
		value := fmt.Sprint(values[i])
		if text, ok := values[i].(string); ok {
			value = jsonString(text)
		}
		parameters = append(parameters, name, value)
	}
	interval := "null"
	if low, high, ok := s.Interval(); ok {
		interval = jsonList([]string{jsonFloat(low), jsonFloat(high)})
	}
	var chunks, bytes, index []string
	for _, b := range s.Histogram {
		chunks = append(chunks, jsonList([]string{jsonUint(b.LowerBound), jsonUint(b.Chunks)}))
		bytes = append(bytes, jsonList([]string{jsonUint(b.LowerBound), jsonUint(b.Bytes)}))
	}
	for _, c := range s.IndexCosts {
		index = append(index, jsonObject("backend", jsonString(c.Backend), "medium", jsonString(c.Medium),
			"entries", jsonUint(c.Entries), "bytes", jsonUint(c.Bytes)))
	}
	sizes := jsonObject("min", jsonUint(uint64(s.MinChunkSize)), "p50", jsonUint(uint64(s.P50ChunkSize)),
		"p90", jsonUint(uint64(s.P90ChunkSize)), "p99", jsonUint(uint64(s.P99ChunkSize)),
		"max", jsonUint(uint64(s.MaxChunkSize)))
	return jsonObject("set", jsonString(s.Label), "algorithm", jsonString(s.Params.Algorithm),
		"parameters", jsonObject(parameters...), "bytes", jsonUint(s.Bytes), "chunks", jsonUint(s.Chunks),
		"unique_bytes", jsonUint(s.UniqueBytes), "unique_chunks", jsonUint(s.UniqueChunks),
		"dedup_ratio", jsonFloat(s.DedupRatio), "ratio_interval", interval, "sampled", strconv.FormatBool(s.Sampled),
		"sampled_unique_chunks", jsonUint(s.SampledUniqueChunks), "histogram", jsonList(chunks),
		"histogram_bytes", jsonList(bytes), "mean_chunk_size", jsonFloat(s.MeanChunkSize), "chunk_sizes", sizes,
		"namespace_bytes", jsonOptional(s.NamespaceBytes), "namespace_chunks", jsonOptional(s.NamespaceChunks),
		"index", jsonList(index))
}

// jsonObject is {"key": value, ...} of keys and their JSON values in turn.
func jsonObject(keysAndValues ...string) string {
	pairs := make([]string, 0, len(keysAndValues)/2)
	for i := 0; i+1 < len(keysAndValues); i += 2 {
		pairs = append(pairs, jsonString(keysAndValues[i])+": "+keysAndValues[i+1])
	}
	return "{" + strings.Join(pairs, ", ") + "}"
}

// jsonList is [item, ...] of JSON values.
func jsonList(items []string) string { return "[" + strings.Join(items, ", ") + "]" }

func jsonUint(v uint64) string { return strconv.FormatUint(v, 10) }

func jsonOptional(v *uint64) string {
	if v == nil {
		return "null"
	}
	return jsonUint(*v)
}

// jsonFloat is x rounded to 6 decimals as Python's json module writes a
// float: the shortest text that reads back the same, with ".0" when it is
// whole, and an exponent below 1e-4 or from 1e16.
func jsonFloat(x float64) string {
	x, _ = strconv.ParseFloat(strconv.FormatFloat(x, 'f', 6, 64), 64)
	switch {
	case math.IsInf(x, 0) || math.IsNaN(x):
		return "null" // not JSON; never in a result
	case x != 0 && (math.Abs(x) < 1e-4 || math.Abs(x) >= 1e16):
		return strconv.FormatFloat(x, 'e', -1, 64)
	}
	text := strconv.FormatFloat(x, 'f', -1, 64)
	if !strings.Contains(text, ".") {
		text += ".0"
	}
	return text
}

// jsonString is text as a JSON string as Python's json module writes it:
// every character outside printable ASCII escaped.
func jsonString(text string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range text {
		switch {
		case r == '"' || r == '\\':
			b.WriteString(`\` + string(r))
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\t':
			b.WriteString(`\t`)
		case r == '\b':
			b.WriteString(`\b`)
		case r == '\f':
			b.WriteString(`\f`)
		case r < 0x20 || (r >= 0x7f && r < 0x10000):
			fmt.Fprintf(&b, `\u%04x`, r)
		case r >= 0x10000:
			r -= 0x10000
			fmt.Fprintf(&b, `\u%04x\u%04x`, 0xd800+(r>>10), 0xdc00+(r&0x3ff))
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String()
}
