// SPDX-License-Identifier: Apache-2.0
// Trace replay and the parameter sweep (`cxltier replay`, `cxltier sweep`): a block-reference
// trace driven through the runtime itself (null tier backend, synchronous, the same admission,
// eviction index and score store code as with real memory), scored on hit rate. Belady's
// optimum is the bound every policy is checked against. docs/replay.md says what each number
// means; docs/replay-report.md holds the results on the shared traces.
//
// Unstable: part of the cxltier CLI's toolkit (include/cxltier/tools/), not of the engine's
// contract. Its names, types and behaviour may change in any release; the ABI and API promise
// covers cxltier.h and the C++ headers beside it in include/cxltier/, not this file.
#pragma once

#include <cxltier/config.hpp>
#include <cxltier/cxltier.h>
#include <cxltier/policy.hpp>
#include <cxltier/topology.hpp>
#include <cxltier/tools/trace.hpp>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace cxltier::replay {

// The canonical block (80 layers x 8 KV heads x 128 x bf16 x 2 x 16 tokens): 5 MiB.
constexpr uint64_t kCanonicalBlockBytes = 5ull << 20;

// A policy as the replay names it: a kind and whether policy state survives eviction.
// "lrfu-nopersist" and "lfu-nopersist" are the kind with persist = false.
struct PolicyChoice {
  PolicyKind kind = PolicyKind::lrfu;
  bool persist = true;
};
// "lru", "fifo", "lfu", "arc", "lrfu", "opt", "lrfu-nopersist", "lfu-nopersist" (case-insensitive).
// Throws Error(CXLT_ERROR_INVALID_ARGUMENT) quoting the text and listing the names.
CXLT_API PolicyChoice parse_policy(std::string_view text);
// "lrfu", "lrfu-nopersist", "lfu-nopersist", "lru", ...: the kind, "-nopersist" when state is
// reset on re-admission and the kind's order reads that state (lrfu, lfu); see persist_matters.
CXLT_API std::string policy_label(PolicyChoice p);
// Whether the kept state changes this policy's decisions. LRU, FIFO, ARC and OPT order blocks
// by what happens while they are resident (or, ARC, by its own ghost lists), so persist on and
// off give the same hits; LRFU (score) and LFU (count) read the restored state.
CXLT_API bool persist_matters(PolicyKind kind) noexcept;

// One tier of a multi-tier replay: a null-backend tier of this kind holding budget_bytes.
struct TierBudget {
  std::string name;  // the kind's name
  TierKind kind = TierKind::hbm;
  uint64_t budget_bytes = 0;
};
// "hbm=32GiB,dram=128GiB,cxl=256GiB": fastest first. Kinds: hbm, dram, cxl (the tiers of the
// emulated topology that null tiers stand for), each at most once. Throws
// Error(CXLT_ERROR_INVALID_ARGUMENT) naming the item.
CXLT_API std::vector<TierBudget> parse_tiers(std::string_view spec);

// Next-use table for OPT: next[i] is the index of the next reference to the block of reference
// i (UINT64_MAX: never). One pass over the trace; memory 8 bytes per reference plus a hash map
// of the unique blocks.
struct Prepass {
  trace::Format format = trace::Format::mooncake;
  uint32_t block_size_tokens = 0;
  bool trace_attention = false;
  uint64_t requests = 0;
  uint64_t references = 0;
  uint64_t unique_blocks = 0;
  uint64_t malformed_lines = 0;
  std::vector<uint64_t> next;  // empty unless asked for
};
CXLT_API Prepass prepass(const std::string &path, const trace::ReaderOptions &reader, bool next_use);

struct Progress {
  uint64_t references = 0;  // done so far
  uint64_t requests = 0;
  uint64_t bytes = 0;       // uncompressed bytes read
};

struct Options {
  std::string trace;
  trace::ReaderOptions reader;
  PolicyChoice policy;
  LrfuParams lrfu;                // lrfu only
  unsigned index_buckets = 256;   // lrfu only
  uint64_t block_bytes = kCanonicalBlockBytes;
  // One tier holding capacity_blocks blocks, or (capacity_blocks = 0) the tiers below.
  uint64_t capacity_blocks = 0;
  std::vector<TierBudget> tiers;
  PromotionRule promotion = PromotionRule::score_above_victim;  // several tiers only
  // OPT's next-use table when the caller computed it already (the sweep shares one); computed
  // here when null. Must come from the same trace and reader options.
  const Prepass *next_use = nullptr;
  // Also replay OPT on one tier of the total capacity and report its hits (Result::opt_hits):
  // the bound this run is checked against. Always done for several tiers.
  bool opt_bound = false;
  // Called about every 2^20 references and at the end.
  std::function<void(const Progress &)> progress;
};

struct TierResult {
  std::string name;
  TierKind kind = TierKind::hbm;
  uint64_t budget_bytes = 0;
  uint64_t capacity_blocks = 0;
  uint64_t hits = 0;            // references that found the block in this tier
  uint64_t admissions = 0;      // blocks placed into this tier (admitted or moved in)
  uint64_t blocks_at_end = 0;
};

struct Result {
  std::string trace;
  trace::Format format = trace::Format::mooncake;
  uint32_t block_size_tokens = 0;
  PolicyChoice policy;
  LrfuParams lrfu;
  unsigned index_buckets = 256;
  PromotionRule promotion = PromotionRule::never;  // never for one tier
  uint64_t block_bytes = 0;
  uint64_t capacity_blocks = 0;  // all tiers together
  uint64_t requests = 0;         // requests (hash traces) or decode steps (attention traces)
  uint64_t steps = 0;            // decode clock at the end
  uint64_t references = 0;
  uint64_t unique_blocks = 0;
  uint64_t hits = 0;
  uint64_t misses = 0;
  double hit_rate = 0.0;         // hits / references
  bool trace_attention = false;  // true: attention from the trace; false: every access 1.0
  std::vector<TierResult> tiers;
  uint64_t drops = 0;            // blocks that left the last tier (their state kept)
  uint64_t demotions = 0;
  uint64_t promotions = 0;
  uint64_t readmissions_restored = 0;  // misses whose kept state was restored (persist on)
  uint64_t opt_bypassed = 0;     // opt: misses admitted and evicted at once (farthest next use)
  uint64_t malformed_lines = 0;
  std::vector<trace::Issue> issues;  // the first malformed lines
  uint64_t other_events = 0;     // valid lines that are not requests (Dynamo tool events)
  double seconds = 0.0;          // replay wall time, reading included (the OPT pre-pass excluded)
  bool opt_single_tier = false;  // policy opt asked with several tiers: replayed as one tier of the total
  // OPT's hits on one tier of the total capacity (Options::opt_bound or several tiers), and
  // the check: a message when this run's hits exceed them (a bug), else empty.
  std::optional<uint64_t> opt_hits;
  std::string opt_violation;
};

// Replays options.trace. Throws Error: CXLT_ERROR_INVALID_ARGUMENT (options: no capacity, both
// capacity and tiers, a bad block size), CXLT_ERROR_IO / CXLT_ERROR_CORRUPT (the trace; strict
// mode stops at the first malformed line), CXLT_ERROR_CONFIG (the runtime refused the tiers).
CXLT_API Result run(const Options &options);

// "trace" or "constant-1.0".
CXLT_API const char *attention_source(const Result &r) noexcept;
// The result as JSON: {"trace", "format", "policy", "params", "capacity_blocks", "requests",
// "references", "unique_blocks", "hits", "hit_rate", "attention_source", "tiers": [...], ...}
// (docs/replay.md lists every key).
CXLT_API std::string to_json(const Result &r, int indent = 2);

// --- Sweep --------------------------------------------------------------------------------

struct SweepOptions {
  std::string trace;
  trace::ReaderOptions reader;
  std::vector<double> alphas{0.5, 0.3, 0.15, 0.05, 0.01, 0.003, 0.001};
  std::vector<double> betas{0.0, 0.0001, 0.001, 0.01, 0.1};
  ScoreMode mode = ScoreMode::touch;
  unsigned index_buckets = 256;
  std::vector<uint64_t> capacities;        // blocks
  std::vector<double> capacity_fractions;  // of the trace's unique blocks, in (0, 1]
  // Policies (persist as each says); OPT is always added (the bound).
  std::vector<PolicyChoice> policies{{PolicyKind::lrfu, true}, {PolicyKind::lru, true}, {PolicyKind::fifo, true},
                                     {PolicyKind::lfu, true}, {PolicyKind::arc, true}};
  // Each persist value is run for every policy whose decisions read the kept state (lrfu,
  // lfu); empty: as each PolicyChoice says.
  std::vector<bool> persist;
  uint64_t block_bytes = kCanonicalBlockBytes;
  unsigned jobs = 0;  // 0: one per CPU
  // Called from the workers (serialised) after each run: (runs done, runs in all).
  std::function<void(size_t, size_t)> progress;
};

struct SweepRow {
  PolicyChoice policy;
  double alpha = 0;  // lrfu only (NaN otherwise)
  double beta = 0;
  uint64_t capacity_blocks = 0;
  uint64_t hits = 0;
  double hit_rate = 0;
  uint64_t readmissions_restored = 0;
  double seconds = 0;
};

struct SweepResult {
  std::string trace;
  trace::Format format = trace::Format::mooncake;
  uint32_t block_size_tokens = 0;
  uint64_t block_bytes = 0;
  ScoreMode mode = ScoreMode::touch;
  uint64_t requests = 0;
  uint64_t references = 0;
  uint64_t unique_blocks = 0;
  bool trace_attention = false;
  uint64_t malformed_lines = 0;
  std::vector<uint64_t> capacities;  // resolved, ascending, distinct
  std::vector<SweepRow> rows;        // by capacity, then policy, persist, alpha, beta
  std::vector<std::string> violations;  // a policy with more hits than OPT: a bug
  unsigned jobs = 0;
  double seconds = 0;
};

// Runs the grid in parallel (one runtime and one reader per run). Throws like run(); the
// violations are returned, not thrown (the CLI fails with them).
CXLT_API SweepResult sweep(const SweepOptions &options);

// OPT check over any set of results on one trace: one message per row whose hits exceed the
// OPT row's at the same capacity ("lru at 100 blocks: 5 hits > opt's 4"). Empty when none.
CXLT_API std::vector<std::string> opt_violations(const std::vector<SweepRow> &rows);

CXLT_API std::string sweep_json(const SweepResult &r, int indent = 2);
// One row per run: trace,capacity_blocks,policy,persist,alpha,beta,hits,references,hit_rate.
CXLT_API std::string sweep_csv(const SweepResult &r);

}  // namespace cxltier::replay
