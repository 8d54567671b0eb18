// SPDX-License-Identifier: Apache-2.0
// What `cxltier replay` and `cxltier sweep` share: the trace flags, the progress line on
// stderr, and the process's peak memory.
#pragma once

#include <CLI/CLI.hpp>

#include <cxltier/error.hpp>
#include <cxltier/tools/trace.hpp>
#include <cxltier/tools/units.hpp>

#include <chrono>
#include <cstdio>
#include <string>

#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

namespace cxltier::cli {

struct TraceFlags {
  std::string path;
  std::string format;
  std::string block_size;
  bool strict = false;
};

inline void add_trace_flags(CLI::App *sub, TraceFlags &f) {
  sub->add_option("--trace", f.path, "Trace file (plain or gzip; docs/traces.md)")->required()->type_name("FILE");
  sub->add_option("--format", f.format, "mooncake, bailian, dynamo or attention (default: detected from content)");
  sub->add_option("--block-size-tokens", f.block_size,
                  "tokens per block (default: the file's value, else 512 Mooncake, 16 Bailian)")
      ->type_name("N");
  sub->add_flag("--strict", f.strict, "stop at the first malformed line (default: skip it, count it, report it)");
}

inline trace::ReaderOptions reader_options(const TraceFlags &f) {
  trace::ReaderOptions o;
  if (!f.format.empty()) o.format = trace::parse_format(f.format);
  if (!f.block_size.empty()) {
    uint64_t b = parse_u64(f.block_size, "--block-size-tokens");
    if (b == 0 || b > UINT32_MAX) fail(CXLT_ERROR_INVALID_ARGUMENT, "--block-size-tokens: ", b, " is outside [1, 2^32)");
    o.block_size_tokens = static_cast<uint32_t>(b);
  }
  o.strict = f.strict;
  return o;
}

// Peak resident memory of this process (getrusage ru_maxrss), bytes.
inline uint64_t max_rss_bytes() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return static_cast<uint64_t>(ru.ru_maxrss) * 1024;
}

// Progress on stderr once a run has taken a second: one rewritten line on a terminal, a line
// every 5 s otherwise (logs stay short).
class ProgressLine {
public:
  ProgressLine(const char *what, bool quiet, const std::string &path = {})
      : what_(what), quiet_(quiet), tty_(isatty(STDERR_FILENO) != 0), t0_(std::chrono::steady_clock::now()), last_(t0_) {
    struct stat st {};
    if (!path.empty() && stat(path.c_str(), &st) == 0) file_bytes_ = static_cast<uint64_t>(st.st_size);
  }
  // A replay: references done, uncompressed bytes read (a percentage for plain files).
  void references(uint64_t refs, uint64_t bytes) {
    if (!due()) return;
    double secs = elapsed();
    char pct[32] = "";
    if (file_bytes_ && bytes <= file_bytes_)
      std::snprintf(pct, sizeof pct, " (%.0f %% of the file)", 100.0 * static_cast<double>(bytes) / static_cast<double>(file_bytes_));
    std::fprintf(stderr, "%s%s: %.1f M references%s, %.1f M/s%s", tty_ ? "\r" : "", what_, static_cast<double>(refs) / 1e6,
                 pct, secs > 0 ? static_cast<double>(refs) / secs / 1e6 : 0.0, tty_ ? "\033[K" : "\n");
  }
  // A sweep: runs done of the total, as a bar.
  void runs(size_t done, size_t total) {
    if (quiet_) return;
    if (done == total) {
      if (!shown_) return;  // a run too short to have shown progress stays silent
    } else if (!due()) {
      return;
    }
    const int width = 30;
    int filled = total ? static_cast<int>(static_cast<double>(width) * static_cast<double>(done) / static_cast<double>(total)) : width;
    std::string bar(static_cast<size_t>(filled), '#');
    bar.append(static_cast<size_t>(width - filled), '.');
    double secs = elapsed();
    double eta = done ? secs * static_cast<double>(total - done) / static_cast<double>(done) : 0.0;
    std::fprintf(stderr, "%s%s: [%s] %zu/%zu runs, %.0f s, about %.0f s left%s", tty_ ? "\r" : "", what_, bar.c_str(), done,
                 total, secs, eta, tty_ ? "\033[K" : "\n");
  }
  void finish() {
    if (shown_ && tty_) std::fputc('\n', stderr);
  }

private:
  bool due() {
    if (quiet_) return false;
    auto now = std::chrono::steady_clock::now();
    if (now - t0_ < std::chrono::seconds(1) || now - last_ < std::chrono::milliseconds(tty_ ? 200 : 5000)) return false;
    last_ = now;
    shown_ = true;
    return true;
  }
  double elapsed() const { return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count(); }

  const char *what_;
  bool quiet_;
  bool tty_;
  bool shown_ = false;
  uint64_t file_bytes_ = 0;
  std::chrono::steady_clock::time_point t0_, last_;
};

}  // namespace cxltier::cli
