#include "clients/cli/progress.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace chunkd::cli {
namespace {

constexpr int kBarWidth = 24;
constexpr auto kRedrawInterval = std::chrono::milliseconds(100);

std::string ClockTime(double seconds) {
  const auto s = static_cast<uint64_t>(std::llround(std::max(seconds, 0.0)));
  if (s >= 3600) {
    return absl::StrFormat("%d:%02d:%02d", s / 3600, s / 60 % 60, s % 60);
  }
  return absl::StrFormat("%d:%02d", s / 60, s % 60);
}

}  // namespace

Progress::Progress(std::FILE* tty, std::string label, uint64_t total)
    : tty_(tty),
      label_(std::move(label)),
      total_(total),
      start_(std::chrono::steady_clock::now()),
      last_draw_(start_ - kRedrawInterval) {}

void Progress::Add(uint64_t bytes) {
  if (tty_ == nullptr) return;
  done_ += bytes;
  const auto now = std::chrono::steady_clock::now();
  if (now - last_draw_ >= kRedrawInterval) {
    last_draw_ = now;
    Draw();
  }
}

void Progress::Finish() {
  if (tty_ == nullptr) return;
  Draw();
  std::fputc('\n', tty_);
  std::fflush(tty_);
}

void Progress::Draw() {
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start_)
          .count();
  std::fprintf(tty_, "\r\x1b[K%s",
               Line(label_, done_, total_, seconds).c_str());
  std::fflush(tty_);
}

std::string Progress::HumanBytes(double bytes) {
  static constexpr const char* kUnits[] = {"B",   "KiB", "MiB", "GiB",
                                              "TiB", "PiB", "EiB"};
  size_t unit = 0;
  while (bytes >= 1024 && unit + 1 < std::size(kUnits)) {
    bytes /= 1024;
    ++unit;
  }
  return unit == 0 ? absl::StrFormat("%.0f B", bytes)
                   : absl::StrFormat("%.1f %s", bytes, kUnits[unit]);
}

std::string Progress::Line(absl::string_view label, uint64_t done,
                           uint64_t total, double seconds) {
  const double rate = static_cast<double>(done) / std::max(seconds, 1e-9);
  std::string line(label);
  if (total > 0) {
    const double fraction =
        std::min(static_cast<double>(done) / static_cast<double>(total), 1.0);
    const int filled = static_cast<int>(fraction * kBarWidth);
    absl::StrAppend(&line, " [", std::string(filled, '#'),
                    std::string(kBarWidth - filled, '-'), "] ",
                    absl::StrFormat("%5.1f%%", fraction * 100), " ",
                    HumanBytes(static_cast<double>(done)), "/",
                    HumanBytes(static_cast<double>(total)));
  } else {
    absl::StrAppend(&line, " ", HumanBytes(static_cast<double>(done)));
  }
  absl::StrAppend(&line, " ", HumanBytes(rate), "/s");
  if (total > 0 && rate > 0) {
    const double left = static_cast<double>(total > done ? total - done : 0);
    absl::StrAppend(&line, " ETA ", ClockTime(left / rate));
  }
  return line;
}

bool Progress::IsTerminal(std::FILE* file) {
  return file != nullptr && ::isatty(::fileno(file)) == 1;
}

}  // namespace chunkd::cli
