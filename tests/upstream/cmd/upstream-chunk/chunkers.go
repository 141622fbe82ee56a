package main

import (
	"bufio"
	"fmt"
	"io"
	"math/bits"

	cdc "github.com/buildbarn/go-cdc"
	"github.com/folbricht/desync"
	"github.com/restic/chunker"
)

// readBufferSize is the least buffer the go-cdc reader gets: what its own
// tools use, so that refills (which copy the retained tail) stay rare.
const readBufferSize = 16 << 20

// chunkStream cuts r with the upstream chunker of p.algorithm, calling emit
// with each chunk's length in order.
func chunkStream(p params, r io.Reader, emit func(length int)) error {
	switch p.algorithm {
	case "repmaxcdc":
		return chunkRepMaxCdc(p, r, emit)
	case "rabin":
		return chunkRabin(p, r, emit)
	case "buzhash":
		return chunkBuzhash(p, r, emit)
	}
	return fmt.Errorf("unknown algorithm %q", p.algorithm)
}

// chunkRepMaxCdc: go-cdc peeks up to GetMaximumPeekSizeBytes() bytes, so the
// bufio.Reader it reads through must hold at least that many.
func chunkRepMaxCdc(p params, r io.Reader, emit func(int)) error {
	c := cdc.NewRepMaxContentDefinedChunker(
		&cdc.FastContentDefinedChunkerGearTable, p.min, p.horizon)
	size := max(c.GetMaximumPeekSizeBytes(), readBufferSize)
	reader := c.NewChunkReader(bufio.NewReaderSize(r, size))
	for {
		chunk, err := reader.ReadNextChunk()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		emit(len(chunk))
	}
}

// chunkRabin: restic's chunker with chunkd's min, max and polynomial and an
// average of 2^bits (SetAverageBits takes the exponent).
func chunkRabin(p params, r io.Reader, emit func(int)) error {
	c := chunker.NewWithBoundaries(r, chunker.Pol(p.polynomial), uint(p.min), uint(p.max))
	c.SetAverageBits(bits.TrailingZeros(uint(p.avg)))
	buf := make([]byte, p.max)
	for {
		chunk, err := c.Next(buf)
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		emit(int(chunk.Length))
	}
}

// chunkBuzhash: desync's chunker; an empty chunk means the end.
func chunkBuzhash(p params, r io.Reader, emit func(int)) error {
	c, err := desync.NewChunker(r, uint64(p.min), uint64(p.avg), uint64(p.max))
	if err != nil {
		return usageError("desync: %v", err)
	}
	for {
		_, chunk, err := c.Next()
		if err != nil {
			return err
		}
		if len(chunk) == 0 {
			return nil
		}
		emit(len(chunk))
	}
}
