package main

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	chunkd "github.com/chunkd/chunkd/clients/go"
	"github.com/chunkd/chunkd/clients/go/internal/tables"
)

// chunkingFlags are the flags of the ChunkingParams fields, and
// algorithmFlags those each algorithm takes (the server refuses any other
// field, so a flag of another algorithm is a usage error); both from
// chunkd's table (internal/tables, generated from proto/chunkd/v1/tables.json).
var (
	chunkingFlags  = tableFlags()
	algorithmFlags = tableAlgorithmFlags()
)

// flagOfParameter maps a ChunkingParams field to its flag ("min_size": "min").
var flagOfParameter = func() map[string]string {
	m := map[string]string{}
	for _, p := range tables.Parameters {
		m[p.Name] = p.Flag
	}
	return m
}()

func tableFlags() []string {
	flags := make([]string, 0, len(tables.Parameters))
	for _, p := range tables.Parameters {
		flags = append(flags, p.Flag)
	}
	return flags
}

func tableAlgorithmFlags() map[string][]string {
	m := map[string][]string{}
	for _, a := range tables.Algorithms {
		for _, name := range a.Parameters {
			m[a.Name] = append(m[a.Name], flagOfParameter[name])
		}
	}
	return m
}

// algorithmNames are the algorithms in the table's order.
func algorithmNames() []string {
	names := make([]string, 0, len(tables.Algorithms))
	for _, a := range tables.Algorithms {
		names = append(names, a.Name)
	}
	return names
}

// preset is a named parameter set: its algorithm and the flags it sets (as
// chunkctl's --preset), from the table.
type preset struct {
	algorithm string
	flags     map[string]string
}

var presets = func() map[string]preset {
	m := map[string]preset{}
	for _, p := range tables.Presets {
		flags := map[string]string{}
		for _, name := range p.Parameters {
			flags[flagOfParameter[name]] = strconv.FormatUint(p.Values[name], 10)
		}
		if mode, ok := flags["seq-mode"]; ok {
			for name, value := range seqModeValues() {
				if strconv.FormatUint(value, 10) == mode {
					flags["seq-mode"] = name
				}
			}
		}
		m[p.Name] = preset{p.Algorithm, flags}
	}
	return m
}()

// seqModeValues are the names of seq_mode's values.
func seqModeValues() map[string]uint64 {
	p, _ := tables.ParameterNamed("seq_mode")
	return p.Names
}

func presetNames() []string {
	names := make([]string, 0, len(presets))
	for _, p := range tables.Presets {
		names = append(names, p.Name)
	}
	return names
}

// effectiveAlgorithm is --algorithm, else the preset's, else fastcdc; with
// where it came from for the messages.
func (o *options) effectiveAlgorithm() (string, string, error) {
	p, hasPreset := presets[o.preset]
	switch {
	case hasPreset && o.given["algorithm"] && o.algorithm != p.algorithm:
		return "", "", usageError{fmt.Sprintf("--preset %s is a %s preset, but --algorithm is %s",
			o.preset, p.algorithm, o.algorithm)}
	case hasPreset:
		return p.algorithm, " (the algorithm of --preset " + o.preset + ")", nil
	case o.given["algorithm"]:
		return o.algorithm, "", nil
	}
	return "fastcdc", " (the default --algorithm)", nil
}

// params checks the chunking flags against the algorithm in effect, fills
// in the preset's and returns the Params they make.
func (o *options) params() (chunkd.Params, error) {
	algorithm, source, err := o.effectiveAlgorithm()
	if err != nil {
		return chunkd.Params{}, err
	}
	takes := algorithmFlags[algorithm]
	for _, name := range chunkingFlags {
		if o.given[name] && !slices.Contains(takes, name) {
			return chunkd.Params{}, usageError{fmt.Sprintf("--%s is not a parameter of %s%s (it takes --%s); leave --%s out",
				name, algorithm, source, strings.Join(takes, ", --"), name)}
		}
	}
	if p, ok := presets[o.preset]; ok {
		for name, value := range p.flags {
			if o.given[name] {
				continue
			}
			if name == "seq-mode" {
				o.seqMode = value
			} else {
				o.numbers[name], _ = strconv.ParseUint(value, 10, 64)
			}
		}
	}
	if err := o.checkRanges(algorithm); err != nil {
		return chunkd.Params{}, err
	}
	if err := checkHints(o.hints, algorithm); err != nil {
		return chunkd.Params{}, err
	}
	if o.messageSize < 1 {
		return chunkd.Params{}, usageError{"--message-size must be at least 1"}
	}
	return o.toParams(algorithm), nil
}

func (o *options) toParams(algorithm string) chunkd.Params {
	n := func(name string) uint32 { return uint32(o.numbers[name]) }
	p := chunkd.Params{
		Algorithm: algorithm, MinSize: n("min"), AvgSize: n("avg"), MaxSize: n("max"),
		Seed: o.numbers["seed"], SeqMode: o.seqMode, SeqLength: n("seq-length"),
		SkipTrigger: n("skip-trigger"), SkipSize: n("skip-size"), Polynomial: o.numbers["polynomial"],
		Fingerprint: o.fingerprint, MessageSize: o.messageSize, Hints: o.hints,
		Retries: o.retries, Timeout: o.timeout,
	}
	if level, ok := o.numbers["level"]; ok {
		p.NormalizationLevel = chunkd.Level(uint32(level))
	}
	if horizon, ok := o.numbers["horizon"]; ok {
		p.HorizonSize = chunkd.Horizon(uint32(horizon))
	}
	return p
}

// flagOf names the flag of a Params field in the library's errors.
var flagOf = map[string]string{
	"Params.Algorithm": "--algorithm", "Params.Fingerprint": "--fingerprint",
	"Params.SeqMode": "--seq-mode", "Params.Hints": "--hints", "Params.MessageSize": "--message-size",
	"Params.Retries": "--retries", "Params.Timeout": "--timeout", "WithToken": "--token",
	"TLSFiles": "--tls-cert, --tls-key", "Dial": "--server",
}

// valueRange is the allowed values of a numeric flag for one algorithm.
type valueRange struct{ min, max uint64 }

// ranges are the values chunkd accepts per algorithm and flag (the table's,
// as the server checks them and GetServerInfo reports them), so that a value
// out of range is a usage error before any call, as chunkctl finds it. Rules
// between fields (min <= avg <= max, a power of two, an irreducible
// polynomial) are left to the server, whose INVALID_ARGUMENT exits 2 as well.
var ranges = func() map[string]map[string]valueRange {
	m := map[string]map[string]valueRange{}
	for _, a := range tables.Algorithms {
		m[a.Name] = map[string]valueRange{}
		for name, r := range a.Ranges {
			m[a.Name][flagOfParameter[name]] = valueRange{r.Min, r.Max}
		}
	}
	return m
}()

// checkRanges refuses a numeric flag given out of its algorithm's range.
func (o *options) checkRanges(algorithm string) error {
	for _, f := range numericFlags {
		r, limited := ranges[algorithm][f.name]
		if v, given := o.numbers[f.name]; given && o.given[f.name] && limited && (v < r.min || v > r.max) {
			return usageError{fmt.Sprintf("--%s %d is out of range for %s: %d..%d", f.name, v, algorithm, r.min, r.max)}
		}
	}
	return nil
}

// checkNamespace refuses what chunkd refuses: 1..tables.NamespaceMaxLength
// characters of [tables.NameCharacters] (letters, digits and "._-").
func checkNamespace(ns string) error {
	if len(ns) > tables.NamespaceMaxLength {
		return usageError{fmt.Sprintf("--namespace has %d characters; at most %d", len(ns), tables.NamespaceMaxLength)}
	}
	for _, r := range ns {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("._-", r)) {
			return usageError{fmt.Sprintf("--namespace %q: only [%s] are allowed", ns, tables.NameCharacters)}
		}
	}
	return nil
}

// checkHints refuses a hint test other than off with an algorithm other
// than fastcdc (the server would). --hints takes what Params.Hints takes: a
// name in any case, the proto's name or its number.
func checkHints(hints, algorithm string) error {
	name := strings.TrimPrefix(strings.ToLower(hints), "hint_test_")
	switch name {
	case "", "off", "unspecified", "0", "1":
		return nil
	}
	if algorithm != "fastcdc" {
		return usageError{fmt.Sprintf("--hints %s needs --algorithm fastcdc, not %s; give --hints off or leave it out",
			hints, algorithm)}
	}
	return nil
}
