#include "clients/cli/estimate_run.h"

#include <algorithm>
#include <filesystem>
#include <optional>
#include <system_error>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "clients/cli/remote.h"
#include "grpcpp/client_context.h"
#include "grpcpp/support/sync_stream.h"

namespace chunkd::cli {
namespace {

namespace fs = std::filesystem;

// The regular files under `dir`, in sorted path order.
absl::StatusOr<std::vector<std::string>> FilesUnder(const std::string& dir) {
  std::vector<std::string> files;
  std::error_code error;
  fs::recursive_directory_iterator it(dir, error);
  for (; !error && it != fs::recursive_directory_iterator();
       it.increment(error)) {
    std::error_code type_error;
    if (it->is_regular_file(type_error)) files.push_back(it->path().string());
  }
  if (error) {
    return absl::FailedPreconditionError(
        absl::StrCat(dir, ": cannot read the directory: ", error.message()));
  }
  std::sort(files.begin(), files.end());
  return files;
}

absl::Status DataLossError(absl::string_view what) {
  return absl::DataLossError(absl::StrCat("DATA_LOSS: ", what));
}

absl::Status ProtocolError(absl::string_view what) {
  return ClientFound(
      absl::InternalError(absl::StrCat("protocol error: ", what)));
}

// What the writer thread of an Estimate stream did.
struct Upload {
  uint64_t bytes_sent = 0;
  // True once every file was sent and the stream half-closed.
  bool complete = false;
  // A file that could not be read (the call was then cancelled).
  absl::Status read_status;
};

// Sends `params` and the data set, each file ended by an end_of_file mark.
// Stops early when a Write fails: the server ended the stream, and
// Finish() says why.
Upload SendDataSet(
    grpc::ClientContext* context,
    grpc::ClientReaderWriterInterface<chunkd::v1::EstimateRequest,
                                      chunkd::v1::EstimateResponse>* stream,
    const chunkd::v1::EstimateParams& params, DataSetReader* reader) {
  Upload upload;
  chunkd::v1::EstimateRequest first;
  *first.mutable_params() = params;
  if (!stream->Write(first)) return upload;
  bool closed = false;  // a Write failed
  const absl::Status closed_status = absl::CancelledError("stream closed");
  chunkd::v1::EstimateRequest request;
  const absl::Status status = reader->Read(
      [&](absl::string_view piece) {
        request.set_data(std::string(piece));
        request.set_end_of_file(false);
        if (!stream->Write(request)) {
          closed = true;
          return closed_status;
        }
        upload.bytes_sent += piece.size();
        return absl::OkStatus();
      },
      [&] {
        request.clear_data();
        request.set_end_of_file(true);
        if (!stream->Write(request)) {
          closed = true;
          return closed_status;
        }
        return absl::OkStatus();
      });
  if (closed || InputFile::IsInterrupted(status)) return upload;
  if (!status.ok()) {
    upload.read_status = ClientFound(status);
    context->TryCancel();
    return upload;
  }
  upload.complete = stream->WritesDone();
  return upload;
}

// Checks the result against the request and the bytes sent.
absl::Status CheckResult(
    const std::optional<chunkd::v1::EstimateResult>& result,
    const chunkd::v1::EstimateParams& params, uint64_t bytes_sent) {
  if (!result.has_value()) {
    return DataLossError(absl::StrCat("the stream ended without a result; ",
                                      bytes_sent, " bytes were sent"));
  }
  if (result->total_bytes() != bytes_sent) {
    return DataLossError(absl::StrCat("server result reports total_bytes=",
                                      result->total_bytes(), " but ",
                                      bytes_sent, " bytes were sent"));
  }
  if (result->sets_size() != params.sets_size()) {
    return ProtocolError(absl::StrCat("the result has ", result->sets_size(),
                                      " sets; ", params.sets_size(),
                                      " were sent"));
  }
  for (int i = 0; i < params.sets_size(); ++i) {
    if (result->sets(i).label() != params.sets(i).label()) {
      return ProtocolError(absl::StrCat(
          "the result's set ", i + 1, " is \"", result->sets(i).label(),
          "\"; \"", params.sets(i).label(), "\" was sent"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::vector<std::string>> DataSetFiles(
    const std::vector<std::string>& arguments) {
  std::vector<std::string> files;
  for (const std::string& argument : arguments) {
    std::error_code error;
    if (argument == "-" || !fs::is_directory(argument, error)) {
      files.push_back(argument);  // a missing file is reported when opened
      continue;
    }
    absl::StatusOr<std::vector<std::string>> under = FilesUnder(argument);
    if (!under.ok()) return under.status();
    files.insert(files.end(), under->begin(), under->end());
  }
  return files;
}

DataSetReader::DataSetReader(std::vector<std::string> files, size_t piece_size,
                             ProgressFactory progress_for)
    : files_(std::move(files)),
      piece_size_(piece_size),
      progress_for_(std::move(progress_for)) {}

void DataSetReader::Interrupt() {
  std::lock_guard<std::mutex> lock(mu_);
  interrupted_ = true;
  if (current_ != nullptr) current_->Interrupt();
}

absl::Status DataSetReader::ReadFile(
    InputFile* input,
    absl::FunctionRef<absl::Status(absl::string_view)> on_data) {
  std::string buffer(piece_size_, '\0');
  while (true) {
    absl::StatusOr<size_t> n = input->Read(buffer.data(), buffer.size());
    if (!n.ok()) return n.status();
    if (*n == 0) return absl::OkStatus();
    if (absl::Status s = on_data(absl::string_view(buffer.data(), *n));
        !s.ok()) {
      return s;
    }
  }
}

absl::Status DataSetReader::Read(
    absl::FunctionRef<absl::Status(absl::string_view)> on_data,
    absl::FunctionRef<absl::Status()> on_end_of_file) {
  for (const std::string& name : files_) {
    absl::StatusOr<std::unique_ptr<InputFile>> input = InputFile::Open(name);
    if (!input.ok()) return input.status();
    {
      std::lock_guard<std::mutex> lock(mu_);
      current_ = input->get();
      if (interrupted_) current_->Interrupt();
    }
    const std::unique_ptr<Progress> progress = progress_for_(input->get());
    absl::Status status = ReadFile(input->get(), on_data);
    progress->Finish();
    {
      std::lock_guard<std::mutex> lock(mu_);
      current_ = nullptr;
    }
    if (!status.ok()) return status;
    if (absl::Status s = on_end_of_file(); !s.ok()) return s;
  }
  return absl::OkStatus();
}

absl::StatusOr<EstimateReport> EstimateLocally(
    const estimate::EstimatorOptions& options, DataSetReader* reader) {
  absl::StatusOr<std::unique_ptr<estimate::Estimator>> estimator =
      estimate::Estimator::Create(options);
  if (!estimator.ok()) return estimator.status();
  estimate::Estimator& e = **estimator;
  if (absl::Status s = reader->Read(
          [&e](absl::string_view piece) { return e.Append(piece); },
          [&e] { return e.EndFile(); });
      !s.ok()) {
    return s;
  }
  absl::StatusOr<std::vector<estimate::SetResult>> results = e.Finish();
  if (!results.ok()) return results.status();
  EstimateReport report;
  for (estimate::SetResult& result : *results) {
    report.sets.push_back({std::move(result), std::nullopt, std::nullopt});
  }
  report.total_bytes = e.bytes_in();
  report.files = e.files();
  report.sample_rate = options.sample_rate;
  report.fingerprint = options.fingerprint == estimate::FingerprintKind::kSha256
                           ? fingerprint::Kind::kSha256
                           : fingerprint::Kind::kXxh128;
  return report;
}

absl::StatusOr<chunkd::v1::EstimateResult> EstimateRemotely(
    chunkd::v1::ChunkService::StubInterface* stub,
    const chunkd::v1::EstimateParams& params,
    std::chrono::nanoseconds timeout, DataSetReader* reader) {
  grpc::ClientContext context;
  SetTimeout(&context, timeout);
  std::unique_ptr<grpc::ClientReaderWriterInterface<
      chunkd::v1::EstimateRequest, chunkd::v1::EstimateResponse>>
      stream = stub->Estimate(&context);
  Upload upload;
  std::thread writer([&] {
    upload = SendDataSet(&context, stream.get(), params, reader);
  });
  std::optional<chunkd::v1::EstimateResult> result;
  absl::Status handled;
  chunkd::v1::EstimateResponse response;
  while (stream->Read(&response)) {
    if (!handled.ok()) continue;  // cancelled; drain what is in flight
    if (result.has_value()) {
      handled = ProtocolError("a response after the result");
    } else if (response.has_result()) {
      result = response.result();
    } else if (!response.has_progress()) {
      handled = ProtocolError("a response with neither progress nor result");
    }
    if (!handled.ok()) context.TryCancel();
  }
  reader->Interrupt();
  writer.join();
  const grpc::Status status = stream->Finish();
  if (!upload.read_status.ok()) return upload.read_status;
  if (!handled.ok()) return handled;
  if (!status.ok()) return FromGrpcStatus(status);
  if (!upload.complete) {
    return DataLossError(absl::StrCat(
        "the server ended the stream with OK before receiving all data; ",
        upload.bytes_sent, " bytes were sent"));
  }
  if (absl::Status s = CheckResult(result, params, upload.bytes_sent);
      !s.ok()) {
    return s;
  }
  return *std::move(result);
}

}  // namespace chunkd::cli
