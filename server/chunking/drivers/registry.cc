// NewDriver and NewCutter: the algorithms of the table in CMakeLists.txt, one
// row each (CHUNKD_ALGORITHMS, generated), whose driver files define the
// factories.

#include <memory>

#include "chunkd/chunker.h"
#include "chunking/cutter.h"
#include "chunking/drivers/algorithm_list.h"
#include "chunking/drivers/driver.h"

namespace chunkd::chunking {

#define CHUNKD_DECLARE_FACTORIES(Name)                \
  std::unique_ptr<AlgorithmDriver> New##Name##Driver( \
      const ChunkerOptions& options);                 \
  std::unique_ptr<Cutter> New##Name##Cutter(const ChunkerOptions& options);
CHUNKD_ALGORITHMS(CHUNKD_DECLARE_FACTORIES)
#undef CHUNKD_DECLARE_FACTORIES

// An Algorithm without a row is a -Wswitch error below.
std::unique_ptr<AlgorithmDriver> NewDriver(const ChunkerOptions& options) {
  switch (options.algorithm) {
#define CHUNKD_CREATE(Name) \
  case Algorithm::k##Name:  \
    return New##Name##Driver(options);
    CHUNKD_ALGORITHMS(CHUNKD_CREATE)
#undef CHUNKD_CREATE
  }
  return nullptr;  // unreachable: the options are valid
}

std::unique_ptr<Cutter> NewCutter(const ChunkerOptions& options) {
  switch (options.algorithm) {
#define CHUNKD_CREATE(Name) \
  case Algorithm::k##Name:  \
    return New##Name##Cutter(options);
    CHUNKD_ALGORITHMS(CHUNKD_CREATE)
#undef CHUNKD_CREATE
  }
  return nullptr;  // unreachable: the options are valid
}

}  // namespace chunkd::chunking
