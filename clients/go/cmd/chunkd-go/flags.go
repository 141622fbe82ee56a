package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"

	chunkd "github.com/chunkd/chunkd/clients/go"
)

// options are the flags of one command line.
type options struct {
	command                         string
	server, token, tokenFile        string
	tls                             bool
	tlsCA, tlsCert, tlsKey, tlsName string
	timeout                         time.Duration
	algorithm, preset, fingerprint  string
	seqMode                         string
	numbers                         map[string]uint64 // the numeric chunking flags given
	messageSize, retries            int
	format, progress                string
	json                            bool
	namespace, hints                string
	sets                            []string // estimate's --set
	sample                          uint64
	plot                            string
	given                           map[string]bool // flags on the command line, by dash name
}

// usageError is a bad command line: exit status 2, with a hint to --help.
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

// uintFlag is a numeric chunking flag: an unsigned integer of bits bits,
// decimal or 0x...
type uintFlag struct {
	name    string
	bits    int
	numbers map[string]uint64
}

func (f uintFlag) String() string {
	if v, ok := f.numbers[f.name]; ok {
		return strconv.FormatUint(v, 10)
	}
	return ""
}

func (f uintFlag) Set(text string) error {
	v, err := strconv.ParseUint(text, 0, f.bits)
	if err != nil {
		return fmt.Errorf("expected an integer from 0 to %d", uint64(1)<<f.bits-1)
	}
	f.numbers[f.name] = v
	return nil
}

// timeoutFlag takes seconds ("30", "0.5") or a Go duration ("30s").
type timeoutFlag struct{ dst *time.Duration }

func (f timeoutFlag) String() string {
	if f.dst == nil || *f.dst == 0 {
		return ""
	}
	return f.dst.String()
}

func (f timeoutFlag) Set(text string) error {
	d, err := time.ParseDuration(text)
	if seconds, floatErr := strconv.ParseFloat(text, 64); floatErr == nil {
		d, err = time.Duration(seconds*float64(time.Second)), nil
		if math.IsNaN(seconds) || seconds > 1e9 {
			err = errors.New("out of range")
		}
	}
	if err != nil || d < 0 {
		return errors.New("expected seconds (30, 0.5) or a duration (30s, 1m)")
	}
	*f.dst = d
	return nil
}

// choiceFlag is a string flag with a fixed set of values.
type choiceFlag struct {
	dst     *string
	choices []string
}

func (f choiceFlag) String() string {
	if f.dst == nil {
		return ""
	}
	return *f.dst
}

func (f choiceFlag) Set(text string) error {
	for _, c := range f.choices {
		if strings.EqualFold(text, c) {
			*f.dst = c
			return nil
		}
	}
	return fmt.Errorf("expected one of %s", strings.Join(f.choices, ", "))
}

// numericFlags are the numeric chunking flags and their widths.
var numericFlags = []struct {
	name  string
	bits  int
	usage string
}{
	{"min", 32, "minimum chunk size in bytes"},
	{"avg", 32, "average chunk size in bytes (fixed: the size of every chunk)"},
	{"max", 32, "maximum chunk size in bytes"},
	{"level", 32, "fastcdc: normalization level 0..3 (default 1)"},
	{"seed", 64, "fastcdc: Gear table seed (default 0)"},
	{"seq-length", 32, "seqcdc: sequence length (default 5)"},
	{"skip-trigger", 32, "seqcdc: skip trigger (default 50)"},
	{"skip-size", 32, "seqcdc: skip size (default 512)"},
	{"horizon", 32, "repmaxcdc: bytes past --min searched for the best cut (default 2097152)"},
	{"polynomial", 64, "rabin: irreducible polynomial of degree 53, 0x... or decimal (default 0x3DA3358B4DC173)"},
}

func (o *options) connectionFlags(fs *flag.FlagSet) {
	server := os.Getenv("CHUNKD_SERVER")
	if server == "" {
		server = "127.0.0.1:50051"
	}
	fs.StringVar(&o.server, "server", server, "chunkd `address`: host:port or a gRPC target (dns:///NAME:PORT); $CHUNKD_SERVER when set")
	fs.BoolVar(&o.tls, "tls", false, "TLS, verifying the server against the system's roots")
	fs.StringVar(&o.tlsCA, "tls-ca", "", "PEM `file` of the server's CA certificates (implies --tls)")
	fs.StringVar(&o.tlsCert, "tls-cert", "", "client certificate PEM `file` for mutual TLS (implies --tls)")
	fs.StringVar(&o.tlsKey, "tls-key", "", "the client certificate's key PEM `file` (implies --tls)")
	fs.StringVar(&o.tlsName, "tls-server-name", "", "the `name` to verify in the server's certificate")
	fs.StringVar(&o.token, "token", "", "bearer `token` (default $CHUNKD_TOKEN)")
	fs.StringVar(&o.tokenFile, "token-file", "", "`file` holding the bearer token")
	fs.Var(timeoutFlag{&o.timeout}, "timeout", "deadline of each call in `seconds` (0.5, or a Go duration: 30s); 0: none")
	o.format = "text"
	fs.Var(choiceFlag{&o.format, []string{"text", "csv", "json"}}, "format", "output `format`: text, csv (the same as text) or json")
	fs.BoolVar(&o.json, "json", false, "the same as --format json")
	o.progress = "auto"
	fs.Var(choiceFlag{&o.progress, []string{"auto", "always", "never"}}, "progress",
		"progress line on stderr, `when`: auto (when stderr is a terminal), always or never")
}

// orList is "a, b or c".
func orList(items []string) string {
	if len(items) < 2 {
		return strings.Join(items, "")
	}
	return strings.Join(items[:len(items)-1], ", ") + " or " + items[len(items)-1]
}

func (o *options) chunkingFlags(fs *flag.FlagSet) {
	o.algorithm, o.fingerprint = "fastcdc", "sha256"
	fs.Var(choiceFlag{&o.algorithm, algorithmNames()}, "algorithm", orList(algorithmNames()))
	fs.Var(choiceFlag{&o.preset, presetNames()}, "preset",
		orList(presetNames())+"; flags given beside it override it")
	o.numbers = map[string]uint64{}
	for _, f := range numericFlags {
		fs.Var(uintFlag{f.name, f.bits, o.numbers}, f.name, f.usage)
	}
	fs.Var(choiceFlag{&o.seqMode, []string{"increasing", "decreasing"}}, "seq-mode", "seqcdc: increasing (default) or decreasing")
	fs.Var(choiceFlag{&o.fingerprint, []string{"sha256", "xxh128", "none"}}, "fingerprint", "sha256, xxh128 or none (chunk only)")
	fs.IntVar(&o.messageSize, "message-size", chunkd.DefaultMessageSize, "input bytes per data message (`N`)")
}

func (o *options) dedupFlags(fs *flag.FlagSet) {
	fs.StringVar(&o.namespace, "namespace", "", "the tenant's index, `NS` (required)")
	fs.StringVar(&o.hints, "hints", "",
		"RapidCDC hint test, `NAME`: off, ff, ff_mt, ff_rwt or ff_rwt_fpt (fastcdc only; default: the server's, ff_rwt_fpt)")
}

// retriesFlag is --retries of chunk and dedup.
func (o *options) retriesFlag(fs *flag.FlagSet) {
	fs.IntVar(&o.retries, "retries", 0, "replay a file whose stream failed (UNAVAILABLE, ...) up to `N` more times, "+
		"0..100; regular files only")
}

// addAliases registers every flag with a dash under its underscore spelling
// too (--tls_ca), the spelling of earlier releases; help shows only the
// dash one.
func addAliases(fs *flag.FlagSet) map[string]string {
	aliases := map[string]string{}
	var dashed []*flag.Flag
	fs.VisitAll(func(f *flag.Flag) {
		if strings.Contains(f.Name, "-") {
			dashed = append(dashed, f)
		}
	})
	for _, f := range dashed {
		alias := strings.ReplaceAll(f.Name, "-", "_")
		fs.Var(f.Value, alias, f.Usage)
		aliases[alias] = f.Name
	}
	return aliases
}

// parse parses args, flags and operands in any order ("--" ends the
// flags), and returns the operands.
func parse(fs *flag.FlagSet, args []string) ([]string, error) {
	var operands []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		rest := fs.Args()
		if consumed := len(args) - len(rest); consumed > 0 && args[consumed-1] == "--" {
			return append(operands, rest...), nil
		}
		if len(rest) == 0 {
			return operands, nil
		}
		operands = append(operands, rest[0])
		args = rest[1:]
	}
}

// printFlags writes the flags of fs, dash spelling, sorted, as
// "  --name VALUE  usage (default D)".
func printFlags(w io.Writer, fs *flag.FlagSet, aliases map[string]string) {
	var lines []string
	fs.VisitAll(func(f *flag.Flag) {
		if _, alias := aliases[f.Name]; alias {
			return
		}
		name, usage := flag.UnquoteUsage(f)
		if name == "value" {
			name = "NAME"
			if _, numeric := f.Value.(uintFlag); numeric {
				name = "N"
			}
		}
		head := "  --" + f.Name
		if name != "" {
			head += " " + strings.ToUpper(name)
		}
		if def := f.DefValue; def != "" && def != "false" && def != "0" {
			usage += fmt.Sprintf(" (default %s)", def)
		}
		lines = append(lines, fmt.Sprintf("%-28s %s", head, usage))
	})
	sort.Strings(lines)
	for _, line := range lines {
		fmt.Fprintln(w, line)
	}
}
