// The parameter sets of an Estimate and ParseSet, the --set syntax the
// command-line clients share (docs/estimate.md).

package chunkd

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	pb "github.com/chunkd/chunkd/clients/go/chunkdpb"
	"github.com/chunkd/chunkd/clients/go/internal/tables"
)

// MaxEstimateSets is the most parameter sets one Estimate takes.
const MaxEstimateSets = 16

// EstimateSet is one parameter set of an Estimate: how to cut the data set.
type EstimateSet struct {
	// Label names the set in its result (at most 256 bytes; the server
	// refuses a longer one). ParseSet sets it to the text it parsed.
	Label string
	// Params is the chunking: Algorithm and the chunking fields (MinSize
	// through Polynomial), which the server validates and fills in as for
	// Chunk. The fields of a stream (Fingerprint, MessageSize, StreamID,
	// Hints, Retries, OnReplay, Timeout) belong in EstimateOptions; a set
	// that has one is an *ArgumentError.
	Params Params
	// Zero names the fields of Params, by their proto names ("skip_size",
	// "min_size"), sent as 0 although they are 0: Params leaves a zero
	// field unset, which gives the algorithm's default. ParseSet fills it
	// for a key given as 0.
	Zero []string
}

// parameterFlags are the table's parameters by their flag names ("min").
var parameterFlags = func() map[string]tables.Parameter {
	m := map[string]tables.Parameter{}
	for _, p := range tables.Parameters {
		m[p.Flag] = p
	}
	return m
}()

// flagNames are the flag names of the proto parameter names.
func flagNames(names []string) []string {
	flags := make([]string, 0, len(names))
	for _, name := range names {
		p, _ := tables.ParameterNamed(name)
		flags = append(flags, p.Flag)
	}
	return flags
}

// ParseSet parses one parameter set in the syntax of the command-line
// clients' --set: "ALGO" or "ALGO:KEY=VALUE[,KEY=VALUE...]", ALGO an
// algorithm of chunkd's table ("fastcdc", "seqcdc", ...), KEY a flag name
// of chunk ("min", "avg", "max", "level", "seed", "seq-mode",
// "seq-length", "skip-trigger", "skip-size", "horizon", "polynomial") or
// "preset". A VALUE is what that flag takes: an integer (decimal or 0x...),
// increasing or decreasing for seq-mode, a preset's name of the same
// algorithm for preset, whose values the keys given beside it override.
// The set's Label is spec itself, e.g.
//
//	set, err := chunkd.ParseSet("fastcdc:min=4096,avg=16384,max=65536")
//
// An unknown algorithm, key or preset, a key the algorithm does not take,
// a key given twice, a bad value and a preset of another algorithm are an
// *ArgumentError naming the set as given (Field `set "SPEC"`) and the
// problem. Ranges are left to the server, whose INVALID_ARGUMENT names the
// set.
func ParseSet(spec string) (EstimateSet, error) {
	fail := func(format string, args ...any) (EstimateSet, error) {
		return EstimateSet{}, argumentError("set "+strconv.Quote(spec), format, args...)
	}
	name, keys, hasKeys := strings.Cut(spec, ":")
	algorithm, ok := tables.AlgorithmNamed(name)
	if !ok {
		return fail("unknown algorithm %q (%s)", name, algorithmList)
	}
	takes := flagNames(algorithm.Parameters)
	values := map[string]uint64{} // by proto name
	given := map[string]bool{}    // by key
	var presetValues map[string]uint64
	for _, item := range strings.Split(keys, ",") {
		if !hasKeys {
			break
		}
		key, value, hasValue := strings.Cut(item, "=")
		switch {
		case !hasValue || key == "":
			return fail("expected KEY=VALUE, got %q", item)
		case given[key]:
			return fail("%s given twice", key)
		case key == "preset":
			given[key] = true
			p, err := setPreset(algorithm.Name, value)
			if err != "" {
				return fail("%s", err)
			}
			presetValues = p
			continue
		}
		p, known := parameterFlags[key]
		switch {
		case !known:
			return fail("unknown key %q (keys: preset, %s)", key, strings.Join(flagNames(paramNames()), ", "))
		case !slices.Contains(takes, key):
			return fail("%s is not a parameter of %s (it takes %s)", key, algorithm.Name, strings.Join(takes, ", "))
		}
		v, err := parameterValue(p, value)
		if err != "" {
			return fail("%s=%s: %s", key, value, err)
		}
		given[key], values[p.Name] = true, v
	}
	for name, v := range presetValues {
		if _, explicit := values[name]; !explicit {
			values[name] = v
		}
	}
	return EstimateSet{Label: spec, Params: paramsOf(algorithm.Name, values), Zero: zeros(values)}, nil
}

// paramNames are the proto names of every parameter, in the table's order.
func paramNames() []string {
	names := make([]string, 0, len(tables.Parameters))
	for _, p := range tables.Parameters {
		names = append(names, p.Name)
	}
	return names
}

// setPreset returns the values of the preset named name, or what is wrong
// with it for algorithm.
func setPreset(algorithm, name string) (map[string]uint64, string) {
	var names []string
	for _, p := range tables.Presets {
		if p.Name == name {
			if p.Algorithm != algorithm {
				return nil, fmt.Sprintf("preset %s is a %s preset, not %s", name, p.Algorithm, algorithm)
			}
			return p.Values, ""
		}
		if p.Algorithm == algorithm {
			names = append(names, p.Name)
		}
	}
	valid := "none"
	if len(names) > 0 {
		valid = strings.Join(names, ", ")
	}
	return nil, fmt.Sprintf("unknown preset %q (%s presets: %s)", name, algorithm, valid)
}

// parameterValue parses value as p's flag takes it, or says what is wrong.
func parameterValue(p tables.Parameter, value string) (uint64, string) {
	if p.Names != nil {
		for name, v := range p.Names {
			if name == value {
				return v, ""
			}
		}
		names := make([]string, 0, len(p.Names))
		for name := range p.Names {
			names = append(names, name)
		}
		slices.SortFunc(names, func(a, b string) int { return int(p.Names[a]) - int(p.Names[b]) })
		return 0, "expected " + strings.Join(names, " or ")
	}
	// Exactly what chunkctl's flags take: decimal digits, or 0x and hex
	// digits (ParseUint with a base of its own takes no sign, underscore,
	// 0o, 0b or leading-zero octal).
	base, digits := 10, value
	if len(value) > 2 && (value[:2] == "0x" || value[:2] == "0X") {
		base, digits = 16, value[2:]
	}
	v, err := strconv.ParseUint(digits, base, p.Bits)
	if err != nil {
		return 0, fmt.Sprintf("expected an integer from 0 to %d", uint64(1)<<p.Bits-1)
	}
	return v, ""
}

// paramsOf builds the Params of algorithm with values by proto name.
func paramsOf(algorithm string, values map[string]uint64) Params {
	p := Params{Algorithm: algorithm}
	small := func(name string) uint32 { return uint32(values[name]) }
	p.MinSize, p.AvgSize, p.MaxSize = small("min_size"), small("avg_size"), small("max_size")
	if v, ok := values["normalization_level"]; ok {
		p.NormalizationLevel = Level(uint32(v))
	}
	if v, ok := values["horizon_size"]; ok {
		p.HorizonSize = Horizon(uint32(v))
	}
	p.Seed, p.Polynomial = values["seed"], values["polynomial"]
	for name, v := range seqModeNames() {
		if _, ok := values["seq_mode"]; ok && v == values["seq_mode"] {
			p.SeqMode = name
		}
	}
	p.SeqLength, p.SkipTrigger, p.SkipSize = small("seq_length"), small("skip_trigger"), small("skip_size")
	return p
}

// zeros are the names of the fields of Params given as 0 that Params
// would leave unset.
func zeros(values map[string]uint64) []string {
	var names []string
	for _, name := range paramNames() {
		v, ok := values[name]
		if ok && v == 0 && name != "normalization_level" && name != "horizon_size" && name != "seq_mode" {
			names = append(names, name)
		}
	}
	return names
}

// seqModeNames are the names of seq_mode's values, from the table.
func seqModeNames() map[string]uint64 {
	p, _ := tables.ParameterNamed("seq_mode")
	return p.Names
}

// proto translates set i; a bad field is an *ArgumentError naming it.
func (set EstimateSet) proto(i int) (*pb.ChunkingParams, error) {
	field := fmt.Sprintf("sets[%d]", i)
	p := set.Params
	if p.Fingerprint != "" || p.MessageSize != 0 || p.StreamID != "" || p.Hints != "" || p.Retries != 0 ||
		p.OnReplay != nil || p.Timeout != 0 {
		return nil, argumentError(field+".Params", "only the chunking fields (Algorithm, MinSize ... Polynomial) "+
			"belong in a set; Fingerprint, MessageSize and Timeout are EstimateOptions'")
	}
	chunking, _, _, err := p.proto()
	var argErr *ArgumentError
	if errors.As(err, &argErr) {
		return nil, argumentError(field+"."+argErr.Field, "%s", argErr.Problem)
	}
	zero := uint32(0)
	for _, name := range set.Zero {
		fields := map[string]**uint32{"min_size": &chunking.MinSize, "avg_size": &chunking.AvgSize,
			"max_size": &chunking.MaxSize, "seq_length": &chunking.SeqLength,
			"skip_trigger": &chunking.SkipTrigger, "skip_size": &chunking.SkipSize}
		switch f, ok := fields[name]; {
		case ok:
			*f = &zero
		case name == "polynomial":
			chunking.Polynomial = new(uint64)
		case name != "seed": // seed 0 is sent as its default
			return nil, argumentError(field+".Zero", "unknown field %q (%s)", name,
				"min_size, avg_size, max_size, seed, seq_length, skip_trigger, skip_size, polynomial")
		}
	}
	return chunking, nil
}

// paramsFromProto is the Params of c (every field the server set).
func paramsFromProto(c *pb.ChunkingParams) Params {
	if c == nil {
		c = &pb.ChunkingParams{}
	}
	p := Params{Algorithm: c.GetAlgorithm().String(), MinSize: c.GetMinSize(), AvgSize: c.GetAvgSize(),
		MaxSize: c.GetMaxSize(), NormalizationLevel: c.NormalizationLevel, Seed: c.GetSeed(),
		SeqLength: c.GetSeqLength(), SkipTrigger: c.GetSkipTrigger(), SkipSize: c.GetSkipSize(),
		HorizonSize: c.HorizonSize, Polynomial: c.GetPolynomial()}
	for name, value := range algorithms {
		if value == c.GetAlgorithm() && name != "" {
			p.Algorithm = name
		}
	}
	for name, value := range seqModes {
		if value == c.GetSeqMode() && name != "" {
			p.SeqMode = name
		}
	}
	return p
}

// parameters are the values of the parameters p's algorithm takes, in the
// table's order, by their proto names: integers, seq_mode by its name.
func (p Params) parameters() ([]string, []any) {
	algorithm, _ := tables.AlgorithmNamed(p.Algorithm)
	var names []string
	var values []any
	deref := func(v *uint32) uint32 {
		if v == nil {
			return 0
		}
		return *v
	}
	for _, name := range algorithm.Parameters {
		byName := map[string]any{"min_size": p.MinSize, "avg_size": p.AvgSize, "max_size": p.MaxSize,
			"normalization_level": deref(p.NormalizationLevel), "seed": p.Seed, "seq_mode": p.SeqMode,
			"seq_length": p.SeqLength, "skip_trigger": p.SkipTrigger, "skip_size": p.SkipSize,
			"horizon_size": deref(p.HorizonSize), "polynomial": p.Polynomial}
		names, values = append(names, name), append(values, byName[name])
	}
	return names, values
}
