// The two ways `chunkctl estimate` runs: here, with the Estimator
// (--local), or on a server through the Estimate RPC; both read the data
// set's files the same way (DataSetReader) and give an EstimateReport.
//
// Thread safety: DataSetReader reads on one thread; Interrupt() may be
// called from any. The functions use their own ClientContext.
#ifndef CHUNKD_CLIENTS_CLI_ESTIMATE_RUN_H_
#define CHUNKD_CLIENTS_CLI_ESTIMATE_RUN_H_

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "chunkd/v1/chunkd.grpc.pb.h"
#include "chunkd/v1/chunkd.pb.h"
#include "clients/cli/estimate_output.h"
#include "clients/cli/input_file.h"
#include "clients/cli/progress.h"
#include "estimate/estimator.h"

namespace chunkd::cli {

// The files of a data set from the command line's FILE|DIR|- arguments:
// a file (or "-", stdin) as it is; a directory walked recursively, its
// regular files (symbolic links to files included) in sorted path order.
// An error names the directory that cannot be read.
absl::StatusOr<std::vector<std::string>> DataSetFiles(
    const std::vector<std::string>& arguments);

// Reads the files of a data set in turn, in pieces.
class DataSetReader {
 public:
  // The progress display of one file (ProgressFor()).
  using ProgressFactory = std::function<std::unique_ptr<Progress>(InputFile*)>;

  // REQUIRES: piece_size > 0.
  DataSetReader(std::vector<std::string> files, size_t piece_size,
                ProgressFactory progress_for);
  DataSetReader(const DataSetReader&) = delete;
  DataSetReader& operator=(const DataSetReader&) = delete;

  // Opens each file in turn, passes its bytes to `on_data` in pieces of
  // at most piece_size, then calls `on_end_of_file`. Returns the first error:
  // a file that cannot be opened or read (named), Interrupted() after
  // Interrupt(), or a callback's.
  absl::Status Read(absl::FunctionRef<absl::Status(absl::string_view)> on_data,
                    absl::FunctionRef<absl::Status()> on_end_of_file);

  // Makes a read waiting for data, and every later one, fail with
  // InputFile::IsInterrupted(); from any thread.
  void Interrupt();

 private:
  absl::Status ReadFile(
      InputFile* input,
      absl::FunctionRef<absl::Status(absl::string_view)> on_data);

  const std::vector<std::string> files_;
  const size_t piece_size_;
  const ProgressFactory progress_for_;
  std::mutex mu_;
  InputFile* current_ = nullptr;  // guarded by mu_
  bool interrupted_ = false;      // guarded by mu_
};

// Runs the Estimator here on the data set `reader` reads.
absl::StatusOr<EstimateReport> EstimateLocally(
    const estimate::EstimatorOptions& options, DataSetReader* reader);

// Streams the data set to the Estimate RPC: `params` first, then each
// file's pieces as data messages, each file ended by a message with
// end_of_file; returns the result. `timeout` is the
// call's deadline (SetTimeout()). Errors as ChunkRemotely's: the server's
// as FromGrpcStatus(); DATA_LOSS for a stream that ended OK without a
// result or with a result that does not count every byte sent; INTERNAL
// "protocol error: ..." for an answer that breaks the protocol.
absl::StatusOr<chunkd::v1::EstimateResult> EstimateRemotely(
    chunkd::v1::ChunkService::StubInterface* stub,
    const chunkd::v1::EstimateParams& params,
    std::chrono::nanoseconds timeout, DataSetReader* reader);

}  // namespace chunkd::cli

#endif  // CHUNKD_CLIENTS_CLI_ESTIMATE_RUN_H_
