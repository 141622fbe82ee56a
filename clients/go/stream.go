// The records and summaries of the Chunk and Dedup streams, and the calls
// that start them (Client.Chunk, Client.Dedup).

package chunkd

import (
	"context"
	"io"

	"google.golang.org/grpc"

	pb "github.com/chunkd/chunkd/clients/go/chunkdpb"
)

// Chunk is one chunk: bytes [Offset, Offset+Length) of the stream and their
// fingerprint (32 bytes for sha256, 16 for xxh128, empty for none).
type Chunk struct {
	Offset      uint64
	Length      uint32
	Fingerprint []byte
}

// DedupChunk is a chunk of a Dedup stream; IsNew is true when this stream
// added its fingerprint to the namespace, false for a duplicate.
type DedupChunk struct {
	Chunk
	IsNew bool
}

// Summary holds the totals of a finished Chunk stream.
type Summary struct {
	TotalBytes, TotalChunks uint64
}

// DedupSummary holds the totals of a finished Dedup stream, with what the
// RapidCDC next-chunk hints (Params.Hints) did: HintsTried hints tested,
// HintsAccepted taken as the next chunk without scanning, HintsRejected cut
// normally instead, and HintSkippedBytes the bytes of accepted hinted chunks
// (bytes the chunker did not scan). All four are 0 with hints off.
type DedupSummary struct {
	TotalBytes, TotalChunks, UniqueBytes, UniqueChunks         uint64
	HintsTried, HintsAccepted, HintsRejected, HintSkippedBytes uint64
}

// Chunk streams r to the server and returns an iterator over its chunks.
// The error is for bad Params (an *ArgumentError) or a call that could not
// start; failures of the call come from Err.
func (c *Client) Chunk(ctx context.Context, r io.Reader, p Params) (*ChunkIterator, error) {
	chunking, fp, size, err := p.proto()
	if err != nil {
		return nil, err
	}
	params := &pb.ChunkParams{Chunking: chunking, Fingerprint: fp}
	open := func() (*attempt[Chunk, Summary], error) {
		return openStream(ctx, p.Timeout, r, size,
			func(ctx context.Context) (grpc.BidiStreamingClient[pb.ChunkRequest, pb.ChunkResponse], error) {
				return c.stub.Chunk(ctx)
			},
			func(data []byte, first bool) *pb.ChunkRequest {
				req := &pb.ChunkRequest{Data: data}
				if first {
					req.Params = params
				}
				return req
			},
			chunkResponse)
	}
	var replays *replayer[Chunk, Summary]
	if p.Retries > 0 {
		if replays, err = newReplayer[Chunk, Summary](c, ctx, p, r); err != nil {
			return nil, err
		}
	}
	return startIterator(replays, open, func(s *Summary) (uint64, uint64) { return s.TotalBytes, s.TotalChunks },
		func(ch Chunk) recordKey { return recordKey{ch.Offset, ch.Length, ch.Fingerprint} })
}

func chunkResponse(resp *pb.ChunkResponse) ([]Chunk, *Summary, error) {
	if sum := resp.GetSummary(); sum != nil {
		return nil, &Summary{sum.GetTotalBytes(), sum.GetTotalChunks()}, nil
	}
	if resp.GetBatch() == nil {
		return nil, nil, protocolError("a response without a body")
	}
	records := make([]Chunk, 0, len(resp.GetBatch().GetChunks()))
	for _, r := range resp.GetBatch().GetChunks() {
		records = append(records, Chunk{r.GetOffset(), r.GetLength(), r.GetFingerprint()})
	}
	return records, nil, nil
}

// Dedup streams r to the server, which records its chunks in namespace's
// index; the iterator says per chunk whether it was new. Bad Params (an
// unknown Hints name, Retries with an r that cannot seek, ...) are an
// *ArgumentError before any call is made. With Params.Retries the stream
// carries Params.StreamID, or a random one when it is empty.
func (c *Client) Dedup(ctx context.Context, namespace string, r io.Reader, p Params) (*DedupIterator, error) {
	chunking, fp, size, err := p.proto()
	if err != nil {
		return nil, err
	}
	hints, err := hintTest(p.Hints)
	if err != nil {
		return nil, err
	}
	var replays *replayer[DedupChunk, DedupSummary]
	if p.Retries > 0 {
		if replays, err = newReplayer[DedupChunk, DedupSummary](c, ctx, p, r); err != nil {
			return nil, err
		}
		if p.StreamID == "" {
			p.StreamID = randomID()
		}
	}
	params := &pb.DedupParams{Chunking: chunking, Fingerprint: fp, Namespace: namespace,
		StreamId: p.StreamID, Hints: hints}
	open := func() (*attempt[DedupChunk, DedupSummary], error) {
		return openStream(ctx, p.Timeout, r, size,
			func(ctx context.Context) (grpc.BidiStreamingClient[pb.DedupRequest, pb.DedupResponse], error) {
				return c.stub.Dedup(ctx)
			},
			func(data []byte, first bool) *pb.DedupRequest {
				req := &pb.DedupRequest{Data: data}
				if first {
					req.Params = params
				}
				return req
			},
			dedupResponse)
	}
	return startIterator(replays, open,
		func(s *DedupSummary) (uint64, uint64) { return s.TotalBytes, s.TotalChunks },
		func(ch DedupChunk) recordKey { return recordKey{ch.Offset, ch.Length, ch.Fingerprint} })
}

func dedupResponse(resp *pb.DedupResponse) ([]DedupChunk, *DedupSummary, error) {
	if sum := resp.GetSummary(); sum != nil {
		return nil, &DedupSummary{sum.GetTotalBytes(), sum.GetTotalChunks(),
			sum.GetUniqueBytes(), sum.GetUniqueChunks(), sum.GetHintsTried(),
			sum.GetHintsAccepted(), sum.GetHintsRejected(), sum.GetHintSkippedBytes()}, nil
	}
	if resp.GetBatch() == nil {
		return nil, nil, protocolError("a response without a body")
	}
	records := make([]DedupChunk, 0, len(resp.GetBatch().GetChunks()))
	for _, r := range resp.GetBatch().GetChunks() {
		records = append(records, DedupChunk{
			Chunk{r.GetOffset(), r.GetLength(), r.GetFingerprint()}, r.GetIsNew()})
	}
	return records, nil, nil
}
