// Command chunkd-go is the example command of the Go client: it chunks or
// deduplicates files on a chunkd server and describes the server.
//
//	chunkd-go chunk [flags] FILE|-        one line per chunk, as chunkctl prints
//	chunkd-go dedup -namespace NS [-hints NAME] [flags] FILE...
//	chunkd-go info [flags]
//
// dedup prints one line per file and a total line; when RapidCDC hints were
// tried the line ends with hints_tried, hints_accepted, hints_rejected and
// hint_skipped_bytes. -hints is off, ff, ff_mt, ff_rwt or ff_rwt_fpt (unset:
// the server's default, ff_rwt_fpt for fastcdc).
//
// The chunking flags are those of the -algorithm: fastcdc takes -min, -avg,
// -max, -level and -seed; crc32 -min, -avg and -max; seqcdc -min, -max,
// -seq-mode, -seq-length, -skip-trigger and -skip-size; fixed -avg;
// repmaxcdc -min and -horizon; rabin -min, -avg, -max and -polynomial
// (0x... or decimal); buzhash -min, -avg and -max. Another
// chunking flag, even with its default value, is a usage error; a flag left
// out is not sent, so the server uses the algorithm's default.
//
// Exit status: 0 on success, 1 when a call or a file failed, 2 on a usage
// error. A failed call prints "chunkd-go: CODE: message" with the gRPC code
// and the server's message, e.g. "chunkd-go: RESOURCE_EXHAUSTED: ...". A
// stream the server ended OK but whose summary does not count the bytes sent
// (or that has no summary) failed too: "chunkd-go: DATA_LOSS: server summary
// reports total_bytes=N but M bytes were sent"; chunk may have printed lines
// before it.
package main

import (
	"bufio"
	"context"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"

	chunkd "github.com/chunkd/chunkd/clients/go"
)

type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

type common struct {
	server, token, tokenFile         string
	tls                              bool
	tlsCA, tlsCert, tlsKey, tlsName  string
	timeout                          time.Duration
	algorithm, fingerprint, seqMode  string
	min, avg, max, level             int
	seed                             uint64
	seqLength, skipTrigger, skipSize uint
	horizon                          *uint32
	polynomial                       uint64
	messageSize                      int
	format, namespace, hints         string
	given                            map[string]bool // flags on the command line
}

func (c *common) connectionFlags(fs *flag.FlagSet) {
	server := os.Getenv("CHUNKD_SERVER")
	if server == "" {
		server = "127.0.0.1:50051"
	}
	fs.StringVar(&c.server, "server", server, "chunkd address host:port ($CHUNKD_SERVER)")
	fs.BoolVar(&c.tls, "tls", false, "use TLS with the system's roots")
	fs.StringVar(&c.tlsCA, "tls-ca", "", "PEM file of the server's CA (implies -tls)")
	fs.StringVar(&c.tlsCert, "tls-cert", "", "client certificate PEM for mutual TLS")
	fs.StringVar(&c.tlsKey, "tls-key", "", "the client certificate's key PEM")
	fs.StringVar(&c.tlsName, "tls-server-name", "", "name to verify in the server's certificate")
	fs.StringVar(&c.token, "token", "", "bearer token (default $CHUNKD_TOKEN)")
	fs.StringVar(&c.tokenFile, "token-file", "", "file holding the bearer token")
	fs.DurationVar(&c.timeout, "timeout", 0, "deadline of the whole command (0: none)")
}

// chunkingFlags are the flags of the ChunkingParams fields, and algorithmFlags
// those each algorithm takes (the server refuses any other field, so a flag
// of another algorithm is a usage error).
var (
	chunkingFlags  = []string{"min", "avg", "max", "level", "seed", "seq-mode", "seq-length", "skip-trigger", "skip-size", "horizon", "polynomial"}
	algorithmFlags = map[string][]string{
		"fastcdc":   {"min", "avg", "max", "level", "seed"},
		"crc32":     {"min", "avg", "max"},
		"seqcdc":    {"min", "max", "seq-mode", "seq-length", "skip-trigger", "skip-size"},
		"fixed":     {"avg"},
		"repmaxcdc": {"min", "horizon"},
		"rabin":     {"min", "avg", "max", "polynomial"},
		"buzhash":   {"min", "avg", "max"},
	}
)

func (c *common) chunkFlags(fs *flag.FlagSet) {
	fs.StringVar(&c.algorithm, "algorithm", "fastcdc", "fastcdc, crc32, seqcdc, fixed, repmaxcdc, rabin or buzhash")
	fs.IntVar(&c.min, "min", 0, "minimum chunk size (0: default; not fixed)")
	fs.IntVar(&c.avg, "avg", 0, "average chunk size (0: default; not seqcdc)")
	fs.IntVar(&c.max, "max", 0, "maximum chunk size (0: default; not fixed)")
	fs.IntVar(&c.level, "level", -1, "fastcdc normalization level 0..3 (-1: default)")
	fs.Uint64Var(&c.seed, "seed", 0, "fastcdc Gear table seed")
	fs.StringVar(&c.seqMode, "seq-mode", "", "seqcdc: increasing or decreasing")
	fs.UintVar(&c.seqLength, "seq-length", 0, "seqcdc sequence length (0: default)")
	fs.UintVar(&c.skipTrigger, "skip-trigger", 0, "seqcdc skip trigger (0: default)")
	fs.UintVar(&c.skipSize, "skip-size", 0, "seqcdc skip size (0: default)")
	fs.Func("horizon", "repmaxcdc: bytes past -min searched for the best cut (default 2097152)", func(text string) error {
		v, err := strconv.ParseUint(text, 0, 32)
		if err != nil {
			return err
		}
		c.horizon = chunkd.Horizon(uint32(v))
		return nil
	})
	fs.Func("polynomial", "rabin: irreducible polynomial of degree 53, 0x... or decimal (default 0x3DA3358B4DC173)", func(text string) error {
		v, err := strconv.ParseUint(text, 0, 64)
		c.polynomial = v
		return err
	})
	fs.StringVar(&c.fingerprint, "fingerprint", "sha256", "sha256, xxh128 or none")
	fs.IntVar(&c.messageSize, "message-size", chunkd.DefaultMessageSize, "bytes per data message")
}

// unusedFlag is a usage error for the first flag given that the algorithm
// does not take; nil for an unknown algorithm (the client names it).
func (c *common) unusedFlag() error {
	algorithm := c.algorithm
	if algorithm == "" {
		algorithm = "fastcdc"
	}
	takes, known := algorithmFlags[algorithm]
	if !known {
		return nil
	}
	for _, name := range chunkingFlags {
		if c.given[name] && !slices.Contains(takes, name) {
			return usageError{fmt.Sprintf("-%s is not a parameter of %s (it takes -%s); leave -%s out",
				name, algorithm, strings.Join(takes, ", -"), name)}
		}
	}
	return nil
}

func (c *common) params() (chunkd.Params, error) {
	if err := c.unusedFlag(); err != nil {
		return chunkd.Params{}, err
	}
	p := chunkd.Params{
		Algorithm: c.algorithm, Seed: c.seed, SeqMode: c.seqMode,
		SeqLength: uint32(c.seqLength), SkipTrigger: uint32(c.skipTrigger),
		SkipSize: uint32(c.skipSize), HorizonSize: c.horizon, Polynomial: c.polynomial, Fingerprint: c.fingerprint, MessageSize: c.messageSize,
		Hints: c.hints,
	}
	for _, v := range []struct {
		name string
		val  int
		dst  *uint32
	}{{"min", c.min, &p.MinSize}, {"avg", c.avg, &p.AvgSize}, {"max", c.max, &p.MaxSize}} {
		if v.val < 0 || v.val > 1<<31 {
			return p, usageError{fmt.Sprintf("-%s: out of range: %d", v.name, v.val)}
		}
		*v.dst = uint32(v.val)
	}
	if c.level >= 0 {
		p.NormalizationLevel = chunkd.Level(uint32(c.level))
	}
	if c.messageSize < 1 {
		return p, usageError{"-message-size must be at least 1"}
	}
	return p, nil
}

func (c *common) dial() (*chunkd.Client, error) {
	var opts []chunkd.Option
	token := c.token
	if c.tokenFile != "" {
		if token != "" {
			return nil, usageError{"give -token or -token-file, not both"}
		}
		data, err := os.ReadFile(c.tokenFile)
		if err != nil {
			return nil, err
		}
		token = strings.TrimSpace(strings.SplitN(string(data), "\n", 2)[0])
		if token == "" {
			return nil, fmt.Errorf("the token file %s is empty", c.tokenFile)
		}
	}
	if token == "" {
		token = os.Getenv("CHUNKD_TOKEN")
	}
	if token != "" {
		opts = append(opts, chunkd.WithToken(token))
	}
	if c.tlsCA != "" || c.tlsCert != "" || c.tlsKey != "" || c.tlsName != "" {
		opts = append(opts, chunkd.WithTLSFiles(chunkd.TLSFiles{
			CA: c.tlsCA, Cert: c.tlsCert, Key: c.tlsKey, ServerName: c.tlsName}))
	} else if c.tls {
		opts = append(opts, chunkd.WithTLS(nil))
	}
	return chunkd.Dial(c.server, opts...)
}

func open(name string) (io.ReadCloser, error) {
	if name == "-" {
		return io.NopCloser(os.Stdin), nil
	}
	return os.Open(name)
}

func runChunk(ctx context.Context, c *common, args []string, out *bufio.Writer) error {
	if len(args) != 1 {
		return usageError{"give exactly one FILE (\"-\" for stdin)"}
	}
	if c.format != "csv" && c.format != "json" {
		return usageError{fmt.Sprintf("-format: expected csv or json, got %q", c.format)}
	}
	p, err := c.params()
	if err != nil {
		return err
	}
	client, err := c.dial()
	if err != nil {
		return err
	}
	defer client.Close()
	f, err := open(args[0])
	if err != nil {
		return err
	}
	defer f.Close()
	it, err := client.Chunk(ctx, f, p)
	if err != nil {
		return err
	}
	defer it.Close()
	withFP := c.fingerprint != "none"
	for it.Next() {
		ch := it.Record()
		switch {
		case c.format == "json" && withFP:
			fmt.Fprintf(out, "{\"offset\":%d,\"length\":%d,\"fingerprint\":\"%s\"}\n",
				ch.Offset, ch.Length, hex.EncodeToString(ch.Fingerprint))
		case c.format == "json":
			fmt.Fprintf(out, "{\"offset\":%d,\"length\":%d}\n", ch.Offset, ch.Length)
		case withFP:
			fmt.Fprintf(out, "%d,%d,%s\n", ch.Offset, ch.Length, hex.EncodeToString(ch.Fingerprint))
		default:
			fmt.Fprintf(out, "%d,%d\n", ch.Offset, ch.Length)
		}
	}
	return it.Err()
}

func ratio(total, unique uint64) string {
	if unique == 0 {
		return "inf"
	}
	return fmt.Sprintf("%.2f", float64(total)/float64(unique))
}

func runDedup(ctx context.Context, c *common, args []string, out *bufio.Writer) error {
	if c.namespace == "" {
		return usageError{"missing -namespace NS"}
	}
	if len(args) == 0 {
		return usageError{"missing FILE (\"-\" for stdin)"}
	}
	p, err := c.params()
	if err != nil {
		return err
	}
	client, err := c.dial()
	if err != nil {
		return err
	}
	defer client.Close()
	var total chunkd.DedupSummary
	line := func(name string, s chunkd.DedupSummary) {
		fmt.Fprintf(out, "%s bytes=%d unique_bytes=%d chunks=%d unique_chunks=%d ratio=%s",
			name, s.TotalBytes, s.UniqueBytes, s.TotalChunks, s.UniqueChunks,
			ratio(total.TotalBytes, total.UniqueBytes))
		if s.HintsTried > 0 {
			fmt.Fprintf(out, " hints_tried=%d hints_accepted=%d hints_rejected=%d hint_skipped_bytes=%d",
				s.HintsTried, s.HintsAccepted, s.HintsRejected, s.HintSkippedBytes)
		}
		out.WriteString("\n")
	}
	for _, name := range args {
		f, err := open(name)
		if err != nil {
			return err
		}
		it, err := client.Dedup(ctx, c.namespace, f, p)
		if err != nil {
			f.Close()
			return err
		}
		_, s, err := it.Collect()
		f.Close()
		if err != nil {
			return err
		}
		total.TotalBytes += s.TotalBytes
		total.UniqueBytes += s.UniqueBytes
		total.TotalChunks += s.TotalChunks
		total.UniqueChunks += s.UniqueChunks
		total.HintsTried += s.HintsTried
		total.HintsAccepted += s.HintsAccepted
		total.HintsRejected += s.HintsRejected
		total.HintSkippedBytes += s.HintSkippedBytes
		line(name, s)
	}
	line("total", total)
	return nil
}

func runInfo(ctx context.Context, c *common, args []string, out *bufio.Writer) error {
	if len(args) != 0 {
		return usageError{fmt.Sprintf("unexpected argument %q", args[0])}
	}
	client, err := c.dial()
	if err != nil {
		return err
	}
	defer client.Close()
	info, err := client.ServerInfo(ctx)
	if err != nil {
		return err
	}
	text, err := protojson.MarshalOptions{Multiline: true}.Marshal(info)
	if err != nil {
		return err
	}
	out.Write(text)
	out.WriteString("\n")
	return nil
}

const usage = `Usage: chunkd-go COMMAND [flags] [ARGS]

Commands:
  chunk [flags] FILE|-          print one line per chunk (csv or -format json)
  dedup -namespace NS [-hints NAME] [flags] FILE...
                                deduplicate files; one summary line per file
  info [flags]                  the server's GetServerInfo as JSON

Run 'chunkd-go COMMAND -h' for the flags of a command.
`

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		fmt.Fprint(stderr, usage)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	var c common
	fs := flag.NewFlagSet("chunkd-go "+args[0], flag.ContinueOnError)
	fs.SetOutput(stderr)
	c.connectionFlags(fs)
	var cmd func(context.Context, *common, []string, *bufio.Writer) error
	switch args[0] {
	case "chunk":
		c.chunkFlags(fs)
		fs.StringVar(&c.format, "format", "csv", "csv or json")
		cmd = runChunk
	case "dedup":
		c.chunkFlags(fs)
		fs.StringVar(&c.namespace, "namespace", "", "the tenant's index (required)")
		fs.StringVar(&c.hints, "hints", "", "RapidCDC hint test: off, ff, ff_mt, ff_rwt or ff_rwt_fpt (default: the server's, ff_rwt_fpt for fastcdc)")
		cmd = runDedup
	case "info":
		cmd = runInfo
	default:
		fmt.Fprintf(stderr, "chunkd-go: unknown command %q\n%s", args[0], usage)
		return 2
	}
	if err := fs.Parse(args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	c.given = map[string]bool{}
	fs.Visit(func(f *flag.Flag) { c.given[f.Name] = true })
	ctx := context.Background()
	if c.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.timeout)
		defer cancel()
	}
	out := bufio.NewWriterSize(stdout, 1<<16)
	err := cmd(ctx, &c, fs.Args(), out)
	if flushErr := out.Flush(); err == nil && flushErr != nil {
		err = flushErr
	}
	var usageErr usageError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &usageErr):
		fmt.Fprintf(stderr, "chunkd-go: %s\n", usageErr.msg)
		return 2
	default:
		if s, ok := status.FromError(err); ok {
			fmt.Fprintf(stderr, "chunkd-go: %s: %s\n", codeName(s.Code()), s.Message())
		} else {
			fmt.Fprintf(stderr, "chunkd-go: %v\n", err)
		}
		return 1
	}
}

// codeName spells a gRPC code as the other clients do: "INVALID_ARGUMENT".
func codeName(code codes.Code) string {
	var b strings.Builder
	prev := rune(0)
	for _, r := range code.String() {
		if unicode.IsUpper(r) && unicode.IsLower(prev) {
			b.WriteByte('_')
		}
		b.WriteRune(unicode.ToUpper(r))
		prev = r
	}
	return b.String()
}

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}
