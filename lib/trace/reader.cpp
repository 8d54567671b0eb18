// SPDX-License-Identifier: Apache-2.0
// The trace readers: format names, detection from content, and one line parser per format on
// top of the strict JSON scanner. A line is a request, another valid event (Dynamo tool calls),
// or malformed (reported with its number and reason; strict mode throws).
#include <cxltier/tools/trace.hpp>

#include <cxltier/error.hpp>

#include "lib/core/text.hpp"
#include "lib/trace/input.hpp"
#include "lib/trace/json_scan.hpp"

#include <xxhash.h>

#include <cmath>
#include <limits>

namespace cxltier::trace {

namespace {

constexpr uint64_t kProbeLines = 100000;  // detection and block-size probing look this far

bool blank(std::string_view line) noexcept {
  for (char c : line)
    if (c != ' ' && c != '\t' && c != '\r') return false;
  return true;
}

enum class LineResult { request, other, malformed };

}  // namespace

const char *format_name(Format f) noexcept {
  switch (f) {
    case Format::mooncake: return "mooncake";
    case Format::bailian: return "bailian";
    case Format::dynamo: return "dynamo";
    case Format::attention: return "attention";
  }
  return "unknown";
}

Format parse_format(std::string_view text) {
  for (Format f : {Format::mooncake, Format::bailian, Format::dynamo, Format::attention})
    if (text::iequal(text, format_name(f))) return f;
  if (text::iequal(text, "qwen") || text::iequal(text, "qwen-bailian")) return Format::bailian;
  fail(CXLT_ERROR_INVALID_ARGUMENT, "trace format '", text,
       "' is not one of mooncake, bailian, dynamo, attention");
}

uint32_t default_block_size_tokens(Format f) noexcept { return f == Format::mooncake ? 512 : 16; }

struct __attribute__((visibility("hidden"))) Reader::Impl {  // not exported
  std::string path;
  ReaderOptions opt;
  Format fmt = Format::mooncake;
  uint32_t block_size = 0;
  bool gz = false;
  std::string header;
  uint64_t header_line = 0;
  detail::LineReader lines;
  detail::Scanner sc;
  ReaderStats stats;
  std::string reason;  // why the last line was malformed

  // Buffers the Request spans point into.
  std::vector<uint64_t> blocks, seqs, group_seq, counts, created, finished;
  std::vector<float> attn;
  std::string str;  // scratch for string values
  bool probing = false;     // block sizes are not checked while probing
  uint32_t dynamo_bs = 0;   // the first trace_block_size seen while probing
  bool have_step = false;
  uint64_t last_step = 0;

  Impl(std::unique_ptr<detail::Input> in, std::string name, const ReaderOptions &o, bool compressed)
      : path(std::move(name)), opt(o), gz(compressed), lines(std::move(in), o.max_line_bytes) {
    open();
  }

  // --- Set-up: detection, the attention header, block sizes.
  void open() {
    if (opt.format) {
      fmt = *opt.format;
    } else {
      fmt = detect();
      lines.rewind();
    }
    switch (fmt) {
      case Format::mooncake:
      case Format::bailian:
        block_size = opt.block_size_tokens ? opt.block_size_tokens : default_block_size_tokens(fmt);
        break;
      case Format::dynamo:
        probe_dynamo_block_size();
        lines.rewind();
        break;
      case Format::attention:
        read_header();
        lines.rewind();
        break;
    }
    stats = ReaderStats{};
  }

  [[noreturn]] void corrupt(uint64_t line, const std::string &why) const {
    fail(CXLT_ERROR_CORRUPT, path, ":", line, ": ", why);
  }

  // The format of the first line that is a valid JSON object.
  Format detect() {
    std::string_view line;
    uint64_t no = 0;
    bool any = false;
    for (uint64_t seen = 0; seen < kProbeLines;) {
      auto k = lines.next(line, no);
      if (k == detail::LineReader::Kind::end) break;
      any = true;
      if (k == detail::LineReader::Kind::too_long || k == detail::LineReader::Kind::damaged) {
        if (opt.strict)
          corrupt(no, k == detail::LineReader::Kind::damaged ? lines.input().damage() : "line too long");
        ++seen;
        continue;
      }
      if (blank(line)) continue;
      ++seen;
      bool fmt_tag = false, event = false, chat = false, hashes = false;
      sc.reset(line);
      if (sc.begin_object()) {
        std::string_view key;
        while (sc.next_key(key)) {
          if (key == "format") {
            if (sc.null_value()) continue;
            if (sc.at('"')) {
              if (!sc.string_value(str, "format")) break;
              fmt_tag = fmt_tag || str == kAttentionFormatTag;
              continue;
            }
          } else if (key == "event") {
            event = true;
          } else if (key == "chat_id") {
            chat = true;
          } else if (key == "hash_ids") {
            hashes = true;
          }
          if (!sc.skip_value()) break;
        }
      }
      if (!sc.ok() || !sc.finish()) {
        if (opt.strict) corrupt(no, "cannot detect the trace format: " + sc.reason());
        continue;
      }
      if (fmt_tag) return Format::attention;
      if (event) return Format::dynamo;
      if (chat) return Format::bailian;
      if (hashes) return Format::mooncake;
      corrupt(no, "cannot detect the trace format: the first JSON object has none of the fields "
                  "\"hash_ids\" (mooncake), \"chat_id\" (bailian), \"event\" (dynamo), "
                  "\"format\" (attention); pass the format explicitly");
    }
    if (!any)
      fail(CXLT_ERROR_CORRUPT, path, ": the trace is empty, so its format cannot be detected");
    fail(CXLT_ERROR_CORRUPT, path, ": cannot detect the trace format: no valid JSON object line in the first ",
         kProbeLines, " lines (is it a trace?)");
  }

  void probe_dynamo_block_size() {
    probing = true;
    std::string_view line;
    uint64_t no = 0;
    Request r;
    for (uint64_t i = 0; i < kProbeLines && dynamo_bs == 0; ++i) {
      auto k = lines.next(line, no);
      if (k == detail::LineReader::Kind::end) break;
      if (k != detail::LineReader::Kind::line && k != detail::LineReader::Kind::unterminated) continue;
      if (!blank(line)) (void)parse_dynamo(line, r);
    }
    probing = false;
    if (dynamo_bs && opt.block_size_tokens && opt.block_size_tokens != dynamo_bs)
      fail(CXLT_ERROR_INVALID_ARGUMENT, "block size ", opt.block_size_tokens, " tokens was given, but ", path,
           " says trace_block_size ", dynamo_bs);
    block_size = dynamo_bs ? dynamo_bs : (opt.block_size_tokens ? opt.block_size_tokens : 16);
  }

  void read_header() {
    std::string_view line;
    uint64_t no = 0;
    for (;;) {
      auto k = lines.next(line, no);
      if (k == detail::LineReader::Kind::end) fail(CXLT_ERROR_CORRUPT, path, ": empty attention trace (no header line)");
      if (k == detail::LineReader::Kind::too_long) corrupt(no, "attention trace header: line too long");
      if (k == detail::LineReader::Kind::damaged) corrupt(no, "attention trace header: " + lines.input().damage());
      if (!blank(line)) break;
    }
    header_line = no;
    sc.reset(line);
    bool tag = false, have_version = false;
    uint64_t version = 0, bs = 0;
    if (sc.begin_object()) {
      std::string_view key;
      while (sc.next_key(key)) {
        if (key == "format") {
          if (!sc.string_value(str, "format")) break;
          tag = str == kAttentionFormatTag;
          if (!tag) corrupt(no, "attention trace header: format is \"" + str + "\", not \"" + kAttentionFormatTag + "\"");
        } else if (key == "version") {
          if (!sc.u64_value(version, "version")) break;
          have_version = true;
        } else if (key == "block_size_tokens") {
          if (!sc.u64_value(bs, "block_size_tokens")) break;
        } else if (!sc.skip_value()) {
          break;
        }
      }
    }
    if (!sc.ok() || !sc.finish()) corrupt(no, "attention trace header: " + sc.reason());
    if (!tag) corrupt(no, std::string("attention trace header: the first line must carry \"format\": \"") + kAttentionFormatTag + "\"");
    if (!have_version) corrupt(no, "attention trace header: missing field version");
    if (version != kAttentionFormatVersion)
      corrupt(no, "attention trace header: version " + std::to_string(version) + " is not supported (this build reads version " +
                      std::to_string(kAttentionFormatVersion) + ")");
    if (bs == 0 || bs > std::numeric_limits<uint32_t>::max())
      corrupt(no, "attention trace header: block_size_tokens must be a whole number in [1, 2^32-1], not " + std::to_string(bs));
    if (opt.block_size_tokens && opt.block_size_tokens != bs)
      fail(CXLT_ERROR_INVALID_ARGUMENT, "block size ", opt.block_size_tokens, " tokens was given, but ", path,
           " says block_size_tokens ", bs);
    block_size = static_cast<uint32_t>(bs);
    header.assign(line);
    while (!header.empty() && (header.back() == '\r' || header.back() == ' ' || header.back() == '\t')) header.pop_back();
  }

  // --- Reading.
  void malformed(uint64_t line, std::string why) {
    ++stats.malformed;
    if (stats.issues.size() < opt.issues_kept) stats.issues.push_back({line, why});
    if (opt.strict) corrupt(line, why);
  }

  bool next(Request &r) {
    std::string_view line;
    uint64_t no = 0;
    for (;;) {
      auto k = lines.next(line, no);
      stats.bytes = lines.bytes();
      switch (k) {
        case detail::LineReader::Kind::end: return false;
        case detail::LineReader::Kind::too_long:
          ++stats.lines;
          malformed(no, "line longer than " + std::to_string(opt.max_line_bytes) + " bytes (ReaderOptions::max_line_bytes)");
          continue;
        case detail::LineReader::Kind::damaged:
          ++stats.lines;
          malformed(no, lines.input().damage());
          continue;
        case detail::LineReader::Kind::line:
        case detail::LineReader::Kind::unterminated: break;
      }
      ++stats.lines;
      if (blank(line)) {
        ++stats.empty_lines;
        continue;
      }
      if (no == header_line && fmt == Format::attention) continue;
      LineResult res = parse(line, r);
      if (res == LineResult::request) {
        r.index = stats.requests++;
        r.line = no;
        stats.references += r.blocks.size();
        return true;
      }
      if (res == LineResult::other) {
        ++stats.other_events;
        continue;
      }
      if (k == detail::LineReader::Kind::unterminated) reason += " (the last line has no newline: is the file truncated?)";
      malformed(no, std::move(reason));
    }
  }

  LineResult parse(std::string_view line, Request &r) {
    r.timestamp_s = std::numeric_limits<double>::quiet_NaN();
    r.has_session = r.has_parent = false;
    r.session = r.parent_session = 0;
    r.input_tokens = r.output_tokens = 0;
    r.step = 0;
    r.attention = {};
    r.sequences = {};
    r.created = {};
    r.finished = {};
    blocks.clear();
    LineResult res = LineResult::malformed;
    switch (fmt) {
      case Format::mooncake: res = parse_mooncake(line, r); break;
      case Format::bailian: res = parse_bailian(line, r); break;
      case Format::dynamo: res = parse_dynamo(line, r); break;
      case Format::attention: res = parse_attention(line, r); break;
    }
    r.blocks = blocks;
    return res;
  }

  LineResult bad(std::string why) {
    reason = std::move(why);
    return LineResult::malformed;
  }
  LineResult scan_error() { return bad(sc.reason()); }
  static LineResult duplicate(Impl &self, std::string_view key) {
    return self.bad("duplicate field \"" + std::string(key) + "\"");
  }

  // {"timestamp": ms, "input_length": n, "output_length": n, "hash_ids": [...]}
  LineResult parse_mooncake(std::string_view line, Request &r) {
    sc.reset(line);
    if (!sc.begin_object()) return scan_error();
    bool ids = false, ts = false;
    std::string_view key;
    while (sc.next_key(key)) {
      if (key == "hash_ids") {
        if (ids) return duplicate(*this, key);
        ids = true;
        if (!sc.u64_array(blocks, "hash_ids")) break;
      } else if (key == "timestamp") {
        if (ts) return duplicate(*this, key);
        ts = true;
        if (!sc.f64_value(r.timestamp_s, "timestamp")) break;
        r.timestamp_s /= 1000.0;
      } else if (key == "input_length") {
        if (!sc.u64_value(r.input_tokens, "input_length")) break;
      } else if (key == "output_length") {
        if (!sc.u64_value(r.output_tokens, "output_length")) break;
      } else if (!sc.skip_value()) {
        break;
      }
    }
    if (!sc.ok() || !sc.finish()) return scan_error();
    if (!ids) return bad("missing field \"hash_ids\"");
    return LineResult::request;
  }

  // {"chat_id": n, "parent_chat_id": n|-1, "timestamp": s, "input_length", "output_length",
  //  "type", "turn", "hash_ids": [...]}
  LineResult parse_bailian(std::string_view line, Request &r) {
    sc.reset(line);
    if (!sc.begin_object()) return scan_error();
    bool ids = false, chat = false, parent = false, ts = false;
    std::string_view key;
    while (sc.next_key(key)) {
      if (key == "hash_ids") {
        if (ids) return duplicate(*this, key);
        ids = true;
        if (!sc.u64_array(blocks, "hash_ids")) break;
      } else if (key == "chat_id") {
        if (chat) return duplicate(*this, key);
        chat = true;
        if (!sc.u64_value(r.session, "chat_id")) break;
      } else if (key == "parent_chat_id") {
        if (parent) return duplicate(*this, key);
        parent = true;
        int64_t p = 0;
        if (!sc.i64_value(p, "parent_chat_id")) break;
        if (p < -1) return bad("parent_chat_id: " + std::to_string(p) + " is neither -1 (no parent) nor a chat id");
        r.has_parent = p >= 0;
        r.parent_session = p >= 0 ? static_cast<uint64_t>(p) : 0;
      } else if (key == "timestamp") {
        if (ts) return duplicate(*this, key);
        ts = true;
        if (!sc.f64_value(r.timestamp_s, "timestamp")) break;
      } else if (key == "input_length") {
        if (!sc.u64_value(r.input_tokens, "input_length")) break;
      } else if (key == "output_length") {
        if (!sc.u64_value(r.output_tokens, "output_length")) break;
      } else if (!sc.skip_value()) {
        break;
      }
    }
    if (!sc.ok() || !sc.finish()) return scan_error();
    if (!chat) return bad("missing field \"chat_id\"");
    if (!ids) return bad("missing field \"hash_ids\"");
    r.has_session = true;
    return LineResult::request;
  }

  // {"timestamp": ms, "event": {"event_type": "request_end", "agent_context": {"session_id",
  //  "parent_session_id"}, "request": {"output_tokens", "replay": {"trace_block_size",
  //  "input_length", "input_sequence_hashes": [...]}}}}; other event types are not requests.
  LineResult parse_dynamo(std::string_view line, Request &r) {
    sc.reset(line);
    if (!sc.begin_object()) return scan_error();
    bool event = false, type = false, hashes = false, ts = false;
    bool is_request_end = false;
    uint64_t bs = 0;
    bool bs_given = false;  // a trace_block_size of 0 is malformed, not "absent"
    std::string_view key;
    while (sc.next_key(key)) {
      if (key == "timestamp") {
        if (ts) return duplicate(*this, key);
        ts = true;
        if (!sc.f64_value(r.timestamp_s, "timestamp")) break;
        r.timestamp_s /= 1000.0;
      } else if (key == "event") {
        if (event) return duplicate(*this, key);
        event = true;
        if (!sc.begin_object()) {
          sc.fail("event: expected an object");
          break;
        }
        while (sc.next_key(key)) {
          if (key == "event_type") {
            if (type) return duplicate(*this, "event.event_type");
            type = true;
            if (!sc.string_value(str, "event.event_type")) break;
            is_request_end = str == "request_end";
          } else if (key == "agent_context" && sc.at('{')) {
            sc.begin_object();
            while (sc.next_key(key)) {
              if (key == "session_id" && sc.at('"')) {
                if (!sc.string_value(str, "event.agent_context.session_id")) break;
                r.has_session = true;
                r.session = XXH3_64bits(str.data(), str.size());
              } else if (key == "parent_session_id" && sc.at('"')) {
                if (!sc.string_value(str, "event.agent_context.parent_session_id")) break;
                r.has_parent = true;
                r.parent_session = XXH3_64bits(str.data(), str.size());
              } else if (!sc.skip_value()) {
                break;
              }
            }
          } else if (key == "request" && sc.at('{')) {
            sc.begin_object();
            while (sc.next_key(key)) {
              if (key == "output_tokens" && !sc.at('n')) {
                if (!sc.u64_value(r.output_tokens, "event.request.output_tokens")) break;
              } else if (key == "replay" && sc.at('{')) {
                sc.begin_object();
                while (sc.next_key(key)) {
                  if (key == "input_sequence_hashes") {
                    if (hashes) return duplicate(*this, "event.request.replay.input_sequence_hashes");
                    hashes = true;
                    if (!sc.u64_array(blocks, "event.request.replay.input_sequence_hashes")) break;
                  } else if (key == "trace_block_size") {
                    if (!sc.u64_value(bs, "event.request.replay.trace_block_size")) break;
                    bs_given = true;
                  } else if (key == "input_length") {
                    if (!sc.u64_value(r.input_tokens, "event.request.replay.input_length")) break;
                  } else if (!sc.skip_value()) {
                    break;
                  }
                }
              } else if (!sc.skip_value()) {
                break;
              }
            }
          } else if (!sc.skip_value()) {
            break;
          }
        }
      } else if (!sc.skip_value()) {
        break;
      }
    }
    if (!sc.ok() || !sc.finish()) return scan_error();
    if (!event) return bad("missing field \"event\"");
    if (!type) return bad("missing field \"event.event_type\"");
    if (!is_request_end) return LineResult::other;
    if (!hashes) return bad("request_end event without event.request.replay.input_sequence_hashes");
    if (bs_given && bs == 0) return bad("event.request.replay.trace_block_size is 0: a block holds at least one token");
    if (bs > std::numeric_limits<uint32_t>::max())
      return bad("event.request.replay.trace_block_size " + std::to_string(bs) + " is out of range");
    if (probing) {
      if (bs && !dynamo_bs) dynamo_bs = static_cast<uint32_t>(bs);
    } else if (bs && bs != block_size) {
      return bad("event.request.replay.trace_block_size " + std::to_string(bs) + " differs from the trace's " +
                 std::to_string(block_size));
    }
    return LineResult::request;
  }

  // {"step": n, "seq": [...], "count": [...], "blocks": [...], "attn": [...], "new": [...],
  //  "done": [...]} (docs/traces.md)
  LineResult parse_attention(std::string_view line, Request &r) {
    sc.reset(line);
    if (!sc.begin_object()) return scan_error();
    group_seq.clear();
    counts.clear();
    created.clear();
    finished.clear();
    attn.clear();
    enum : unsigned { kStep = 1, kSeq = 2, kCount = 4, kBlocks = 8, kAttn = 16, kNew = 32, kDone = 64 };
    unsigned seen = 0;
    auto once = [&seen](unsigned bit) {
      bool first = !(seen & bit);
      seen |= bit;
      return first;
    };
    std::string_view key;
    while (sc.next_key(key)) {
      if (key == "step") {
        if (!once(kStep)) return duplicate(*this, key);
        if (!sc.u64_value(r.step, "step")) break;
      } else if (key == "seq") {
        if (!once(kSeq)) return duplicate(*this, key);
        if (!sc.u64_array(group_seq, "seq")) break;
      } else if (key == "count") {
        if (!once(kCount)) return duplicate(*this, key);
        if (!sc.u64_array(counts, "count")) break;
      } else if (key == "blocks") {
        if (!once(kBlocks)) return duplicate(*this, key);
        if (!sc.u64_array(blocks, "blocks")) break;
      } else if (key == "attn") {
        if (!once(kAttn)) return duplicate(*this, key);
        if (!sc.f32_array(attn, "attn")) break;
      } else if (key == "new") {
        if (!once(kNew)) return duplicate(*this, key);
        if (!sc.u64_array(created, "new")) break;
      } else if (key == "done") {
        if (!once(kDone)) return duplicate(*this, key);
        if (!sc.u64_array(finished, "done")) break;
      } else if (key == "format") {
        return bad("a second header line (only the first line may carry \"format\")");
      } else if (!sc.skip_value()) {
        break;
      }
    }
    if (!sc.ok() || !sc.finish()) return scan_error();
    for (auto [bit, name] : {std::pair{kStep, "step"}, {kSeq, "seq"}, {kCount, "count"}, {kBlocks, "blocks"}, {kAttn, "attn"}})
      if (!(seen & bit)) return bad(std::string("missing field \"") + name + "\"");
    if (group_seq.size() != counts.size())
      return bad("seq has " + std::to_string(group_seq.size()) + " entries but count has " + std::to_string(counts.size()));
    uint64_t total = 0;
    for (uint64_t c : counts) {
      if (c > blocks.size() - total)
        return bad("count adds up to more than the " + std::to_string(blocks.size()) + " entries of blocks");
      total += c;
    }
    if (total != blocks.size())
      return bad("count adds up to " + std::to_string(total) + " but blocks has " + std::to_string(blocks.size()) + " entries");
    if (attn.size() != blocks.size())
      return bad("attn has " + std::to_string(attn.size()) + " entries but blocks has " + std::to_string(blocks.size()));
    for (size_t i = 0; i < attn.size(); ++i)
      if (!(attn[i] >= 0.0f && attn[i] <= 1.0f))
        return bad("attn element " + std::to_string(i) + " is " + std::to_string(attn[i]) + ", outside [0, 1]");
    if (have_step && r.step <= last_step)
      return bad("step " + std::to_string(r.step) + " does not come after step " + std::to_string(last_step));
    seqs.clear();
    for (size_t g = 0; g < counts.size(); ++g) seqs.insert(seqs.end(), counts[g], group_seq[g]);
    have_step = true;
    last_step = r.step;
    r.attention = attn;
    r.sequences = seqs;
    r.created = created;
    r.finished = finished;
    return LineResult::request;
  }

};

Reader::Reader(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Reader::Reader(const std::string &path, const ReaderOptions &options) {
  bool gz = false;
  auto in = detail::open_file(path, gz);
  impl_ = std::make_unique<Impl>(std::move(in), path, options, gz);
}

Reader Reader::from_memory(std::string data, const ReaderOptions &options, std::string name) {
  bool gz = false;
  auto in = detail::open_memory(std::move(data), name, gz);
  return Reader(std::make_unique<Impl>(std::move(in), std::move(name), options, gz));
}

Reader::~Reader() = default;
Reader::Reader(Reader &&) noexcept = default;
Reader &Reader::operator=(Reader &&) noexcept = default;

bool Reader::next(Request &out) { return impl_->next(out); }

void Reader::rewind() {
  impl_->lines.rewind();
  impl_->stats = ReaderStats{};
  impl_->have_step = false;
  impl_->last_step = 0;
}

Format Reader::format() const noexcept { return impl_->fmt; }
uint32_t Reader::block_size_tokens() const noexcept { return impl_->block_size; }
bool Reader::has_attention() const noexcept { return impl_->fmt == Format::attention; }
bool Reader::compressed() const noexcept { return impl_->gz; }
const std::string &Reader::path() const noexcept { return impl_->path; }
const std::string &Reader::header() const noexcept { return impl_->header; }
const ReaderStats &Reader::stats() const noexcept { return impl_->stats; }

}  // namespace cxltier::trace
