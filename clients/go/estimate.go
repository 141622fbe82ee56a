// Estimate: how a data set would deduplicate under several parameter sets
// (docs/clients.md, "The Go module"; docs/estimate.md).

package chunkd

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"sort"
	"time"

	pb "github.com/chunkd/chunkd/clients/go/chunkdpb"
)

// MaxSampleRate is the largest EstimateOptions.SampleRate.
const MaxSampleRate = 1 << 20

// EstimateOptions are the optional fields of an Estimate.
type EstimateOptions struct {
	// SampleRate keeps 1 in SampleRate distinct chunks (consistent sampling
	// on the fingerprint); 0 or 1: exact; at most MaxSampleRate.
	SampleRate uint32
	// Namespace (optional) is compared with, read only: each set's result
	// says how much of it the namespace already holds.
	Namespace string
	// Fingerprint is "xxh128" or "sha256"; "": xxh128, and sha256 with a
	// Namespace.
	Fingerprint string
	// MessageSize is the number of input bytes per data message; 0:
	// DefaultMessageSize.
	MessageSize int
	// Timeout (0: none) is the deadline of the call.
	Timeout time.Duration
	// OnProgress (optional) is called with each progress message of the
	// server, on the goroutine that called Estimate.
	OnProgress func(EstimateProgress)
}

// EstimateProgress is how far the server has read the data set.
type EstimateProgress struct {
	// Bytes received and cut so far, and files ended so far.
	Bytes, Files uint64
}

// SizeBucket counts the chunks whose length is in [LowerBound,
// 2 × LowerBound), LowerBound a power of two.
type SizeBucket struct {
	LowerBound, Chunks, Bytes uint64
}

// IndexCost is what an index of a set's unique chunks would take in one
// index backend.
type IndexCost struct {
	// Backend is "memory", "rocksdb" or "redis"; Medium "memory" or "disk".
	Backend, Medium string
	// Entries (the set's unique chunks) and the bytes they take.
	Entries, Bytes uint64
}

// SetEstimate is the estimate of one parameter set; the fields mean what
// SetEstimate's in proto/chunkd/v1/chunkd.proto say.
type SetEstimate struct {
	Label string
	// Params is the chunking as run, every default filled in.
	Params                                   Params
	Bytes, Chunks, UniqueChunks, UniqueBytes uint64
	DedupRatio                               float64
	Histogram                                []SizeBucket
	MeanChunkSize                            float64
	MinChunkSize, P50ChunkSize, P90ChunkSize uint32
	P99ChunkSize, MaxChunkSize               uint32
	Sampled                                  bool
	SampledUniqueChunks                      uint64
	RatioLow, RatioHigh                      float64
	NamespaceBytes, NamespaceChunks          *uint64
	IndexCosts                               []IndexCost
}

// Interval returns the 95 % confidence interval of DedupRatio, and false
// when there is none (exact, or fewer than two distinct chunks sampled).
func (s *SetEstimate) Interval() (low, high float64, ok bool) {
	return s.RatioLow, s.RatioHigh, s.RatioLow > 0
}

// EstimateResult is the answer of an Estimate.
type EstimateResult struct {
	// Sets are the results of the parameter sets, in their order.
	Sets []SetEstimate
	// TotalBytes and Files of the data set (an empty input has no file).
	TotalBytes, Files uint64
	// SampleRate used: 1 when exact.
	SampleRate uint32
	// Fingerprint used: "xxh128" or "sha256".
	Fingerprint string
}

// Estimate sends files, the files of one data set in order, to the server,
// which cuts each of them with every set and answers how the data set
// would deduplicate (docs/estimate.md); nothing is written to any index.
// Bad sets or options are an *ArgumentError before any call; a bad
// parameter the server finds is INVALID_ARGUMENT naming the set; other
// failures are the call's gRPC errors (ReasonOf tells STREAM_MEMORY, ...
// apart) or the error reading a file. A result whose TotalBytes is not
// the number of bytes sent is DATA_LOSS. When Estimate returns early (an
// error) while a reader is blocked in Read, that Read is the last.
func (c *Client) Estimate(ctx context.Context, sets []EstimateSet, opts EstimateOptions, files ...io.Reader) (*EstimateResult, error) {
	return c.estimate(ctx, sets, opts, len(files), func(i int) (io.Reader, func(), error) {
		return files[i], func() {}, nil
	})
}

// EstimatePaths is Estimate over files named by paths, opened one at a
// time: a file, "-" for standard input, or a directory, whose files
// (regular files, found recursively; symbolic links to files followed,
// to directories not) are files of the data set in sorted path order
// (ExpandPaths).
func (c *Client) EstimatePaths(ctx context.Context, sets []EstimateSet, opts EstimateOptions, paths ...string) (*EstimateResult, error) {
	names, err := ExpandPaths(paths...)
	if err != nil {
		return nil, err
	}
	return c.estimate(ctx, sets, opts, len(names), func(i int) (io.Reader, func(), error) {
		if names[i] == "-" {
			return os.Stdin, func() {}, nil
		}
		f, err := os.Open(names[i])
		if err != nil {
			return nil, nil, err
		}
		return f, func() { f.Close() }, nil
	})
}

// ExpandPaths lists the files of a data set given as paths: each path
// itself, or for a directory the regular files below it in sorted path
// order; "-" (standard input) is kept.
func ExpandPaths(paths ...string) ([]string, error) {
	var names []string
	for _, path := range paths {
		info, err := os.Stat(path)
		if path == "-" || (err == nil && !info.IsDir()) {
			names = append(names, path)
			continue
		}
		if err != nil {
			return nil, err
		}
		// WalkDir does not descend into a root that is a symbolic link:
		// walk what it points at, keeping the names under path.
		root, err := filepath.EvalSymlinks(path)
		if err != nil {
			return nil, err
		}
		var found []string
		err = filepath.WalkDir(root, func(name string, d os.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if info, statErr := os.Stat(name); !d.IsDir() && statErr == nil && info.Mode().IsRegular() {
				rel, relErr := filepath.Rel(root, name)
				if relErr != nil {
					return relErr
				}
				found = append(found, filepath.Join(path, rel))
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
		sort.Strings(found)
		names = append(names, found...)
	}
	return names, nil
}

func (c *Client) estimate(ctx context.Context, sets []EstimateSet, opts EstimateOptions, n int,
	open func(int) (io.Reader, func(), error)) (*EstimateResult, error) {
	params, err := estimateParams(sets, opts)
	if err != nil {
		return nil, err
	}
	size := opts.MessageSize
	if size == 0 {
		size = DefaultMessageSize
	}
	if opts.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, opts.Timeout)
		defer cancel()
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, err := c.stub.Estimate(ctx)
	if err != nil {
		return nil, err
	}
	s := newSender()
	go s.runFiles(n, open, size, func(data []byte, first, endOfFile bool) error {
		req := &pb.EstimateRequest{Data: data, EndOfFile: endOfFile}
		if first {
			req.Params = params
		}
		return stream.Send(req)
	}, stream.CloseSend, cancel)
	// Not waiting for the sender: a reader blocked in Read cannot be
	// interrupted; the sender stops at its next message (the call is over).
	return receiveEstimate(stream.Recv, s, opts.OnProgress)
}

// receiveEstimate reads the responses: progress, then the result, then the
// stream's end.
func receiveEstimate(recv func() (*pb.EstimateResponse, error), s *sender, onProgress func(EstimateProgress)) (*EstimateResult, error) {
	var result *pb.EstimateResult
	for {
		resp, err := recv()
		if err == io.EOF {
			break
		}
		if err != nil {
			if readErr := s.readError(); readErr != nil {
				return nil, readErr
			}
			return nil, err
		}
		switch {
		case result != nil:
			return nil, protocolError("a response after the result")
		case resp.GetResult() != nil:
			result = resp.GetResult()
		case resp.GetProgress() != nil:
			if onProgress != nil {
				onProgress(EstimateProgress{resp.GetProgress().GetBytes(), resp.GetProgress().GetFiles()})
			}
		default:
			return nil, protocolError("a response without a body")
		}
	}
	sent, complete := s.progress()
	if err := checkTotal("result", result != nil, result.GetTotalBytes(), sent, complete); err != nil {
		return nil, err
	}
	return estimateResult(result), nil
}

// estimateParams translates the sets and options; a bad one is an
// *ArgumentError naming it.
func estimateParams(sets []EstimateSet, opts EstimateOptions) (*pb.EstimateParams, error) {
	if len(sets) == 0 || len(sets) > MaxEstimateSets {
		return nil, argumentError("sets", "give 1 to %d parameter sets, got %d", MaxEstimateSets, len(sets))
	}
	if opts.SampleRate > MaxSampleRate {
		return nil, argumentError("EstimateOptions.SampleRate", "must be in 0..%d, got %d", MaxSampleRate, opts.SampleRate)
	}
	if opts.MessageSize < 0 {
		return nil, argumentError("EstimateOptions.MessageSize", "must not be negative, got %d", opts.MessageSize)
	}
	if opts.Timeout < 0 {
		return nil, argumentError("EstimateOptions.Timeout", "must not be negative, got %v", opts.Timeout)
	}
	params := &pb.EstimateParams{SampleRate: opts.SampleRate, Namespace: opts.Namespace}
	switch opts.Fingerprint {
	case "":
	case "xxh128", "sha256":
		params.Fingerprint = fingerprintNames[opts.Fingerprint]
	default:
		return nil, argumentError("EstimateOptions.Fingerprint", "unknown name %q (xxh128, sha256)", opts.Fingerprint)
	}
	for i, set := range sets {
		chunking, err := set.proto(i)
		if err != nil {
			return nil, err
		}
		params.Sets = append(params.Sets, &pb.EstimateSet{Label: set.Label, Chunking: chunking})
	}
	return params, nil
}

// estimateResult converts the server's result.
func estimateResult(r *pb.EstimateResult) *EstimateResult {
	out := &EstimateResult{TotalBytes: r.GetTotalBytes(), Files: r.GetFiles(), SampleRate: r.GetSampleRate(),
		Fingerprint: fingerprintName(r.GetFingerprint())}
	for _, s := range r.GetSets() {
		set := SetEstimate{Label: s.GetLabel(), Params: paramsFromProto(s.GetChunking()),
			Bytes: s.GetBytes(), Chunks: s.GetChunks(), UniqueChunks: s.GetUniqueChunks(),
			UniqueBytes: s.GetUniqueBytes(), DedupRatio: s.GetDedupRatio(), MeanChunkSize: s.GetMeanChunkSize(),
			MinChunkSize: s.GetMinChunkSize(), P50ChunkSize: s.GetP50ChunkSize(), P90ChunkSize: s.GetP90ChunkSize(),
			P99ChunkSize: s.GetP99ChunkSize(), MaxChunkSize: s.GetMaxChunkSize(), Sampled: s.GetSampled(),
			SampledUniqueChunks: s.GetSampledUniqueChunks(), RatioLow: s.GetRatioLow(), RatioHigh: s.GetRatioHigh(),
			NamespaceBytes: s.NamespaceBytes, NamespaceChunks: s.NamespaceChunks}
		for _, b := range s.GetHistogram() {
			set.Histogram = append(set.Histogram, SizeBucket{b.GetLowerBound(), b.GetChunks(), b.GetBytes()})
		}
		for _, c := range s.GetIndexCosts() {
			set.IndexCosts = append(set.IndexCosts, IndexCost{c.GetBackend(), c.GetMedium(), c.GetEntries(), c.GetBytes()})
		}
		out.Sets = append(out.Sets, set)
	}
	return out
}
