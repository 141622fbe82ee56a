// seqcdc, stage-1 bodies (README.md): bit p of gt / lt is data[p] > / <
// data[p - 1]; the scalar definition, and the vector body below.
//
// Needs from the ISA layer:
//   void GtLt64(const uint8_t* cur, uint64_t* gt, uint64_t* lt);
//     the two words for positions cur[0..63], comparing each byte with the
//     one before it (reads cur[-1..63]).
//
// One word per step with two unaligned loads: memory-bound. Per call only
// the first word (when it holds position 0, which has no previous byte) and
// the last partial word go through a 65-byte bounce buffer, so short ranges
// cost little more than their bytes.

#ifdef CHUNKD_KERNEL_SET_SCALAR

// The scalar kernel set: the definition of ../functions.h, one position
// after the other (the reference of the differential tests).
inline void SeqCdcBody(const uint8_t* data, size_t begin, size_t end,
                       uint64_t* gt, uint64_t* lt) {
  ForEachWord(begin, end, gt, lt, [&](size_t p, bool* g, bool* l) {
    *g = p > 0 && data[p] > data[p - 1];
    *l = p > 0 && data[p] < data[p - 1];
  });
}

#else  // the vector kernel sets

inline void SeqCdcWord(const uint8_t* data, size_t p, size_t end, uint64_t* gt,
                       uint64_t* lt) {
  // buf[0] is the previous byte; at the stream start it repeats data[0], so
  // that position 0 compares equal and gets neither bit.
  alignas(64) uint8_t buf[128];
  const size_t len = Min<size_t>(64, end - p);
  memset(buf, 0, sizeof(buf));
  buf[0] = p > 0 ? data[p - 1] : data[0];
  memcpy(buf + 1, data + p, len);
  GtLt64(buf + 1, gt, lt);
  *gt &= LowBits(len);
  *lt &= LowBits(len);
}

inline void SeqCdcBody(const uint8_t* data, size_t begin, size_t end,
                       uint64_t* gt, uint64_t* lt) {
  size_t p = begin;
  size_t w = 0;
  if (p < end && p == 0) {
    SeqCdcWord(data, p, end, gt + w, lt + w);
    p += 64;
    ++w;
  }
  for (; p + 64 <= end; p += 64, ++w) GtLt64(data + p, gt + w, lt + w);
  if (p < end) SeqCdcWord(data, p, end, gt + w, lt + w);
}

#endif  // CHUNKD_KERNEL_SET_SCALAR
