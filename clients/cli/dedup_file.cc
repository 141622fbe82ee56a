#include "clients/cli/dedup_file.h"

#include <random>
#include <utility>

#include "absl/strings/str_format.h"

namespace chunkd::cli {
namespace {

// One attempt: opens `name` and streams it.
absl::StatusOr<DedupTotals> Attempt(
    chunkd::v1::ChunkService::StubInterface* stub,
    const DedupFileOptions& options, const chunkd::v1::DedupParams& params,
    const std::string& name,
    absl::FunctionRef<std::unique_ptr<Progress>(InputFile*)> progress_for) {
  absl::StatusOr<std::unique_ptr<InputFile>> input = InputFile::Open(name);
  if (!input.ok()) return input.status();
  const std::unique_ptr<Progress> progress = progress_for(input->get());
  absl::StatusOr<DedupTotals> totals =
      DedupRemotely(stub, params, options.kind, options.message_size,
                    input->get(), options.timeout);
  progress->Finish();
  return totals;
}

}  // namespace

std::string RandomStreamId() {
  std::random_device device;
  std::string id = "chunkctl-";
  for (int i = 0; i < 4; ++i) {
    absl::StrAppendFormat(&id, "%08x", device());
  }
  return id;
}

absl::StatusOr<DedupTotals> DedupFile(
    chunkd::v1::ChunkService::StubInterface* stub,
    const DedupFileOptions& options, const std::string& name,
    absl::FunctionRef<std::unique_ptr<Progress>(InputFile*)> progress_for,
    std::FILE* err) {
  chunkd::v1::DedupParams params = options.params;
  if (options.replay.retries > 0) params.set_stream_id(RandomStreamId());
  absl::StatusOr<DedupTotals> totals;
  const absl::Status status =
      ReplayFile(options.replay, name, err, [&]() -> absl::Status {
        totals = Attempt(stub, options, params, name, progress_for);
        return totals.status();
      });
  if (!status.ok()) return status;
  return totals;
}

}  // namespace chunkd::cli
