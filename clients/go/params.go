package chunkd

import (
	"strconv"
	"strings"
	"time"

	pb "github.com/chunkd/chunkd/clients/go/chunkdpb"
	"github.com/chunkd/chunkd/clients/go/internal/tables"
)

// MaxRetries is the largest Params.Retries (the limit of chunkctl's
// --retries too).
const MaxRetries = 100

// DefaultMessageSize is the size of a data message when Params.MessageSize is
// zero (the server accepts 4 MiB by default).
const DefaultMessageSize = 1 << 20

// Params are the chunking parameters of a Chunk or Dedup stream. A zero
// field is not sent, so the server uses the algorithm's default (see
// ServerInfo); every field the caller sets is sent as it is, and the server
// validates it. Each algorithm takes only some of the fields (ServerInfo
// lists their ranges; e.g. fastcdc MinSize, AvgSize, MaxSize,
// NormalizationLevel and Seed, fixed only AvgSize), and the server refuses
// another one set with INVALID_ARGUMENT naming it:
// "chunking.normalization_level is not a parameter of crc32 (it takes
// min_size, avg_size, max_size); leave normalization_level unset".
type Params struct {
	// Algorithm is the name of one of chunkd's algorithms (ServerInfo lists
	// them): "fastcdc" (also for ""), "crc32", "seqcdc", ...
	Algorithm string
	// Chunk sizes in bytes; 0: the algorithm's default. seqcdc takes no
	// AvgSize, fixed only AvgSize (the size of every chunk but the last).
	MinSize, AvgSize, MaxSize uint32
	// NormalizationLevel is fastcdc's level 0..3; nil: the default (1).
	NormalizationLevel *uint32
	// Seed of fastcdc's Gear table (0: the standard table).
	Seed uint64
	// SeqMode is seqcdc's "increasing" or "decreasing"; "": the default
	// (increasing).
	SeqMode string
	// SeqLength, SkipTrigger, SkipSize: seqcdc's parameters; 0: defaults.
	SeqLength, SkipTrigger, SkipSize uint32
	// HorizonSize is repmaxcdc's horizon in bytes past MinSize (0 gives
	// chunks of MinSize); nil: the default (2 MiB).
	HorizonSize *uint32
	// Polynomial is rabin's irreducible polynomial of degree 53 (a restic
	// repository's is in its config); 0: the default, restic's test
	// polynomial 0x3DA3358B4DC173.
	Polynomial uint64
	// Fingerprint is "sha256" (also for ""), "xxh128" or "none" (Chunk only).
	Fingerprint string
	// MessageSize is the number of input bytes per data message; 0:
	// DefaultMessageSize.
	MessageSize int
	// StreamID (Dedup only; 1..64 characters of [A-Za-z0-9._-], unique per
	// logical stream) makes a Dedup safe to retry: the same bytes sent again
	// with the same StreamID within 10 minutes count every reference once.
	StreamID string
	// Hints (Dedup only) picks the RapidCDC next-chunk hint test: "off",
	// "ff", "ff_mt", "ff_rwt" or "ff_rwt_fpt" (case-insensitive), or the
	// proto enum's name ("HINT_TEST_FF") or number ("2"). "" leaves the field
	// unset: the server then uses ff_rwt_fpt for fastcdc and off otherwise.
	// Any test but off with another algorithm is INVALID_ARGUMENT from the
	// server. Only off and ff_rwt_fpt are guaranteed to give the same
	// records as normal chunking; DedupSummary counts what the hints did.
	Hints string
	// Retries (0: none; at most MaxRetries) replays a Chunk or Dedup stream
	// that failed with UNAVAILABLE, ABORTED, RESOURCE_EXHAUSTED, INTERNAL,
	// CANCELLED that the caller did not cause (its context, Close), or
	// DEADLINE_EXCEEDED of Timeout, up to Retries more times: the input,
	// which must then be an io.ReadSeeker, is sought back to where it was
	// when Chunk or Dedup was called and sent again on a new stream. A Dedup with Retries carries
	// StreamID (a random one when it is ""), so that its reference counts
	// equal a single run's. Before replay k the client waits 0.1 s × 2^(k-1)
	// (at most 2 s), then until the connection is ready again (at most
	// 2^(k-1) s). Iterator says what the iteration yields across replays.
	Retries int
	// OnReplay (optional, with Retries) is called before each replay with
	// the error that ended the failed attempt and the backoff about to be
	// waited, on the goroutine that called Chunk, Dedup or Next (so it may
	// touch what that goroutine does; it delays the replay while it runs).
	// The command-line clients print their replay line from it.
	OnReplay func(err error, wait time.Duration)
	// Timeout (0: none) is the deadline of each call: each attempt of a
	// Chunk or Dedup stream (the context's deadline bounds them all). It
	// ends an attempt even while the input blocks (a pipe that stalls).
	Timeout time.Duration
}

// Level returns a pointer to level, for Params.NormalizationLevel.
func Level(level uint32) *uint32 { return &level }

// Horizon returns a pointer to size, for Params.HorizonSize.
func Horizon(size uint32) *uint32 { return &size }

// algorithms are chunkd's algorithms by name ("" is fastcdc), with their
// enum values, from the table (internal/tables); algorithmList names them.
var algorithms, algorithmList = func() (map[string]pb.Algorithm, string) {
	m := map[string]pb.Algorithm{"": pb.Algorithm_ALGORITHM_FASTCDC}
	names := make([]string, 0, len(tables.Algorithms))
	for _, a := range tables.Algorithms {
		m[a.Name] = pb.Algorithm(a.Value)
		names = append(names, a.Name)
	}
	return m, strings.Join(names, ", ")
}()

var fingerprintNames = map[string]pb.FingerprintAlgorithm{
	"":       pb.FingerprintAlgorithm_FINGERPRINT_ALGORITHM_SHA256,
	"sha256": pb.FingerprintAlgorithm_FINGERPRINT_ALGORITHM_SHA256,
	"xxh128": pb.FingerprintAlgorithm_FINGERPRINT_ALGORITHM_XXH128,
	"none":   pb.FingerprintAlgorithm_FINGERPRINT_ALGORITHM_NONE,
}

var seqModes = map[string]pb.SeqCdcMode{
	"":           pb.SeqCdcMode_SEQ_CDC_MODE_UNSPECIFIED,
	"increasing": pb.SeqCdcMode_SEQ_CDC_MODE_INCREASING,
	"decreasing": pb.SeqCdcMode_SEQ_CDC_MODE_DECREASING,
}

var hintNames = map[string]pb.HintTest{
	"":           pb.HintTest_HINT_TEST_UNSPECIFIED,
	"off":        pb.HintTest_HINT_TEST_OFF,
	"ff":         pb.HintTest_HINT_TEST_FF,
	"ff_mt":      pb.HintTest_HINT_TEST_FF_MT,
	"ff_rwt":     pb.HintTest_HINT_TEST_FF_RWT,
	"ff_rwt_fpt": pb.HintTest_HINT_TEST_FF_RWT_FPT,
}

// lookup finds key in names; an unknown key is an *ArgumentError naming the
// Params field, the value as the caller gave it and the valid names.
func lookup[T any](field, value, key string, names map[string]T, valid string) (T, error) {
	v, ok := names[key]
	if !ok {
		return v, argumentError("Params."+field, "unknown name %q (%s)", value, valid)
	}
	return v, nil
}

// hintTest translates Params.Hints: a name of hintNames in any case, or the
// proto enum's name or number (0, "HINT_TEST_UNSPECIFIED": the default).
func hintTest(value string) (pb.HintTest, error) {
	if n, err := strconv.ParseInt(value, 10, 32); err == nil {
		if _, ok := pb.HintTest_name[int32(n)]; ok {
			return pb.HintTest(n), nil
		}
	}
	key := strings.ToLower(value)
	if v, ok := pb.HintTest_value[strings.ToUpper(value)]; ok {
		return pb.HintTest(v), nil
	}
	return lookup("Hints", value, key, hintNames, "off, ff, ff_mt, ff_rwt, ff_rwt_fpt")
}

func optional(v uint32) *uint32 {
	if v == 0 {
		return nil
	}
	return &v
}

func optional64(v uint64) *uint64 {
	if v == 0 {
		return nil
	}
	return &v
}

// proto translates p; a bad field is an *ArgumentError naming it.
func (p Params) proto() (*pb.ChunkingParams, pb.FingerprintAlgorithm, int, error) {
	algorithm, err := lookup("Algorithm", p.Algorithm, p.Algorithm, algorithms, algorithmList)
	if err != nil {
		return nil, 0, 0, err
	}
	fingerprint, err := lookup("Fingerprint", p.Fingerprint, p.Fingerprint, fingerprintNames, "sha256, xxh128, none")
	if err != nil {
		return nil, 0, 0, err
	}
	mode, err := lookup("SeqMode", p.SeqMode, p.SeqMode, seqModes, "increasing, decreasing")
	if err != nil {
		return nil, 0, 0, err
	}
	size := p.MessageSize
	if size < 0 {
		return nil, 0, 0, argumentError("Params.MessageSize", "must not be negative, got %d", size)
	}
	if p.Retries < 0 || p.Retries > MaxRetries {
		return nil, 0, 0, argumentError("Params.Retries", "must be in 0..%d, got %d", MaxRetries, p.Retries)
	}
	if p.Timeout < 0 {
		return nil, 0, 0, argumentError("Params.Timeout", "must not be negative, got %v", p.Timeout)
	}
	if size == 0 {
		size = DefaultMessageSize
	}
	return &pb.ChunkingParams{
		Algorithm:          algorithm,
		MinSize:            optional(p.MinSize),
		AvgSize:            optional(p.AvgSize),
		MaxSize:            optional(p.MaxSize),
		NormalizationLevel: p.NormalizationLevel,
		Seed:               p.Seed,
		SeqMode:            mode,
		SeqLength:          optional(p.SeqLength),
		SkipTrigger:        optional(p.SkipTrigger),
		SkipSize:           optional(p.SkipSize),
		HorizonSize:        p.HorizonSize,
		Polynomial:         optional64(p.Polynomial),
	}, fingerprint, size, nil
}
