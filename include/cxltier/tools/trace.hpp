// SPDX-License-Identifier: Apache-2.0
// Block-reference traces: streaming readers for the public KV-cache request traces (Mooncake,
// Qwen-Bailian, Dynamo) and for cxltier's own attention trace, and the seeded synthetic
// attention workload that writes that format and drives the runtime's main job in-process.
// Formats, fields and every generator parameter are documented in docs/traces.md.
//
// Unstable: part of the cxltier CLI's toolkit (include/cxltier/tools/), not of the engine's
// contract. Its names, types and behaviour may change in any release; the ABI and API promise
// covers cxltier.h and the C++ headers beside it in include/cxltier/, not this file.
#pragma once

#include <cxltier/cxltier.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace cxltier::trace {

// --- Formats ----------------------------------------------------------------------------------

enum class Format {
  mooncake,   // JSONL, {"timestamp": ms, "hash_ids": [...]}; 512-token blocks by default
  bailian,    // Qwen-Bailian JSONL, {"chat_id", "parent_chat_id", "timestamp": s, "hash_ids"}; 16
  dynamo,     // Dynamo request trace (usually gzip), request_end events; block size in the file
  attention,  // cxltier attention trace: a header line, then one line per decode step
};

// "mooncake", "bailian", "dynamo", "attention".
CXLT_API const char *format_name(Format f) noexcept;
// The inverse of format_name (case-insensitive; "qwen" is accepted for bailian). Throws
// Error(CXLT_ERROR_INVALID_ARGUMENT) quoting the text and listing the valid names.
CXLT_API Format parse_format(std::string_view text);
// Tokens per block when neither the file nor the caller says: 512, 16, 16, 16.
CXLT_API uint32_t default_block_size_tokens(Format f) noexcept;

// Version of the attention trace format that this build writes and reads.
constexpr uint32_t kAttentionFormatVersion = 1;
// The value of the header's "format" field.
constexpr const char *kAttentionFormatTag = "cxltier-attention";

// --- Reader -----------------------------------------------------------------------------------

struct ReaderOptions {
  std::optional<Format> format;    // unset: detected from the first lines of the file
  bool strict = false;             // a malformed line throws instead of being skipped and counted
  uint32_t block_size_tokens = 0;  // 0: the file's value or the format's default (see docs)
  uint64_t max_line_bytes = 256ull << 20;  // a longer line is malformed (bounds memory)
  uint32_t issues_kept = 16;       // how many malformed lines keep their number and reason
};

// One request (hash traces) or one decode step (attention traces). The spans point into
// buffers owned by the Reader and stay valid until its next call to next() or rewind().
struct Request {
  uint64_t index = 0;  // 0-based among the requests returned
  uint64_t line = 0;   // 1-based line in the (uncompressed) file
  double timestamp_s = 0.0;  // seconds; NaN when the line has none (attention traces)
  bool has_session = false;
  uint64_t session = 0;         // bailian chat_id; dynamo XXH3-64 of agent_context.session_id
  bool has_parent = false;
  uint64_t parent_session = 0;  // bailian parent_chat_id (absent or -1: has_parent false);
                                // dynamo XXH3-64 of agent_context.parent_session_id
  uint64_t input_tokens = 0;    // input_length where the line has it, else 0
  uint64_t output_tokens = 0;   // output_length where the line has it, else 0
  uint64_t step = 0;            // attention traces: the decode step of this line
  std::span<const uint64_t> blocks;     // block ids, in reference order
  std::span<const float> attention;     // attention traces: mass per reference; else empty
  std::span<const uint64_t> sequences;  // attention traces: sequence of each reference; else empty
  std::span<const uint64_t> created;    // attention traces: blocks first created this step
  std::span<const uint64_t> finished;   // attention traces: sequences that ended this step
};

// A malformed line: where and why.
struct Issue {
  uint64_t line = 0;
  std::string reason;
};

struct ReaderStats {
  uint64_t bytes = 0;            // uncompressed bytes consumed
  uint64_t lines = 0;            // lines read, empty ones included
  uint64_t empty_lines = 0;      // blank lines (skipped silently)
  uint64_t requests = 0;         // requests (steps) returned by next()
  uint64_t references = 0;       // block references in those requests
  uint64_t malformed = 0;        // malformed lines skipped (lenient mode)
  uint64_t other_events = 0;     // valid lines that are not requests (Dynamo tool events)
  std::vector<Issue> issues;     // the first ReaderOptions::issues_kept malformed lines
};

// A streaming reader: constant memory per request (the longest line, bounded by
// max_line_bytes), gzip read directly (detected by its magic bytes), format detected from
// content. Not thread-safe; one reader per thread.
class CXLT_API Reader {
public:
  // Opens `path`. Throws Error: CXLT_ERROR_IO (cannot open or read), CXLT_ERROR_CORRUPT (the
  // format cannot be detected, an attention header is bad, or a strict-mode malformed line
  // during detection), CXLT_ERROR_INVALID_ARGUMENT (a block size that contradicts the file).
  explicit Reader(const std::string &path, const ReaderOptions &options = {});
  // Reads `data` (plain or gzip bytes) from memory; `name` is used in messages.
  static Reader from_memory(std::string data, const ReaderOptions &options = {},
                            std::string name = "<memory>");
  ~Reader();
  Reader(Reader &&) noexcept;
  Reader &operator=(Reader &&) noexcept;

  // The next request in file order; false at the end of the file. A malformed line throws
  // Error(CXLT_ERROR_CORRUPT, "FILE:LINE: reason") in strict mode and is skipped and counted
  // otherwise. A truncated or damaged gzip stream ends the file the same way. I/O errors
  // always throw CXLT_ERROR_IO.
  bool next(Request &out);
  // Back to the first request; statistics restart from zero.
  void rewind();

  Format format() const noexcept;
  uint32_t block_size_tokens() const noexcept;
  bool has_attention() const noexcept;
  bool compressed() const noexcept;      // the input is gzip
  const std::string &path() const noexcept;
  const std::string &header() const noexcept;  // attention traces: the header line; else ""
  const ReaderStats &stats() const noexcept;

private:
  struct Impl;
  explicit Reader(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// --- Synthetic attention workload -------------------------------------------------------------

// Every knob of the generator. Defaults are chosen to give a decode-like workload of about a
// million references in a few seconds; docs/traces.md says what each models.
struct CXLT_API SyntheticParams {
  uint64_t seed = 1;
  uint64_t steps = 2048;          // decode steps to generate; 0: until every sequence finished
  uint32_t sequences = 1024;      // sequences over the whole run
  uint32_t max_active = 32;       // running batch: sequences decoding at once
  double arrival_rate = 0.125;    // new sequences per step (mean); they queue when the batch is full
  uint32_t block_size_tokens = 16;

  uint32_t prefix_groups = 4;     // distinct shared system prompts
  uint32_t prefix_blocks = 64;    // full blocks in each shared prefix
  double prefix_fraction = 0.8;   // share of sequences that start with one of the prefixes
  uint32_t prompt_tokens_min = 64;    // private prompt tokens after the prefix
  uint32_t prompt_tokens_max = 4096;  //   (log-uniform between min and max)
  uint32_t decode_tokens_min = 16;    // tokens generated before the sequence finishes
  uint32_t decode_tokens_max = 1024;  //   (log-uniform between min and max)

  uint32_t sink_blocks = 1;       // attention sinks: the first blocks of a sequence
  uint32_t recent_blocks = 8;     // recency window: the last blocks of a sequence
  uint32_t heavy_hitters = 4;     // blocks per sequence with persistent high mass
  double heavy_drift = 0.002;     // per step, chance that one heavy hitter moves elsewhere
  double sink_mass = 0.25;        // attention mass (per sequence, per step) of each class;
  double recent_mass = 0.35;      //   the tail gets 1 - the three (must be >= 0). Classes a
  double heavy_mass = 0.25;       //   sequence lacks give their mass to the others.
  double tail_fraction = 0.05;    // share of the remaining blocks touched per step (1: dense)
  double jitter = 0.2;            // relative noise on every block's weight, in [0, 1)

  // Throws Error(CXLT_ERROR_INVALID_ARGUMENT) naming the first bad field and its value.
  void validate() const;
  // The parameters as one JSON object (the attention trace header carries it).
  std::string to_json() const;
};

// Why a touched block got its mass this step (the generator's model, for reports and tests).
enum class TouchKind : uint8_t { sink, recent, heavy, tail };

// One decode step. Touches are grouped by sequence (in the order the sequences started) and,
// within one, by block index; the five touch arrays are parallel. Attention of one sequence's
// touches sums to 1 (up to float rounding).
struct Step {
  uint64_t step = 0;
  std::vector<uint64_t> sequence;     // sequence id of each touch
  std::vector<uint32_t> block_index;  // position of the block in its sequence (0 = first)
  std::vector<uint64_t> block;        // block id; blocks of a shared prefix have one id
  std::vector<float> attention;       // mass the block received this step, in [0, 1]
  std::vector<TouchKind> kind;        // sink, recency window, heavy hitter or tail (not in files)
  std::vector<uint64_t> created;      // block ids that exist from this step on
  std::vector<uint64_t> started;      // sequences that started this step
  std::vector<uint64_t> finished;     // sequences that ended after this step (never touched again)
  void clear() noexcept {
    sequence.clear(), block_index.clear(), block.clear(), attention.clear(), kind.clear();
    created.clear(), started.clear(), finished.clear();
  }
};

// Deterministic for a given SyntheticParams on every machine and compiler: its own PRNG
// (xoshiro256**), integer sampling, and float arithmetic without library transcendentals.
class CXLT_API SyntheticWorkload {
public:
  explicit SyntheticWorkload(const SyntheticParams &params);  // validates
  ~SyntheticWorkload();
  SyntheticWorkload(SyntheticWorkload &&) noexcept;
  SyntheticWorkload &operator=(SyntheticWorkload &&) noexcept;

  // Fills `out` with the next decode step; false (and `out` cleared) when `steps` are done or
  // every sequence has finished. Steps in which no sequence runs (waiting for an arrival) are
  // returned too, with no touches.
  bool next_step(Step &out);

  const SyntheticParams &params() const noexcept;
  uint64_t steps_done() const noexcept;
  uint64_t blocks_created() const noexcept;
  uint64_t sequences_started() const noexcept;
  uint64_t sequences_finished() const noexcept;
  uint32_t active() const noexcept;

private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

struct WriteStats {
  uint64_t steps = 0;
  uint64_t references = 0;
  uint64_t blocks_created = 0;
  uint64_t sequences_started = 0;
  uint64_t sequences_finished = 0;
  uint64_t bytes = 0;  // uncompressed bytes written
};

// Writes the workload of `params` as an attention trace (gzip when the path ends in ".gz").
// `progress`, when set, is called about every 1 % of the steps with (steps done, steps total;
// total 0 when params.steps is 0). Throws Error(CXLT_ERROR_IO) naming the file on failure.
CXLT_API WriteStats write_attention_trace(
    const std::string &path, const SyntheticParams &params,
    const std::function<void(uint64_t, uint64_t)> &progress = {});

}  // namespace cxltier::trace
