// delivered: the records a stream with Params.Retries has already given,
// and the check that a replay repeats them exactly.

package chunkd

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"hash"

	"google.golang.org/grpc/codes"
)

// recordKey is what a replay must repeat of a record.
type recordKey struct {
	offset      uint64
	length      uint32
	fingerprint []byte
}

// delivered are the records a stream with Params.Retries has given, as
// every replay must repeat them: where they end, how many there are, and a
// SHA-256 over their offsets, lengths and fingerprints (a few dozen bytes,
// however long the stream). After a replay starts, the records before that
// end are repeats, checked against the records given once the replay
// reaches it. A replay that does not repeat them exactly (a record across
// that end, a gap, other offsets, lengths or fingerprints before it) means
// the input, or the index the hints learn from, changed under the replay:
// DATA_LOSS, as are records that do not follow each other and a summary
// that does not add up to the records given.
type delivered struct {
	end, count uint64
	digest     hash.Hash
	// The repeats of a replay that is still before end; nil otherwise.
	repeat      hash.Hash
	repeatCount uint64
	replayed    bool
}

// replaying is called when a replay starts from the input's start.
func (d *delivered) replaying() {
	d.repeat, d.repeatCount, d.replayed = nil, 0, true
	if d.end > 0 {
		d.repeat = sha256.New()
	}
}

// gap is the DATA_LOSS of a record at offset that does not follow the
// records given.
func (d *delivered) gap(offset uint64) error {
	const what = "goes on with a chunk at offset %d, where the chunks already returned end at %d"
	if d.replayed {
		return changed(what, offset, d.end)
	}
	return clientError(codes.DataLoss, "the stream "+what, offset, d.end)
}

// take says whether a record is new to the caller (and counts it), or a
// repeat; DATA_LOSS for a replay that cuts otherwise.
func (d *delivered) take(k recordKey) (bool, error) {
	var head [12]byte
	binary.LittleEndian.PutUint64(head[:8], k.offset)
	binary.LittleEndian.PutUint32(head[8:], k.length)
	end := k.offset + uint64(k.length)
	if d.repeat == nil {
		if k.offset != d.end {
			return false, d.gap(k.offset)
		}
		if d.digest == nil {
			d.digest = sha256.New()
		}
		d.digest.Write(head[:])
		d.digest.Write(k.fingerprint)
		d.end, d.count = end, d.count+1
		return true, nil
	}
	switch {
	case k.offset >= d.end:
		return false, d.gap(k.offset)
	case end > d.end:
		return false, changed("has a chunk [%d, %d) across offset %d, where the chunks already returned end",
			k.offset, end, d.end)
	}
	d.repeat.Write(head[:])
	d.repeat.Write(k.fingerprint)
	d.repeatCount++
	if end == d.end {
		if d.repeatCount != d.count || !bytes.Equal(d.repeat.Sum(nil), d.digest.Sum(nil)) {
			return false, changed("has %d chunks before offset %d that differ from the %d already returned "+
				"(in offsets, lengths or fingerprints)", d.repeatCount, d.end, d.count)
		}
		d.repeat = nil
	}
	return false, nil
}

// checkSummary is DATA_LOSS unless the summary of the attempt that ended
// OK counts the records given, no more and no less.
func (d *delivered) checkSummary(totalBytes, totalChunks uint64) error {
	if d.repeat != nil {
		return changed("ended at offset %d, before offset %d, where the chunks already returned end",
			totalBytes, d.end)
	}
	if totalBytes != d.end || totalChunks != d.count {
		return clientError(codes.DataLoss,
			"the stream's summary counts %d bytes in %d chunks, but the chunks returned cover %d bytes in %d",
			totalBytes, totalChunks, d.end, d.count)
	}
	return nil
}

func changed(format string, args ...any) error {
	return clientError(codes.DataLoss, "the replayed stream "+format+
		": the source or the index changed under the replay", args...)
}
