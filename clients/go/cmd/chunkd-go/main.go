// Command chunkd-go is the command-line client of the Go module: it chunks,
// deduplicates or estimates files on a chunkd server and describes the
// server. It follows docs/cli.md, the contract chunkctl and chunkd-client
// follow too:
//
//	chunkd-go chunk  [flags] FILE|-          one line per chunk: offset,length,fingerprint_hex
//	chunkd-go dedup  --namespace NS [flags] FILE|-...
//	chunkd-go info   [flags]
//	chunkd-go estimate --set SPEC... [flags] FILE|DIR|-...
//	chunkd-go --version | --help | COMMAND --help
//
// Flags take one dash or two (--tls-ca, -tls-ca), and the underscore
// spelling of earlier releases (--tls_ca). dedup prints one line per file
// and a total line; a line where RapidCDC hints were tried ends with
// hints_tried, hints_accepted, hints_rejected and hint_skipped_bytes.
// estimate sends the files (a directory: its files, recursively, in sorted
// path order) as one data set and prints, per --set, the sizes, the dedup
// ratio and the index costs in two tables and a total line; --plot FILE
// writes its JSON to FILE with the extension .json, for chunkd-client plot.
// --format json (or --json) prints JSON Lines for chunk and dedup and one
// object for info and estimate. --retries N (0..100) of chunk and dedup
// replays a file whose stream failed, each replay announced by a line on
// stderr ("chunkd-go: FILE: UNAVAILABLE: message; sending it again in
// 0.10 s (retry 1 of 3)"); chunk prints every chunk once. A progress line
// (bytes, rate, ETA) goes to stderr when it is a terminal (--progress
// auto|always|never).
//
// The chunking flags are those of the --algorithm (or the --preset's), as
// chunkd's table declares them (e.g. fastcdc takes --min, --avg, --max,
// --level and --seed; fixed only --avg; the usage error for another flag
// names those the algorithm takes).
// Another chunking flag, even with its default value, is a usage error, as
// is a value out of the algorithm's range; a flag left out is not sent, so
// the server uses the algorithm's default.
//
// Exit status: 0 on success; 1 when a file, the output or a call failed
// ("chunkd-go: CODE: message" with the gRPC code and the server's message,
// e.g. "chunkd-go: RESOURCE_EXHAUSTED: ..."; a stream the server ended OK
// but whose summary does not count the bytes sent is "chunkd-go: DATA_LOSS:
// server summary reports total_bytes=N but M bytes were sent", and chunk may
// have printed lines before it); 2 on a usage error or a bad parameter,
// found by chunkd-go or answered INVALID_ARGUMENT by the server; 130 when
// interrupted; 141 when standard output was closed early (| head).
package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"unicode"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	chunkd "github.com/chunkd/chunkd/clients/go"
)

// Exit statuses (docs/cli.md).
const (
	exitOK          = 0
	exitFailure     = 1
	exitUsage       = 2
	exitInterrupted = 130
	exitClosedPipe  = 141
)

const usage = `Usage: chunkd-go COMMAND [flags] [ARGS]

Commands:
  chunk [flags] FILE|-               one line per chunk: offset,length,fingerprint_hex
  dedup --namespace NS [flags] FILE|-...
                                     deduplicate files; one line per file, then a total
  info [flags]                       the server's version, backends, limits and algorithms
  estimate --set SPEC... [flags] FILE|DIR|-...
                                     how the files would deduplicate under each parameter set

  --version                          print "chunkd-go VERSION"
  --help                             this text

Run 'chunkd-go COMMAND --help' for the flags of a command.
`

type command struct {
	synopsis string
	flags    func(*options, *flag.FlagSet)
	run      func(context.Context, *options, []string, env) error
}

var commands = map[string]command{
	"chunk": {"chunk [flags] FILE|-", func(o *options, fs *flag.FlagSet) {
		o.connectionFlags(fs)
		o.chunkingFlags(fs)
		o.retriesFlag(fs)
	}, runChunk},
	"dedup": {"dedup --namespace NS [flags] FILE|-...", func(o *options, fs *flag.FlagSet) {
		o.connectionFlags(fs)
		o.chunkingFlags(fs)
		o.dedupFlags(fs)
		o.retriesFlag(fs)
	}, runDedup},
	"info": {"info [flags]", func(o *options, fs *flag.FlagSet) { o.connectionFlags(fs) }, runInfo},
	"estimate": {"estimate --set SPEC [--set SPEC...] [flags] FILE|DIR|-...", func(o *options, fs *flag.FlagSet) {
		o.connectionFlags(fs)
		o.estimateFlags(fs)
	}, runEstimate},
}

// run runs the command line args (without the program name) and returns
// the exit status.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return exitUsage
	}
	switch args[0] {
	case "-h", "-help", "--help", "help":
		fmt.Fprint(stdout, usage)
		return exitOK
	case "-version", "--version":
		fmt.Fprintf(stdout, "chunkd-go %s\n", chunkd.Version)
		return exitOK
	}
	cmd, ok := commands[args[0]]
	if !ok {
		fmt.Fprintf(stderr, "chunkd-go: unknown command %q (see chunkd-go --help)\n", args[0])
		return exitUsage
	}
	o := &options{command: args[0]}
	fs := flag.NewFlagSet("chunkd-go "+args[0], flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	cmd.flags(o, fs)
	aliases := addAliases(fs)
	operands, err := parse(fs, args[1:])
	if errors.Is(err, flag.ErrHelp) {
		fmt.Fprintf(stdout, "Usage: chunkd-go %s\n\nFlags:\n", cmd.synopsis)
		printFlags(stdout, fs, aliases)
		return exitOK
	}
	if err != nil {
		return report(stderr, o.command, usageError{flagErrorMessage(err)})
	}
	o.given = map[string]bool{}
	fs.Visit(func(f *flag.Flag) {
		if name, ok := aliases[f.Name]; ok {
			o.given[name] = true
		} else {
			o.given[f.Name] = true
		}
	})
	out := bufio.NewWriterSize(stdout, 1<<16)
	err = cmd.run(ctx, o, operands, env{out: out, stderr: stderr})
	if flushErr := out.Flush(); err == nil && flushErr != nil {
		err = flushErr
	}
	return report(stderr, o.command, err)
}

// flagErrorMessage rewords an error of the flag package with the flag
// spelled as help shows it: "unknown flag --bogus", "invalid value "x" for
// flag --min: ...".
func flagErrorMessage(err error) string {
	msg := err.Error()
	if name, unknown := strings.CutPrefix(msg, "flag provided but not defined: -"); unknown {
		return "unknown flag --" + name
	}
	if i := strings.Index(msg, "flag -"); i >= 0 && !strings.HasPrefix(msg[i:], "flag --") {
		return msg[:i] + "flag --" + msg[i+len("flag -"):]
	}
	if name, missing := strings.CutPrefix(msg, "flag needs an argument: -"); missing {
		return "flag --" + name + " needs an argument"
	}
	return msg
}

// report prints err as docs/cli.md says and returns the exit status.
func report(stderr io.Writer, command string, err error) int {
	var usageErr usageError
	var argErr *chunkd.ArgumentError
	switch {
	case err == nil:
		return exitOK
	case errors.Is(err, syscall.EPIPE):
		return exitClosedPipe // as a process killed by SIGPIPE: nothing more printed
	case errors.As(err, &usageErr):
		fmt.Fprintf(stderr, "chunkd-go: %s (see chunkd-go %s --help)\n", usageErr.msg, command)
		return exitUsage
	case errors.As(err, &argErr):
		field := argErr.Field
		if name, ok := flagOf[field]; ok {
			field = name
		}
		fmt.Fprintf(stderr, "chunkd-go: %s: %s (see chunkd-go %s --help)\n", field, argErr.Problem, command)
		return exitUsage
	}
	s, ok := status.FromError(err)
	if !ok {
		fmt.Fprintf(stderr, "chunkd-go: %v\n", err)
		return exitFailure
	}
	fmt.Fprintf(stderr, "chunkd-go: %s\n", errorText(err))
	if s.Code() == codes.InvalidArgument {
		return exitUsage
	}
	return exitFailure
}

// errorText is "CODE: message" for a gRPC status error (the server's
// message), else the error's text.
func errorText(err error) string {
	s, ok := status.FromError(err)
	if !ok {
		return err.Error()
	}
	text := codeName(s.Code()) + ": " + s.Message()
	if reason := chunkd.ReasonOf(err); reason != "" {
		text += " [reason: " + reason + "]"
	}
	return text
}

// codeName spells a gRPC code as the other clients do: "INVALID_ARGUMENT",
// and "CANCELLED" (grpc-go spells that code's name Canceled).
func codeName(code codes.Code) string {
	if code == codes.Canceled {
		return "CANCELLED"
	}
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
	// Writes to a closed stdout fail with EPIPE (exit 141, see report)
	// instead of killing the process, so that every CLI exits alike.
	signal.Notify(make(chan os.Signal, 1), syscall.SIGPIPE)
	interrupts := make(chan os.Signal, 1)
	signal.Notify(interrupts, os.Interrupt)
	go func() {
		<-interrupts
		if isTerminal(os.Stderr) {
			fmt.Fprintln(os.Stderr) // end a progress line or the ^C echo
		}
		fmt.Fprintln(os.Stderr, "chunkd-go: interrupted")
		os.Exit(exitInterrupted)
	}()
	os.Exit(run(context.Background(), os.Args[1:], os.Stdout, os.Stderr))
}
