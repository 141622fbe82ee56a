package chunkd

import (
	"fmt"

	pb "github.com/chunkd/chunkd/clients/go/chunkdpb"
)

// DefaultMessageSize is the size of a data message when Params.MessageSize is
// zero (the server accepts 4 MiB by default).
const DefaultMessageSize = 1 << 20

// Params are the chunking parameters of a Chunk or Dedup stream. Zero values
// take the algorithm's defaults on the server (see ServerInfo), which also
// validates them.
type Params struct {
	// Algorithm is "fastcdc" (also for ""), "crc32", "seqcdc" or "fixed".
	Algorithm string
	// Chunk sizes in bytes; 0: the algorithm's default.
	MinSize, AvgSize, MaxSize uint32
	// NormalizationLevel is fastcdc's level 0..3; nil: the default (1).
	NormalizationLevel *uint32
	// Seed of fastcdc's Gear table (0: the standard table).
	Seed uint64
	// SeqMode is seqcdc's "increasing" (also for "") or "decreasing".
	SeqMode string
	// SeqLength, SkipTrigger, SkipSize: seqcdc's parameters; 0: defaults.
	SeqLength, SkipTrigger, SkipSize uint32
	// Fingerprint is "sha256" (also for ""), "xxh128" or "none" (Chunk only).
	Fingerprint string
	// MessageSize is the number of input bytes per data message; 0:
	// DefaultMessageSize.
	MessageSize int
	// StreamID (Dedup only; 1..64 characters of [A-Za-z0-9._-], unique per
	// logical stream) makes a Dedup safe to retry: the same bytes sent again
	// with the same StreamID within 10 minutes count every reference once.
	StreamID string
}

// Level returns a pointer to level, for Params.NormalizationLevel.
func Level(level uint32) *uint32 { return &level }

var algorithms = map[string]pb.Algorithm{
	"":        pb.Algorithm_ALGORITHM_FASTCDC,
	"fastcdc": pb.Algorithm_ALGORITHM_FASTCDC,
	"crc32":   pb.Algorithm_ALGORITHM_CRC32,
	"seqcdc":  pb.Algorithm_ALGORITHM_SEQCDC,
	"fixed":   pb.Algorithm_ALGORITHM_FIXED,
}

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

func optional(v uint32) *uint32 {
	if v == 0 {
		return nil
	}
	return &v
}

// proto translates p; an unknown name is an error naming the field.
func (p Params) proto() (*pb.ChunkingParams, pb.FingerprintAlgorithm, int, error) {
	algorithm, ok := algorithms[p.Algorithm]
	if !ok {
		return nil, 0, 0, fmt.Errorf("chunkd: unknown Algorithm %q (fastcdc, crc32, seqcdc, fixed)", p.Algorithm)
	}
	fingerprint, ok := fingerprintNames[p.Fingerprint]
	if !ok {
		return nil, 0, 0, fmt.Errorf("chunkd: unknown Fingerprint %q (sha256, xxh128, none)", p.Fingerprint)
	}
	mode, ok := seqModes[p.SeqMode]
	if !ok {
		return nil, 0, 0, fmt.Errorf("chunkd: unknown SeqMode %q (increasing, decreasing)", p.SeqMode)
	}
	size := p.MessageSize
	if size < 0 {
		return nil, 0, 0, fmt.Errorf("chunkd: MessageSize must not be negative, got %d", size)
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
	}, fingerprint, size, nil
}
