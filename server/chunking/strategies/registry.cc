// NewStrategy: the engine's algorithms, one row each.

#include <memory>

#include "chunkd/chunker.h"
#include "chunking/strategies/strategy.h"

namespace chunkd::chunking {

// X(algorithm, factory): an Algorithm enumerator and the factory of its
// strategy, defined in strategies/<algorithm>_strategy.cc. An algorithm
// without a row is a -Wswitch error in NewStrategy.
#define CHUNKD_ENGINE_STRATEGIES(X) \
  X(kFastCdc, NewFastCdcStrategy)   \
  X(kCrc32, NewCrc32Strategy)       \
  X(kSeqCdc, NewSeqCdcStrategy)     \
  X(kFixed, NewFixedStrategy)       \
  X(kRepMaxCdc, NewRepMaxCdcStrategy) \
  X(kRabin, NewRabinStrategy)       \
  X(kBuzhash, NewBuzhashStrategy)

#define CHUNKD_DECLARE_FACTORY(algorithm, factory) \
  std::unique_ptr<AlgorithmStrategy> factory(const ChunkerOptions& options);
CHUNKD_ENGINE_STRATEGIES(CHUNKD_DECLARE_FACTORY)
#undef CHUNKD_DECLARE_FACTORY

std::unique_ptr<AlgorithmStrategy> NewStrategy(const ChunkerOptions& options) {
  switch (options.algorithm) {
#define CHUNKD_CREATE(algorithm, factory) \
  case Algorithm::algorithm:              \
    return factory(options);
    CHUNKD_ENGINE_STRATEGIES(CHUNKD_CREATE)
#undef CHUNKD_CREATE
  }
  return nullptr;  // unreachable: the options are valid
}

}  // namespace chunkd::chunking
