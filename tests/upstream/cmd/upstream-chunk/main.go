// Command upstream-chunk cuts a file with the upstream Go implementation of
// one of the algorithms chunkd reimplements byte for byte, so that tests and
// benchmarks can hold chunkd to it:
//
//	repmaxcdc  github.com/buildbarn/go-cdc NewRepMaxContentDefinedChunker
//	           with FastContentDefinedChunkerGearTable
//	rabin      github.com/restic/chunker NewWithBoundaries + SetAverageBits
//	buzhash    github.com/folbricht/desync NewChunker
//
// (versions pinned in go.mod). Usage:
//
//	upstream-chunk -algorithm A [-min N] [-avg N] [-max N] [-horizon N]
//	    [-polynomial 0xHEX|DEC] FILE|-
//	upstream-chunk -algorithm A [...] -bench [-repeat N] FILE
//
// The first form prints one "offset,length" line per chunk, the output of
// `chunkctl chunk --fingerprint none`. The second reads FILE into memory,
// chunks it N times from memory and prints one JSON line with the fastest
// run: {"algorithm","bytes","chunks","best_seconds","gb_per_s"}.
//
// Unset parameters take chunkd's defaults for the algorithm; a parameter the
// algorithm does not read is a usage error, as it is for chunkctl.
package main

import (
	"bufio"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
)

// params are one algorithm's chunking parameters, in chunkd's terms.
type params struct {
	algorithm  string
	min        int
	avg        int
	max        int
	horizon    int
	polynomial uint64
}

// config is a parsed command line.
type config struct {
	params params
	bench  bool
	repeat int
	path   string
}

// defaultParams are chunkd's defaults (server/chunking/limits.h).
var defaultParams = map[string]params{
	"repmaxcdc": {algorithm: "repmaxcdc", min: 256 << 10, horizon: 2 << 20},
	"rabin": {algorithm: "rabin", min: 512 << 10, avg: 1 << 20, max: 8 << 20,
		polynomial: 0x3DA3358B4DC173},
	"buzhash": {algorithm: "buzhash", min: 16 << 10, avg: 64 << 10, max: 256 << 10},
}

// parameterFlags are the flags each algorithm reads.
var parameterFlags = map[string][]string{
	"repmaxcdc": {"min", "horizon"},
	"rabin":     {"min", "avg", "max", "polynomial"},
	"buzhash":   {"min", "avg", "max"},
}

// errUsage marks errors that are the caller's mistake (exit status 2).
var errUsage = errors.New("usage")

func usageError(format string, args ...any) error {
	return fmt.Errorf("%w: %s", errUsage, fmt.Sprintf(format, args...))
}

// parsePolynomial reads "0x..." as hexadecimal and anything else as decimal
// (not octal: a leading zero means nothing, as in chunkctl).
func parsePolynomial(text string) (uint64, error) {
	lower := strings.ToLower(text)
	if strings.HasPrefix(lower, "0x") {
		return strconv.ParseUint(lower[2:], 16, 64)
	}
	return strconv.ParseUint(text, 10, 64)
}

func parseArgs(args []string) (config, error) {
	fs := flag.NewFlagSet("upstream-chunk", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	algorithm := fs.String("algorithm", "", "repmaxcdc, rabin or buzhash")
	sizes := map[string]*int{
		"min":     fs.Int("min", 0, "smallest chunk but the last, bytes"),
		"avg":     fs.Int("avg", 0, "average chunk size, bytes"),
		"max":     fs.Int("max", 0, "largest chunk, bytes"),
		"horizon": fs.Int("horizon", 0, "repmaxcdc: look-ahead past min, bytes"),
	}
	polynomial := fs.String("polynomial", "", "rabin: 0xHEX or DEC")
	bench := fs.Bool("bench", false, "time chunking FILE from memory")
	repeat := fs.Int("repeat", 3, "with -bench: runs, the fastest counts")
	if err := fs.Parse(args); err != nil {
		return config{}, usageError("%v", err)
	}
	p, ok := defaultParams[*algorithm]
	if !ok {
		return config{}, usageError("-algorithm: expected repmaxcdc, rabin or buzhash, got %q", *algorithm)
	}
	allowed := map[string]bool{}
	for _, name := range parameterFlags[p.algorithm] {
		allowed[name] = true
	}
	var err error
	fs.Visit(func(f *flag.Flag) {
		isParameter := sizes[f.Name] != nil || f.Name == "polynomial"
		if isParameter && !allowed[f.Name] && err == nil {
			err = usageError("-%s does not apply to %s", f.Name, p.algorithm)
		}
	})
	if err != nil {
		return config{}, err
	}
	set := map[string]*int{"min": &p.min, "avg": &p.avg, "max": &p.max, "horizon": &p.horizon}
	fs.Visit(func(f *flag.Flag) {
		if target, isSize := set[f.Name]; isSize {
			*target = *sizes[f.Name]
		}
	})
	if *polynomial != "" {
		if p.polynomial, err = parsePolynomial(*polynomial); err != nil {
			return config{}, usageError("-polynomial: expected 0xHEX or DEC, got %q", *polynomial)
		}
	}
	if fs.NArg() != 1 {
		return config{}, usageError("expected one FILE (or - for standard input), got %d arguments", fs.NArg())
	}
	if *repeat < 1 {
		return config{}, usageError("-repeat: expected at least 1, got %d", *repeat)
	}
	if *bench && fs.Arg(0) == "-" {
		return config{}, usageError("-bench needs a FILE, not standard input")
	}
	if err := p.validate(); err != nil {
		return config{}, err
	}
	return config{params: p, bench: *bench, repeat: *repeat, path: fs.Arg(0)}, nil
}

// validate refuses what the upstream code would not survive: it checks
// little itself (desync checks its own sizes in NewChunker).
func (p params) validate() error {
	switch p.algorithm {
	case "repmaxcdc":
		if p.min < 64 || p.horizon < 0 {
			return usageError("repmaxcdc needs -min >= 64 (its Gear window) and -horizon >= 0")
		}
	case "rabin":
		if p.min < 64 || p.max < p.min {
			return usageError("rabin needs 64 <= -min <= -max")
		}
		if p.avg <= 0 || p.avg&(p.avg-1) != 0 {
			return usageError("rabin: -avg must be a power of two, got %d", p.avg)
		}
		if p.polynomial>>53 != 1 {
			return usageError("rabin: -polynomial 0x%x does not have degree 53", p.polynomial)
		}
	case "buzhash":
		if p.min <= 0 || p.avg <= 0 || p.max <= 0 {
			return usageError("buzhash: sizes must be positive")
		}
	}
	return nil
}

// printChunks writes "offset,length" per chunk of r to w.
func printChunks(p params, r io.Reader, w io.Writer) error {
	out := bufio.NewWriterSize(w, 1<<16)
	var offset int64
	var writeErr error
	err := chunkStream(p, r, func(length int) {
		if writeErr == nil {
			_, writeErr = fmt.Fprintf(out, "%d,%d\n", offset, length)
		}
		offset += int64(length)
	})
	if err != nil {
		return err
	}
	if writeErr != nil {
		return writeErr
	}
	return out.Flush()
}

func run(args []string, stdin io.Reader, stdout io.Writer) error {
	cfg, err := parseArgs(args)
	if err != nil {
		return err
	}
	if cfg.bench {
		return runBench(cfg, stdout)
	}
	if cfg.path == "-" {
		return printChunks(cfg.params, stdin, stdout)
	}
	f, err := os.Open(cfg.path)
	if err != nil {
		return err
	}
	defer f.Close()
	return printChunks(cfg.params, f, stdout)
}

func main() {
	if err := run(os.Args[1:], os.Stdin, os.Stdout); err != nil {
		fmt.Fprintf(os.Stderr, "upstream-chunk: %v\n", err)
		if errors.Is(err, errUsage) {
			fmt.Fprintln(os.Stderr, "usage: upstream-chunk -algorithm repmaxcdc|rabin|buzhash "+
				"[-min N] [-avg N] [-max N] [-horizon N] [-polynomial 0xHEX|DEC] "+
				"[-bench [-repeat N]] FILE|-")
			os.Exit(2)
		}
		os.Exit(1)
	}
}
