#include "estimate/distinct_sketch.h"

#include <algorithm>
#include <cmath>

namespace chunkd::estimate {

DistinctSketch::DistinctSketch() : registers_(size_t{1} << kIndexBits, 0) {}

DistinctSketch::Count DistinctSketch::Estimate() const {
  const double m = static_cast<double>(registers_.size());
  double inverse_sum = 0;
  size_t zeros = 0;
  for (uint8_t r : registers_) {
    inverse_sum += std::ldexp(1.0, -static_cast<int>(r));
    zeros += r == 0 ? 1 : 0;
  }
  Count out;
  if (zeros == registers_.size()) return out;
  // Linear counting while registers are still empty and its estimate is
  // small: the number of values that leave `zeros` of m bins empty, with
  // the standard error of Whang, Vander-Zanden and Taylor (1990). Up to
  // 3.5 m rather than HyperLogLog's usual 2.5 m: the raw estimate is biased
  // up by 1-2 % between them (measured), linear counting's error there is
  // 0.5-0.6 %.
  if (zeros > 0) {
    const double linear = m * std::log(m / static_cast<double>(zeros));
    if (linear <= 3.5 * m) {
      const double load = linear / m;
      out.distinct = linear;
      out.relative_se =
          std::sqrt(m * (std::exp(load) - load - 1)) / std::max(linear, 1.0);
      return out;
    }
  }
  const double alpha = 0.7213 / (1 + 1.079 / m);
  out.distinct = alpha * m * m / inverse_sum;
  // Below 5 m the raw estimate keeps a bias of up to 0.4 % (measured); the
  // error counts it beside the 1.04 / sqrt(m) of HyperLogLog.
  const double standard = 1.04 / std::sqrt(m);
  out.relative_se = out.distinct < 5 * m
                        ? std::sqrt(standard * standard + 0.004 * 0.004)
                        : standard;
  return out;
}

}  // namespace chunkd::estimate
