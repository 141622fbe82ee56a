// Helpers of the generic kernel bodies; see README.md. No includes: this file
// is included inside an ISA namespace after <cstddef>, <cstdint>, <cstring>.

// std::min / std::max would instantiate shared templates in this translation
// unit (see README.md); these are private to the ISA namespace.
template <class T>
inline T Min(T a, T b) {
  return a < b ? a : b;
}
template <class T>
inline T Max(T a, T b) {
  return a < b ? b : a;
}

// The low `n` bits set, for n in [0, 64].
inline uint64_t LowBits(size_t n) {
  return n >= 64 ? ~uint64_t{0} : (uint64_t{1} << n) - 1;
}

inline size_t CeilDiv(size_t a, size_t b) { return (a + b - 1) / b; }

// Copies data[pos, pos + len) into out[0, len), bytes outside [0, end) as
// zero. `pos` may be negative. Used for the rare blocks at a range's edges.
inline void CopyClamped(const uint8_t* data, ptrdiff_t pos, size_t len,
                        size_t end, uint8_t* out) {
  memset(out, 0, len);
  const ptrdiff_t lo = Max<ptrdiff_t>(pos, 0);
  const ptrdiff_t hi = Min<ptrdiff_t>(pos + static_cast<ptrdiff_t>(len),
                                      static_cast<ptrdiff_t>(end));
  if (hi > lo)
    memcpy(out + (lo - pos), data + lo, static_cast<size_t>(hi - lo));
}

// True when data[pos, pos + len) lies inside [0, end).
inline bool Inside(ptrdiff_t pos, size_t len, size_t end) {
  return pos >= 0 && static_cast<size_t>(pos) + len <= end;
}
