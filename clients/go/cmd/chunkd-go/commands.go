package main

import (
	"bufio"
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	chunkd "github.com/chunkd/chunkd/clients/go"
)

// env is what a command writes to.
type env struct {
	out    *bufio.Writer
	stderr io.Writer
}

func (o *options) dial() (*chunkd.Client, error) {
	var opts []chunkd.Option
	token := o.token
	if o.tokenFile != "" {
		if token != "" {
			return nil, usageError{"give --token or --token-file, not both"}
		}
		data, err := os.ReadFile(o.tokenFile)
		if err != nil {
			return nil, err
		}
		token = strings.TrimSpace(strings.SplitN(string(data), "\n", 2)[0])
		if token == "" {
			return nil, fmt.Errorf("the token file %s is empty", o.tokenFile)
		}
	}
	if token == "" {
		token = os.Getenv("CHUNKD_TOKEN")
	}
	if token != "" {
		opts = append(opts, chunkd.WithToken(token))
	}
	if (o.tlsCert == "") != (o.tlsKey == "") {
		return nil, usageError{"--tls-cert and --tls-key go together"}
	}
	if o.tlsCA != "" || o.tlsCert != "" || o.tlsKey != "" || o.tlsName != "" {
		opts = append(opts, chunkd.WithTLSFiles(chunkd.TLSFiles{
			CA: o.tlsCA, Cert: o.tlsCert, Key: o.tlsKey, ServerName: o.tlsName}))
	} else if o.tls {
		opts = append(opts, chunkd.WithTLS(nil))
	}
	return chunkd.Dial(o.server, opts...)
}

// input opens a FILE operand ("-": stdin) and says its size (0: unknown).
func input(name string) (*os.File, uint64, error) {
	f := os.Stdin
	if name != "-" {
		var err error
		if f, err = os.Open(name); err != nil {
			return nil, 0, err
		}
	}
	if info, err := f.Stat(); err == nil && info.Mode().IsRegular() {
		return f, uint64(info.Size()), nil
	}
	return f, 0, nil
}

func closeInput(f *os.File) {
	if f != os.Stdin {
		f.Close()
	}
}

// connect checks the chunking parameters (before any call) and dials.
func (o *options) connect() (chunkd.Params, *chunkd.Client, error) {
	p, err := o.params()
	if err != nil {
		return chunkd.Params{}, nil, err
	}
	client, err := o.dial()
	return p, client, err
}

func (o *options) asJSON() bool { return o.json || o.format == "json" }

func runChunk(ctx context.Context, o *options, args []string, e env) error {
	if len(args) != 1 {
		return usageError{"give exactly one FILE (\"-\" for stdin)"}
	}
	if err := checkReplayable(o, args); err != nil {
		return err
	}
	p, client, err := o.connect()
	if err != nil {
		return err
	}
	defer client.Close()
	f, size, err := input(args[0])
	if err != nil {
		return err
	}
	defer closeInput(f)
	bar := newProgress(o.progress, e.stderr, args[0], size)
	p.OnReplay = announcer(e, args[0], p.Retries, bar)
	it, err := client.Chunk(ctx, f, p)
	if err != nil {
		return err
	}
	defer it.Close()
	withFP, asJSON := o.fingerprint != "none", o.asJSON()
	for it.Next() {
		ch := it.Record()
		if err := writeChunk(e.out, ch, withFP, asJSON); err != nil {
			return err
		}
		bar.update(ch.Offset + uint64(ch.Length))
	}
	if err := it.Err(); err != nil {
		return err
	}
	bar.finish()
	return nil
}

func writeChunk(w *bufio.Writer, ch chunkd.Chunk, withFP, asJSON bool) error {
	var err error
	switch {
	case asJSON && withFP:
		_, err = fmt.Fprintf(w, "{\"offset\":%d,\"length\":%d,\"fingerprint\":\"%s\"}\n",
			ch.Offset, ch.Length, hex.EncodeToString(ch.Fingerprint))
	case asJSON:
		_, err = fmt.Fprintf(w, "{\"offset\":%d,\"length\":%d}\n", ch.Offset, ch.Length)
	case withFP:
		_, err = fmt.Fprintf(w, "%d,%d,%s\n", ch.Offset, ch.Length, hex.EncodeToString(ch.Fingerprint))
	default:
		_, err = fmt.Fprintf(w, "%d,%d\n", ch.Offset, ch.Length)
	}
	return err
}

// dedupLine is a line of dedup --json: a file's (File set) or the total
// (Total true); Ratio is the running ratio, nil while no byte is unique.
type dedupLine struct {
	File             *string  `json:"file,omitempty"`
	Total            bool     `json:"total,omitempty"`
	Bytes            uint64   `json:"bytes"`
	UniqueBytes      uint64   `json:"unique_bytes"`
	Chunks           uint64   `json:"chunks"`
	UniqueChunks     uint64   `json:"unique_chunks"`
	Ratio            *float64 `json:"ratio"`
	HintsTried       uint64   `json:"hints_tried"`
	HintsAccepted    uint64   `json:"hints_accepted"`
	HintsRejected    uint64   `json:"hints_rejected"`
	HintSkippedBytes uint64   `json:"hint_skipped_bytes"`
}

func add(total *chunkd.DedupSummary, s chunkd.DedupSummary) {
	total.TotalBytes += s.TotalBytes
	total.UniqueBytes += s.UniqueBytes
	total.TotalChunks += s.TotalChunks
	total.UniqueChunks += s.UniqueChunks
	total.HintsTried += s.HintsTried
	total.HintsAccepted += s.HintsAccepted
	total.HintsRejected += s.HintsRejected
	total.HintSkippedBytes += s.HintSkippedBytes
}

// writeDedup writes the line of file name ("": the total) with summary s;
// running is the total so far, for the ratio.
func writeDedup(w *bufio.Writer, name string, s, running chunkd.DedupSummary, asJSON bool) error {
	if asJSON {
		line := dedupLine{Total: name == "", Bytes: s.TotalBytes, UniqueBytes: s.UniqueBytes,
			Chunks: s.TotalChunks, UniqueChunks: s.UniqueChunks, HintsTried: s.HintsTried,
			HintsAccepted: s.HintsAccepted, HintsRejected: s.HintsRejected, HintSkippedBytes: s.HintSkippedBytes}
		if name != "" {
			line.File = &name
		}
		if running.UniqueBytes > 0 {
			// Rounded to 6 decimals as the other clients do (Python's round).
			r, _ := strconv.ParseFloat(strconv.FormatFloat(
				float64(running.TotalBytes)/float64(running.UniqueBytes), 'f', 6, 64), 64)
			line.Ratio = &r
		}
		text, err := json.Marshal(line)
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(w, "%s\n", text)
		return err
	}
	if name == "" {
		name = "total"
	}
	ratio := "inf"
	if running.UniqueBytes > 0 {
		ratio = fmt.Sprintf("%.2f", float64(running.TotalBytes)/float64(running.UniqueBytes))
	}
	fmt.Fprintf(w, "%s bytes=%d unique_bytes=%d chunks=%d unique_chunks=%d ratio=%s",
		name, s.TotalBytes, s.UniqueBytes, s.TotalChunks, s.UniqueChunks, ratio)
	if s.HintsTried > 0 {
		fmt.Fprintf(w, " hints_tried=%d hints_accepted=%d hints_rejected=%d hint_skipped_bytes=%d",
			s.HintsTried, s.HintsAccepted, s.HintsRejected, s.HintSkippedBytes)
	}
	_, err := w.WriteString("\n")
	return err
}

func checkDedupArgs(o *options, args []string) error {
	switch {
	case !o.given["namespace"] || o.namespace == "":
		return usageError{"missing --namespace NS"}
	case checkNamespace(o.namespace) != nil:
		return checkNamespace(o.namespace)
	case len(args) == 0:
		return usageError{"missing FILE (\"-\" for stdin)"}
	case countStdin(args) > 1:
		return usageError{"stdin (\"-\") can be read only once"}
	case o.fingerprint == "none":
		return usageError{"--fingerprint none: dedup needs a fingerprint (sha256 or xxh128)"}
	}
	return checkReplayable(o, args)
}

// checkReplayable checks --retries: 0..100, and with replays only regular
// files, which can be read again from their start (stdin or another pipe, a
// FIFO, /dev/stdin or <(zcat x), would give the bytes not yet read).
func checkReplayable(o *options, names []string) error {
	if o.retries < 0 || o.retries > chunkd.MaxRetries {
		return usageError{fmt.Sprintf("--retries: expected an integer in 0..%d", chunkd.MaxRetries)}
	}
	if o.retries == 0 {
		return nil
	}
	for _, name := range names {
		if name == "-" {
			return usageError{"--retries cannot replay stdin (\"-\"): give a file"}
		}
		info, err := os.Stat(name)
		if err != nil {
			return err
		}
		if !info.Mode().IsRegular() {
			return usageError{fmt.Sprintf("--retries: %s is not a regular file, so it cannot be sent again "+
				"from its start; give a file or --retries 0", name)}
		}
	}
	return nil
}

// announcer is the Params.OnReplay of a file's stream: one line on stderr
// per replay, as chunkctl and chunkd-client print it (docs/cli.md).
func announcer(e env, name string, retries int, bar *progress) func(error, time.Duration) {
	replays := 0
	return func(err error, wait time.Duration) {
		replays++
		bar.clear()
		fmt.Fprintf(e.stderr, "chunkd-go: %s: %s; sending it again in %.2f s (retry %d of %d)\n",
			name, errorText(err), wait.Seconds(), replays, retries)
	}
}

func runDedup(ctx context.Context, o *options, args []string, e env) error {
	if err := checkDedupArgs(o, args); err != nil {
		return err
	}
	p, client, err := o.connect()
	if err != nil {
		return err
	}
	defer client.Close()
	var total chunkd.DedupSummary
	for _, name := range args {
		s, err := dedupFile(ctx, client, o, p, name, e)
		if err != nil {
			return err
		}
		add(&total, s)
		if err := writeDedup(e.out, name, s, total, o.asJSON()); err != nil {
			return err
		}
		if err := e.out.Flush(); err != nil {
			return err
		}
	}
	return writeDedup(e.out, "", total, total, o.asJSON())
}

// dedupFile streams one file; every file has its own random stream id with
// --retries.
func dedupFile(ctx context.Context, client *chunkd.Client, o *options, p chunkd.Params, name string, e env) (chunkd.DedupSummary, error) {
	f, size, err := input(name)
	if err != nil {
		return chunkd.DedupSummary{}, err
	}
	defer closeInput(f)
	var r io.Reader = f
	if name == "-" {
		r = struct{ io.Reader }{f} // not replayable; Dedup must not try to seek a pipe
	}
	bar := newProgress(o.progress, e.stderr, name, size)
	p.OnReplay = announcer(e, name, p.Retries, bar)
	it, err := client.Dedup(ctx, o.namespace, r, p)
	if err != nil {
		return chunkd.DedupSummary{}, err
	}
	defer it.Close()
	for it.Next() {
		ch := it.Record()
		bar.update(ch.Offset + uint64(ch.Length))
	}
	if err := it.Err(); err != nil {
		return chunkd.DedupSummary{}, err
	}
	bar.finish()
	return it.Summary(), nil
}

func runInfo(ctx context.Context, o *options, args []string, e env) error {
	if len(args) != 0 {
		return usageError{fmt.Sprintf("unexpected argument %q", args[0])}
	}
	client, err := o.dial()
	if err != nil {
		return err
	}
	defer client.Close()
	if o.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, o.timeout)
		defer cancel()
	}
	info, err := client.ServerInfo(ctx)
	if err != nil {
		return err
	}
	if o.asJSON() {
		text, err := json.MarshalIndent(info, "", "  ")
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(e.out, "%s\n", text)
		return err
	}
	_, err = e.out.WriteString(infoText(info))
	return err
}

// infoText is the readable form of info (not a contract).
func infoText(info *chunkd.ServerInfo) string {
	var b strings.Builder
	fmt.Fprintf(&b, "version: %s\nchunking backend: %s\nindex backend: %s\n", info.Version, info.ChunkingBackend, info.IndexBackend)
	fmt.Fprintf(&b, "max message bytes: %d\nmax in-flight bytes: %d\n", info.MaxMessageBytes, info.MaxInflightBytes)
	fmt.Fprintf(&b, "fingerprints: %s\nalgorithms:\n", strings.Join(info.Fingerprints, ", "))
	for _, a := range info.Algorithms {
		var ranges []string
		for _, r := range []struct {
			name string
			r    *chunkd.Range
		}{{"min", &a.MinSize}, {"avg", &a.AvgSize}, {"max", &a.MaxSize}, {"level", a.NormalizationLevel}, {"horizon", a.HorizonSize}} {
			if r.r != nil && r.r.Max != 0 {
				ranges = append(ranges, fmt.Sprintf("%s %d..%d (default %d)", r.name, r.r.Min, r.r.Max, r.r.Default))
			}
		}
		line := strings.Join(ranges, ", ")
		if a.AvgSizePowerOfTwo {
			line += ", avg a power of two"
		}
		if r := a.Polynomial; r != nil {
			line += fmt.Sprintf(", polynomial %#x..%#x (default %#x), irreducible", r.Min, r.Max, r.Default)
		}
		if a.Backend != "" {
			threads := "threads"
			if a.BackendThreads == 1 {
				threads = "thread"
			}
			line += fmt.Sprintf("; backend %s (%d %s)", a.Backend, a.BackendThreads, threads)
		}
		fmt.Fprintf(&b, "  %s: %s\n", a.Name, line)
	}
	return b.String()
}
