// SPDX-License-Identifier: Apache-2.0
// The synthetic attention workload: sequences that arrive, share system-prompt prefixes,
// decode one token per step and finish; per step, attention concentrated on sinks, a recency
// window and persistent heavy hitters, the rest spread thinly. And the attention trace writer.
#include <cxltier/tools/trace.hpp>

#include <cxltier/error.hpp>

#include "lib/trace/prng.hpp"

#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <limits>

// The same steps on every machine: no contraction of a*b+c into one fused multiply-add, which
// rounds once instead of twice (GCC's ISO mode already keeps them apart; clang contracts by
// default where the target has FMA).
#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#endif

namespace cxltier::trace {

namespace {

void append_u64(std::string &out, uint64_t v) {
  char buf[24];
  auto r = std::to_chars(buf, buf + sizeof buf, v);
  out.append(buf, r.ptr);
}

// Shortest text that reads back to the same value (so files round-trip exactly).
template <typename T>
void append_real(std::string &out, T v) {
  char buf[40];
  auto r = std::to_chars(buf, buf + sizeof buf, v);
  out.append(buf, r.ptr);
}

template <typename T>
void append_array(std::string &out, const char *key, const std::vector<T> &v) {
  out += ",\"";
  out += key;
  out += "\":[";
  for (size_t i = 0; i < v.size(); ++i) {
    if (i) out += ',';
    if constexpr (std::is_floating_point_v<T>)
      append_real(out, v[i]);
    else
      append_u64(out, v[i]);
  }
  out += ']';
}

[[noreturn]] void bad_param(const char *field, const std::string &value, const char *rule) {
  fail(CXLT_ERROR_INVALID_ARGUMENT, "synthetic workload: ", field, " = ", value, " ", rule);
}

std::string real_text(double v) {
  std::string s;
  append_real(s, v);
  return s;
}

void check_unit(const char *field, double v) {
  if (!(v >= 0.0 && v <= 1.0)) bad_param(field, real_text(v), "must be in [0, 1]");
}

}  // namespace

void SyntheticParams::validate() const {
  if (sequences == 0) bad_param("sequences", "0", "must be at least 1");
  if (max_active == 0) bad_param("max_active", "0", "must be at least 1");
  if (!(arrival_rate > 0.0 && arrival_rate <= 1e6))
    bad_param("arrival_rate", real_text(arrival_rate), "must be in (0, 1e6] sequences per step");
  if (block_size_tokens == 0) bad_param("block_size_tokens", "0", "must be at least 1");
  check_unit("prefix_fraction", prefix_fraction);
  if (prompt_tokens_min == 0) bad_param("prompt_tokens_min", "0", "must be at least 1");
  if (prompt_tokens_max < prompt_tokens_min)
    bad_param("prompt_tokens_max", std::to_string(prompt_tokens_max), "must be >= prompt_tokens_min");
  if (decode_tokens_min == 0) bad_param("decode_tokens_min", "0", "must be at least 1");
  if (decode_tokens_max < decode_tokens_min)
    bad_param("decode_tokens_max", std::to_string(decode_tokens_max), "must be >= decode_tokens_min");
  check_unit("heavy_drift", heavy_drift);
  check_unit("sink_mass", sink_mass);
  check_unit("recent_mass", recent_mass);
  check_unit("heavy_mass", heavy_mass);
  if (sink_mass + recent_mass + heavy_mass > 1.0 + 1e-12)
    bad_param("sink_mass + recent_mass + heavy_mass", real_text(sink_mass + recent_mass + heavy_mass),
              "must not exceed 1 (the tail gets what is left)");
  check_unit("tail_fraction", tail_fraction);
  if (!(jitter >= 0.0 && jitter < 1.0)) bad_param("jitter", real_text(jitter), "must be in [0, 1)");
}

std::string SyntheticParams::to_json() const {
  std::string s = "{";
  auto u = [&s](const char *k, uint64_t v) {
    if (s.size() > 1) s += ',';
    s += '"';
    s += k;
    s += "\":";
    append_u64(s, v);
  };
  auto d = [&s](const char *k, double v) {
    s += ",\"";
    s += k;
    s += "\":";
    append_real(s, v);
  };
  u("seed", seed);
  u("steps", steps);
  u("sequences", sequences);
  u("max_active", max_active);
  d("arrival_rate", arrival_rate);
  u("block_size_tokens", block_size_tokens);
  u("prefix_groups", prefix_groups);
  u("prefix_blocks", prefix_blocks);
  d("prefix_fraction", prefix_fraction);
  u("prompt_tokens_min", prompt_tokens_min);
  u("prompt_tokens_max", prompt_tokens_max);
  u("decode_tokens_min", decode_tokens_min);
  u("decode_tokens_max", decode_tokens_max);
  u("sink_blocks", sink_blocks);
  u("recent_blocks", recent_blocks);
  u("heavy_hitters", heavy_hitters);
  d("heavy_drift", heavy_drift);
  d("sink_mass", sink_mass);
  d("recent_mass", recent_mass);
  d("heavy_mass", heavy_mass);
  d("tail_fraction", tail_fraction);
  d("jitter", jitter);
  s += '}';
  return s;
}

// --- The workload -----------------------------------------------------------------------------

namespace {

struct Sequence {
  uint64_t id = 0;
  std::vector<uint64_t> blocks;  // block ids by index
  uint64_t tokens = 0;           // tokens held (prompt + decoded)
  uint64_t decode_left = 0;      // tokens still to generate
  std::vector<uint32_t> heavy;   // heavy-hitter block indexes
  std::vector<double> heavy_w;   // their persistent weights
};

enum : uint8_t { kSink = 0, kRecent = 1, kHeavy = 2, kTail = 3, kUntouched = 255 };

}  // namespace

struct __attribute__((visibility("hidden"))) SyntheticWorkload::Impl {  // not exported
  SyntheticParams p;
  detail::Rng rng;
  uint64_t step = 0;
  uint64_t next_block = 0;
  uint64_t arrived = 0;
  uint64_t queued = 0;
  uint64_t started = 0;
  uint64_t finished = 0;
  std::vector<Sequence> active;               // in start order
  std::vector<std::vector<uint64_t>> prefix;  // block ids per prefix group; empty until first use
  std::vector<uint8_t> cls;                   // scratch, per block of one sequence
  std::vector<double> w;

  explicit Impl(const SyntheticParams &params) : p(params), rng(params.seed) {
    p.validate();
    prefix.resize(p.prefix_groups);
  }

  bool done() const noexcept {
    if (p.steps && step >= p.steps) return true;
    return started == p.sequences && active.empty();
  }

  uint64_t new_block(Step &out) {
    out.created.push_back(next_block);
    return next_block++;
  }

  // The candidates for heavy hitters: blocks outside the sinks and the recency window.
  void window(const Sequence &s, uint64_t &lo, uint64_t &hi) const noexcept {
    uint64_t n = s.blocks.size();
    lo = std::min<uint64_t>(p.sink_blocks, n);
    hi = n - std::min<uint64_t>(p.recent_blocks, n - lo);
  }

  void start(Step &out) {
    Sequence s;
    s.id = started++;
    --queued;
    out.started.push_back(s.id);
    const uint64_t bs = p.block_size_tokens;
    if (p.prefix_groups && p.prefix_blocks && rng.chance(p.prefix_fraction)) {
      auto &ids = prefix[rng.below(p.prefix_groups)];
      if (ids.empty())
        for (uint32_t i = 0; i < p.prefix_blocks; ++i) ids.push_back(new_block(out));
      s.blocks = ids;
      s.tokens = uint64_t{p.prefix_blocks} * bs;
    }
    uint64_t prompt = rng.log_uniform(p.prompt_tokens_min, p.prompt_tokens_max);
    s.decode_left = rng.log_uniform(p.decode_tokens_min, p.decode_tokens_max);
    s.tokens += prompt;
    while (s.blocks.size() * bs < s.tokens) s.blocks.push_back(new_block(out));
    // Heavy hitters: distinct, uniform among the candidates (Floyd's sampling).
    uint64_t lo, hi;
    window(s, lo, hi);
    uint64_t count = hi - lo, k = std::min<uint64_t>(p.heavy_hitters, count);
    for (uint64_t j = count - k; j < count; ++j) {
      uint64_t t = rng.below(j + 1);
      uint64_t pick = lo + t;
      if (std::find(s.heavy.begin(), s.heavy.end(), pick) != s.heavy.end()) pick = lo + j;
      s.heavy.push_back(static_cast<uint32_t>(pick));
      s.heavy_w.push_back(0.5 + rng.uniform01());
    }
    active.push_back(std::move(s));
  }

  // A heavy hitter moves to another block (or one is added while fewer than asked exist).
  void drift(Sequence &s) {
    uint64_t lo, hi;
    window(s, lo, hi);
    if (hi <= lo) return;
    uint64_t t = lo + rng.below(hi - lo);
    double weight = 0.5 + rng.uniform01();
    if (std::find(s.heavy.begin(), s.heavy.end(), t) != s.heavy.end()) return;
    if (s.heavy.size() < p.heavy_hitters) {
      s.heavy.push_back(static_cast<uint32_t>(t));
      s.heavy_w.push_back(weight);
      return;
    }
    size_t slot = rng.below(s.heavy.size());
    s.heavy[slot] = static_cast<uint32_t>(t);
    s.heavy_w[slot] = weight;
  }

  void attend(const Sequence &s, Step &out) {
    const uint64_t n = s.blocks.size();
    uint64_t lo, hi;
    window(s, lo, hi);
    cls.assign(n, kTail);
    w.assign(n, 1.0);
    for (uint64_t i = 0; i < lo; ++i) cls[i] = kSink;
    for (uint64_t i = hi; i < n; ++i) cls[i] = kRecent;
    for (size_t h = 0; h < s.heavy.size(); ++h)
      if (s.heavy[h] >= lo && s.heavy[h] < hi) {
        cls[s.heavy[h]] = kHeavy;
        w[s.heavy[h]] = s.heavy_w[h];
      }
    const double tail_mass = std::max(0.0, 1.0 - p.sink_mass - p.recent_mass - p.heavy_mass);
    const double mass[4] = {p.sink_mass, p.recent_mass, p.heavy_mass, tail_mass};
    double sum[4] = {0, 0, 0, 0};
    bool present[4] = {false, false, false, false};
    for (uint64_t i = 0; i < n; ++i) {
      uint8_t c = cls[i];
      if (c == kTail && p.tail_fraction < 1.0 && !(p.tail_fraction > 0.0 && rng.chance(p.tail_fraction))) {
        cls[i] = kUntouched;
        continue;
      }
      if (mass[c] <= 0.0) {
        cls[i] = kUntouched;
        continue;
      }
      double base = c == kRecent ? 1.0 / static_cast<double>(n - i) : w[i];  // newest block: 1
      double j = p.jitter > 0.0 ? 1.0 + p.jitter * (2.0 * rng.uniform01() - 1.0) : 1.0;
      w[i] = base * j;
      sum[c] += w[i];
      present[c] = true;
    }
    double total = 0.0;
    for (int c = 0; c < 4; ++c)
      if (present[c]) total += mass[c];
    if (total <= 0.0) {
      // Every class the sequence has was given no mass: attention is uniform.
      for (uint64_t i = 0; i < n; ++i) {
        uint8_t c = i < lo ? kSink : i >= hi ? kRecent : kTail;
        for (uint32_t h : s.heavy)
          if (h == i && c == kTail) c = kHeavy;
        touch(out, s, i, c, static_cast<float>(1.0 / static_cast<double>(n)));
      }
      return;
    }
    for (uint64_t i = 0; i < n; ++i) {
      uint8_t c = cls[i];
      if (c == kUntouched) continue;
      touch(out, s, i, c, static_cast<float>(mass[c] / total * (w[i] / sum[c])));
    }
  }

  static void touch(Step &out, const Sequence &s, uint64_t i, uint8_t c, float a) {
    out.sequence.push_back(s.id);
    out.kind.push_back(static_cast<TouchKind>(c));
    out.block_index.push_back(static_cast<uint32_t>(i));
    out.block.push_back(s.blocks[i]);
    out.attention.push_back(std::min(a, 1.0f));
  }

  bool next_step(Step &out) {
    out.clear();
    if (done()) return false;
    out.step = step;
    uint64_t arrivals = static_cast<uint64_t>(p.arrival_rate);
    double frac = p.arrival_rate - static_cast<double>(arrivals);
    if (frac > 0.0 && rng.chance(frac)) ++arrivals;
    arrivals = std::min<uint64_t>(arrivals, p.sequences - arrived);
    arrived += arrivals;
    queued += arrivals;
    while (queued && active.size() < p.max_active) start(out);
    const uint64_t bs = p.block_size_tokens;
    for (Sequence &s : active) {
      if (s.tokens % bs == 0) s.blocks.push_back(new_block(out));  // the new token opens a block
      ++s.tokens;
      if (p.heavy_hitters && p.heavy_drift > 0.0 && rng.chance(p.heavy_drift)) drift(s);
      attend(s, out);
      if (--s.decode_left == 0) out.finished.push_back(s.id);
    }
    if (!out.finished.empty()) {
      auto gone = std::remove_if(active.begin(), active.end(), [](const Sequence &s) { return s.decode_left == 0; });
      finished += static_cast<uint64_t>(active.end() - gone);
      active.erase(gone, active.end());
    }
    ++step;
    return true;
  }
};

SyntheticWorkload::SyntheticWorkload(const SyntheticParams &params) : impl_(std::make_unique<Impl>(params)) {}
SyntheticWorkload::~SyntheticWorkload() = default;
SyntheticWorkload::SyntheticWorkload(SyntheticWorkload &&) noexcept = default;
SyntheticWorkload &SyntheticWorkload::operator=(SyntheticWorkload &&) noexcept = default;

bool SyntheticWorkload::next_step(Step &out) { return impl_->next_step(out); }
const SyntheticParams &SyntheticWorkload::params() const noexcept { return impl_->p; }
uint64_t SyntheticWorkload::steps_done() const noexcept { return impl_->step; }
uint64_t SyntheticWorkload::blocks_created() const noexcept { return impl_->next_block; }
uint64_t SyntheticWorkload::sequences_started() const noexcept { return impl_->started; }
uint64_t SyntheticWorkload::sequences_finished() const noexcept { return impl_->finished; }
uint32_t SyntheticWorkload::active() const noexcept { return static_cast<uint32_t>(impl_->active.size()); }

// --- The attention trace writer ---------------------------------------------------------------

namespace {

// A plain or gzip output file that throws Error(CXLT_ERROR_IO) naming it on any failure.
// Created owner-only (0600, whatever the umask: a trace holds the prefix hashes of users'
// prompts) and never through a symbolic link planted at the path (O_NOFOLLOW).
class Output {
public:
  Output(const std::string &path, bool gz) : path_(path), gz_(gz) {
    // O_NONBLOCK: a FIFO planted at the temporary name fails here (ENXIO) or below instead of
    // blocking until a reader comes; O_TRUNC only once it is known to be a regular file.
    int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK, 0600);
    if (fd < 0) {
      if (errno == ELOOP) fail(CXLT_ERROR_IO, "cannot create ", path, ": it is a symbolic link; refusing to write through it");
      fail(CXLT_ERROR_IO, "cannot create ", path, ": ", std::strerror(errno));
    }
    struct stat st {};
    if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
      ::close(fd);
      fail(CXLT_ERROR_IO, "cannot create ", path, ": it exists and is not a regular file; refusing to write to it");
    }
    if (::ftruncate(fd, 0) != 0 || ::fcntl(fd, F_SETFL, 0) != 0) {
      int err = errno;
      ::close(fd);
      fail(CXLT_ERROR_IO, "cannot create ", path, ": ", std::strerror(err));
    }
    if (gz_) {
      gz_file_ = gzdopen(fd, "wb6");
      if (!gz_file_) {
        ::close(fd);
        fail(CXLT_ERROR_IO, "cannot create ", path, ": ", std::strerror(errno ? errno : ENOMEM));
      }
    } else {
      file_ = ::fdopen(fd, "wb");
      if (!file_) {
        int err = errno;
        ::close(fd);
        fail(CXLT_ERROR_IO, "cannot create ", path, ": ", std::strerror(err));
      }
    }
  }
  ~Output() {
    if (gz_file_) gzclose(gz_file_);
    if (file_) std::fclose(file_);
  }
  Output(const Output &) = delete;
  Output &operator=(const Output &) = delete;

  void write(const std::string &data) {
    if (data.empty()) return;
    if (gz_) {
      if (gzwrite(gz_file_, data.data(), static_cast<unsigned>(data.size())) != static_cast<int>(data.size())) {
        int err = 0;
        const char *msg = gzerror(gz_file_, &err);
        fail(CXLT_ERROR_IO, "cannot write ", path_, ": ", err == Z_ERRNO ? std::strerror(errno) : msg);
      }
    } else if (std::fwrite(data.data(), 1, data.size(), file_) != data.size()) {
      fail(CXLT_ERROR_IO, "cannot write ", path_, ": ", std::strerror(errno));
    }
  }
  void close() {
    if (gz_file_) {
      int rc = gzclose(gz_file_);
      gz_file_ = nullptr;
      if (rc != Z_OK) fail(CXLT_ERROR_IO, "cannot finish ", path_, ": gzclose failed (", rc, ")");
    }
    if (file_) {
      int rc = std::fclose(file_);
      file_ = nullptr;
      if (rc != 0) fail(CXLT_ERROR_IO, "cannot finish ", path_, ": ", std::strerror(errno));
    }
  }

private:
  std::string path_;
  bool gz_;
  gzFile gz_file_ = nullptr;
  FILE *file_ = nullptr;
};

void append_step(std::string &out, const Step &st) {
  out += "{\"step\":";
  append_u64(out, st.step);
  // Touches grouped by sequence: one (seq, count) pair per run.
  out += ",\"seq\":[";
  size_t groups = 0;
  for (size_t i = 0; i < st.sequence.size(); ++i)
    if (i == 0 || st.sequence[i] != st.sequence[i - 1]) {
      if (groups++) out += ',';
      append_u64(out, st.sequence[i]);
    }
  out += "],\"count\":[";
  size_t run = 0;
  groups = 0;
  for (size_t i = 0; i < st.sequence.size(); ++i) {
    ++run;
    if (i + 1 == st.sequence.size() || st.sequence[i + 1] != st.sequence[i]) {
      if (groups++) out += ',';
      append_u64(out, run);
      run = 0;
    }
  }
  out += ']';
  append_array(out, "blocks", st.block);
  append_array(out, "attn", st.attention);
  append_array(out, "new", st.created);
  append_array(out, "done", st.finished);
  out += "}\n";
}

}  // namespace

WriteStats write_attention_trace(const std::string &path, const SyntheticParams &params,
                                 const std::function<void(uint64_t, uint64_t)> &progress) {
  SyntheticWorkload work(params);  // validates before any file is touched
  // The trace is renamed over PATH at the end, which would replace whatever PATH is: a
  // symbolic link, a FIFO or a device node (as root, --out /dev/null would replace the
  // system's /dev/null). Only a regular file (or nothing) is
  // replaced. (A node created at PATH between this check and the rename is still replaced:
  // the check guards against mistakes and planted paths in folders others cannot write.)
  if (struct stat st {}; ::lstat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode)) {
    const char *what = S_ISLNK(st.st_mode)    ? "a symbolic link"
                       : S_ISFIFO(st.st_mode) ? "a FIFO"
                       : S_ISCHR(st.st_mode)  ? "a character device"
                       : S_ISBLK(st.st_mode)  ? "a block device"
                       : S_ISDIR(st.st_mode)  ? "a directory"
                       : S_ISSOCK(st.st_mode) ? "a socket"
                                              : "not a regular file";
    fail(CXLT_ERROR_IO, "cannot write the trace to ", path, ": it is ", what,
         "; refusing to replace it (write to a regular file path)");
  }
  const bool gz = path.size() > 3 && path.compare(path.size() - 3, 3, ".gz") == 0;
  // Written under a temporary name and renamed at the end, so a failed run leaves no
  // truncated trace behind under the real name.
  const std::string tmp = path + ".tmp";
  WriteStats ws;
  bool created = false;  // a node planted at the temporary name that Output refused is not ours to remove
  try {
    Output out(tmp, gz);
    created = true;
    std::string buf = "{\"format\":\"";
    buf += kAttentionFormatTag;
    buf += "\",\"version\":";
    append_u64(buf, kAttentionFormatVersion);
    buf += ",\"block_size_tokens\":";
    append_u64(buf, params.block_size_tokens);
    buf += ",\"generator\":";
    buf += params.to_json();
    buf += "}\n";
    const uint64_t total = params.steps;
    const uint64_t every = total ? std::max<uint64_t>(1, total / 100) : 1000;
    Step st;
    while (work.next_step(st)) {
      append_step(buf, st);
      ws.references += st.block.size();
      if (buf.size() >= (1u << 20)) {
        ws.bytes += buf.size();
        out.write(buf);
        buf.clear();
      }
      if (progress && (st.step + 1) % every == 0) progress(st.step + 1, total);
    }
    ws.bytes += buf.size();
    out.write(buf);
    out.close();
  } catch (...) {
    if (created) std::remove(tmp.c_str());
    throw;
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    int e = errno;
    std::remove(tmp.c_str());
    fail(CXLT_ERROR_IO, "cannot rename ", tmp, " to ", path, ": ", std::strerror(e));
  }
  ws.steps = work.steps_done();
  ws.blocks_created = work.blocks_created();
  ws.sequences_started = work.sequences_started();
  ws.sequences_finished = work.sequences_finished();
  if (progress) progress(ws.steps, params.steps);
  return ws;
}

}  // namespace cxltier::trace
