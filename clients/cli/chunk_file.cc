#include "clients/cli/chunk_file.h"

#include "clients/cli/remote.h"

namespace chunkd::cli {

absl::Status ChunkFile(
    chunkd::v1::ChunkService::StubInterface* stub,
    const ChunkFileOptions& options, const std::string& name,
    RecordWriter* out,
    absl::FunctionRef<std::unique_ptr<Progress>(InputFile*)> progress_for,
    std::FILE* err) {
  DeliveredRecords delivered;
  DeliveredRecords* const replayed =
      options.replay.retries > 0 ? &delivered : nullptr;
  return ReplayFile(options.replay, name, err, [&]() -> absl::Status {
    absl::StatusOr<std::unique_ptr<InputFile>> input = InputFile::Open(name);
    if (!input.ok()) return input.status();
    const std::unique_ptr<Progress> progress = progress_for(input->get());
    const absl::Status status =
        ChunkRemotely(stub, options.params, options.kind, options.message_size,
                      input->get(), out, options.timeout, replayed);
    progress->Finish();
    return status;
  });
}

}  // namespace chunkd::cli
