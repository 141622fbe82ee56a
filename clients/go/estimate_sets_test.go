package chunkd

import (
	"errors"
	"reflect"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

func TestParseSet(t *testing.T) {
	for _, c := range []struct {
		spec string
		want Params
		zero []string
	}{
		{"fastcdc", Params{Algorithm: "fastcdc"}, nil},
		{"fastcdc:min=4096,avg=16384,max=65536", Params{Algorithm: "fastcdc", MinSize: 4096, AvgSize: 16384, MaxSize: 65536}, nil},
		{"fastcdc:level=0,seed=0x10", Params{Algorithm: "fastcdc", NormalizationLevel: Level(0), Seed: 16}, nil},
		{"fixed:avg=8192", Params{Algorithm: "fixed", AvgSize: 8192}, nil},
		// Decimal with a leading zero, as chunkctl reads it (not octal).
		{"fixed:avg=010", Params{Algorithm: "fixed", AvgSize: 10}, nil},
		{"repmaxcdc:min=262144,horizon=2097152", Params{Algorithm: "repmaxcdc", MinSize: 262144, HorizonSize: Horizon(2097152)}, nil},
		{"repmaxcdc:horizon=0", Params{Algorithm: "repmaxcdc", HorizonSize: Horizon(0)}, nil},
		{"rabin:polynomial=0x3DA3358B4DC173", Params{Algorithm: "rabin", Polynomial: 0x3DA3358B4DC173}, nil},
		{"seqcdc:preset=seqcdc-16k", Params{Algorithm: "seqcdc", MinSize: 8192, MaxSize: 32768, SeqMode: "increasing",
			SeqLength: 5, SkipTrigger: 50, SkipSize: 512}, nil},
		// Explicit keys override the preset's values, before or after it.
		{"seqcdc:skip-size=0,preset=seqcdc-8k,seq-mode=decreasing", Params{Algorithm: "seqcdc", MinSize: 4096, MaxSize: 16384,
			SeqMode: "decreasing", SeqLength: 5, SkipTrigger: 50}, []string{"skip_size"}},
		{"fastcdc:min=0,preset=fastcdc-reapi", Params{Algorithm: "fastcdc", AvgSize: 524288, MaxSize: 2097152,
			NormalizationLevel: Level(2)}, []string{"min_size", "seed"}},
	} {
		set, err := ParseSet(c.spec)
		if err != nil {
			t.Errorf("ParseSet(%q): %v", c.spec, err)
			continue
		}
		if set.Label != c.spec || !reflect.DeepEqual(set.Params, c.want) || !reflect.DeepEqual(set.Zero, c.zero) {
			t.Errorf("ParseSet(%q) = %+v; want label %q, params %+v, zero %q", c.spec, set, c.spec, c.want, c.zero)
		}
	}
}

func TestParseSetErrors(t *testing.T) {
	for spec, problem := range map[string]string{
		"":                          `unknown algorithm "" (fastcdc, crc32, seqcdc, fixed, repmaxcdc, rabin, buzhash)`,
		"fastcd:min=4096":           `unknown algorithm "fastcd" (fastcdc, crc32, seqcdc, fixed, repmaxcdc, rabin, buzhash)`,
		"fastcdc:":                  `expected KEY=VALUE, got ""`,
		"fastcdc:min":               `expected KEY=VALUE, got "min"`,
		"fastcdc:min=4096,":         `expected KEY=VALUE, got ""`,
		"fastcdc:=4096":             `expected KEY=VALUE, got "=4096"`,
		"fastcdc:size=4096":         `unknown key "size" (keys: preset, min, avg, max, level, seed, seq-mode, seq-length, skip-trigger, skip-size, horizon, polynomial)`,
		"fixed:min=4096":            `min is not a parameter of fixed (it takes avg)`,
		"crc32:level=2":             `level is not a parameter of crc32 (it takes min, avg, max)`,
		"fastcdc:min=4096,min=8192": `min given twice`,
		"seqcdc:preset=seqcdc-8k,preset=seqcdc-16k": `preset given twice`,
		"fastcdc:min=4k":         `min=4k: expected an integer from 0 to 4294967295`,
		"fastcdc:max=4294967296": `max=4294967296: expected an integer from 0 to 4294967295`,
		"fastcdc:seed=-1":        `seed=-1: expected an integer from 0 to 18446744073709551615`,
		"seqcdc:seq-mode=up":     `seq-mode=up: expected increasing or decreasing`,
		// The names and the integers exactly as chunkctl's flags take them.
		"seqcdc:seq-mode=Decreasing": `seq-mode=Decreasing: expected increasing or decreasing`,
		"fastcdc:min=0b101":          `min=0b101: expected an integer from 0 to 4294967295`,
		"fastcdc:min=0o17":           `min=0o17: expected an integer from 0 to 4294967295`,
		"fastcdc:min=1_000":          `min=1_000: expected an integer from 0 to 4294967295`,
		"fastcdc:min=+5":             `min=+5: expected an integer from 0 to 4294967295`,
		"fastcdc:preset=seqcdc-16k":  `preset seqcdc-16k is a seqcdc preset, not fastcdc`,
		"seqcdc:preset=seqcdc-4k":    `unknown preset "seqcdc-4k" (seqcdc presets: seqcdc-8k, seqcdc-16k)`,
		"crc32:preset=x":             `unknown preset "x" (crc32 presets: none)`,
	} {
		_, err := ParseSet(spec)
		var argErr *ArgumentError
		if !errors.As(err, &argErr) || argErr.Field != `set "`+spec+`"` || argErr.Problem != problem ||
			status.Code(err) != codes.InvalidArgument {
			t.Errorf("ParseSet(%q): %v; want an *ArgumentError %q", spec, err, problem)
		}
	}
}

// TestEstimateArgumentErrors: bad sets and options are refused before any
// call (the client's address has no server).
func TestEstimateArgumentErrors(t *testing.T) {
	c := dial(t, freePort(t))
	set, err := ParseSet("fastcdc")
	if err != nil {
		t.Fatal(err)
	}
	many := make([]EstimateSet, MaxEstimateSets+1)
	for i := range many {
		many[i] = set
	}
	withFingerprint := set
	withFingerprint.Params.Fingerprint = "sha256"
	for _, c2 := range []struct {
		sets  []EstimateSet
		opts  EstimateOptions
		field string
	}{
		{nil, EstimateOptions{}, "sets"},
		{many, EstimateOptions{}, "sets"},
		{[]EstimateSet{set}, EstimateOptions{SampleRate: MaxSampleRate + 1}, "EstimateOptions.SampleRate"},
		{[]EstimateSet{set}, EstimateOptions{Fingerprint: "none"}, "EstimateOptions.Fingerprint"},
		{[]EstimateSet{set}, EstimateOptions{MessageSize: -1}, "EstimateOptions.MessageSize"},
		{[]EstimateSet{set, withFingerprint}, EstimateOptions{}, "sets[1].Params"},
		{[]EstimateSet{set, {Params: Params{Algorithm: "nope"}}}, EstimateOptions{}, "sets[1].Params.Algorithm"},
		{[]EstimateSet{{Params: Params{Algorithm: "seqcdc"}, Zero: []string{"level"}}}, EstimateOptions{}, "sets[0].Zero"},
	} {
		_, err := c.Estimate(testContext(t), c2.sets, c2.opts)
		var argErr *ArgumentError
		if !errors.As(err, &argErr) || argErr.Field != c2.field {
			t.Errorf("Estimate(%d sets, %+v): %v; want an *ArgumentError of %s", len(c2.sets), c2.opts, err, c2.field)
		}
	}
}

// TestSetZeroIsSent: a key given as 0 is sent as 0, not left unset.
func TestSetZeroIsSent(t *testing.T) {
	set, err := ParseSet("seqcdc:skip-size=0,min=0")
	if err != nil {
		t.Fatal(err)
	}
	chunking, err := set.proto(0)
	if err != nil {
		t.Fatal(err)
	}
	if chunking.SkipSize == nil || *chunking.SkipSize != 0 || chunking.MinSize == nil || *chunking.MinSize != 0 ||
		chunking.MaxSize != nil {
		t.Errorf("seqcdc:skip-size=0,min=0 is sent as %v", chunking)
	}
}
