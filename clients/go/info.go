package chunkd

import (
	"context"
	"strings"

	pb "github.com/chunkd/chunkd/clients/go/chunkdpb"
)

// ServerInfo is what a server says about itself (GetServerInfo). Its JSON
// form (encoding/json) is the `info --json` object of docs/cli.md.
type ServerInfo struct {
	// Version is chunkd's release, e.g. "0.4.0".
	Version string `json:"version"`
	// ChunkingBackend is the stage-1 kernel forced for every algorithm
	// ("scalar", "avx2", "avx512"), or "auto" when each algorithm runs the
	// one its start-up calibration found fastest (AlgorithmInfo.Backend).
	ChunkingBackend string `json:"chunking_backend"`
	// IndexBackend is the fingerprint index: "memory", "rocksdb", "redis"
	// or "redis-cluster".
	IndexBackend string `json:"index_backend"`
	// MaxMessageBytes is the largest data message the server accepts
	// (Params.MessageSize must not exceed it).
	MaxMessageBytes uint64 `json:"max_message_bytes"`
	// MaxInflightBytes is the most bytes of one stream the server holds.
	MaxInflightBytes uint64 `json:"max_inflight_bytes"`
	// Fingerprints are the Params.Fingerprint names offered: "sha256",
	// "xxh128", "none".
	Fingerprints []string `json:"fingerprints"`
	// Algorithms are the algorithms offered, in the server's order.
	Algorithms []AlgorithmInfo `json:"algorithms"`
}

// AlgorithmInfo is what one algorithm accepts: the ranges and defaults of
// its Params fields, and the kernel its streams run.
type AlgorithmInfo struct {
	// Name is the Params.Algorithm name: "fastcdc", "crc32", ...
	Name string `json:"name"`
	// Backend is the stage-1 kernel ("scalar", "avx2", "avx512") its streams
	// run on BackendThreads threads. It never changes the chunks.
	Backend        string `json:"backend"`
	BackendThreads uint32 `json:"backend_threads"`
	// MinSize, AvgSize and MaxSize are the ranges of the size fields; the
	// zero Range for a size the algorithm does not take.
	MinSize Range `json:"min_size"`
	AvgSize Range `json:"avg_size"`
	MaxSize Range `json:"max_size"`
	// AvgSizePowerOfTwo: AvgSize must be a power of two.
	AvgSizePowerOfTwo bool `json:"avg_size_power_of_two"`
	// NormalizationLevel (fastcdc), HorizonSize (repmaxcdc) and Polynomial
	// (rabin, degree 53; it must also be irreducible) are nil for the
	// algorithms that do not take them.
	NormalizationLevel *Range `json:"normalization_level"`
	HorizonSize        *Range `json:"horizon_size"`
	Polynomial         *Range `json:"polynomial"`
}

// Range is the allowed values [Min, Max] of a parameter and the value it
// takes when left unset.
type Range struct {
	Min     uint64 `json:"min"`
	Max     uint64 `json:"max"`
	Default uint64 `json:"default"`
}

// ServerInfo returns the server's version, algorithms with their parameter
// ranges and defaults, backends and limits.
func (c *Client) ServerInfo(ctx context.Context) (*ServerInfo, error) {
	resp, err := c.stub.GetServerInfo(ctx, &pb.GetServerInfoRequest{})
	if err != nil {
		return nil, err
	}
	info := &ServerInfo{
		Version:          resp.GetVersion(),
		ChunkingBackend:  resp.GetChunkingBackend(),
		IndexBackend:     resp.GetIndexBackend(),
		MaxMessageBytes:  resp.GetMaxMessageBytes(),
		MaxInflightBytes: resp.GetMaxInflightBytes(),
		Fingerprints:     []string{},
		Algorithms:       []AlgorithmInfo{},
	}
	for _, fp := range resp.GetFingerprints() {
		info.Fingerprints = append(info.Fingerprints, fingerprintName(fp))
	}
	for _, a := range resp.GetAlgorithms() {
		info.Algorithms = append(info.Algorithms, AlgorithmInfo{
			Name:               a.GetName(),
			Backend:            a.GetBackend(),
			BackendThreads:     a.GetBackendThreads(),
			MinSize:            toRange(a.GetMinSize()),
			AvgSize:            toRange(a.GetAvgSize()),
			MaxSize:            toRange(a.GetMaxSize()),
			AvgSizePowerOfTwo:  a.GetAvgSizePowerOfTwo(),
			NormalizationLevel: optionalRange(a.GetNormalizationLevel()),
			HorizonSize:        optionalRange(a.GetHorizonSize()),
			Polynomial:         optionalRange(a.GetPolynomial()),
		})
	}
	return info, nil
}

func toRange(r *pb.ParamRange) Range {
	return Range{Min: r.GetMin(), Max: r.GetMax(), Default: r.GetDefaultValue()}
}

// optionalRange is nil for a range the server leaves out or sends empty:
// a parameter the algorithm does not take.
func optionalRange(r *pb.ParamRange) *Range {
	v := toRange(r)
	if v == (Range{}) {
		return nil
	}
	return &v
}

// fingerprintName is the Params.Fingerprint name of fp ("sha256"); the
// proto's name in lower case without its prefix for a value this client
// does not know.
func fingerprintName(fp pb.FingerprintAlgorithm) string {
	for name, v := range fingerprintNames {
		if v == fp && name != "" {
			return name
		}
	}
	return strings.ToLower(strings.TrimPrefix(fp.String(), "FINGERPRINT_ALGORITHM_"))
}
