package main

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	chunkd "github.com/chunkd/chunkd/clients/go"
)

// chunkingFlags are the flags of the ChunkingParams fields, and
// algorithmFlags those each algorithm takes (the server refuses any other
// field, so a flag of another algorithm is a usage error).
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

// preset is a named parameter set: its algorithm and the flags it sets (as
// chunkctl's --preset; the library's presets in server/chunking/options.cc).
type preset struct {
	algorithm string
	flags     map[string]string
}

var presets = map[string]preset{
	"fastcdc-reapi": {"fastcdc", map[string]string{"min": "131072", "avg": "524288", "max": "2097152", "level": "2"}},
	"seqcdc-8k": {"seqcdc", map[string]string{"min": "4096", "max": "16384", "seq-mode": "increasing",
		"seq-length": "5", "skip-trigger": "50", "skip-size": "256"}},
	"seqcdc-16k": {"seqcdc", map[string]string{"min": "8192", "max": "32768", "seq-mode": "increasing",
		"seq-length": "5", "skip-trigger": "50", "skip-size": "512"}},
}

func presetNames() []string {
	names := make([]string, 0, len(presets))
	for name := range presets {
		names = append(names, name)
	}
	slices.Sort(names)
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
