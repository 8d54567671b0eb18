// SPDX-License-Identifier: Apache-2.0
// Trace replay on the runtime's own code: a Runtime with null tiers (no bytes), synchronous (no
// threads, deterministic), driven one reference at a time through Runtime::reference. The
// OPT pre-pass (next use of every reference), the result and its JSON.
#include <cxltier/error.hpp>
#include <cxltier/key.hpp>
#include <cxltier/tools/replay.hpp>
#include <cxltier/runtime.hpp>
#include <cxltier/tools/units.hpp>

#include "lib/core/text.hpp"
#include "lib/memory/choose.hpp"
#include "lib/replay/id_table.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>

namespace cxltier::replay {

namespace {

constexpr uint64_t kNever = std::numeric_limits<uint64_t>::max();
constexpr uint64_t kProgressEvery = 1u << 20;

using text::iequal;
using text::trim;

// A geometry whose block is exactly `bytes` (only the size matters to null tiers): the
// canonical model for 5 MiB, else one tensor of `bytes` bytes split so every field fits 32 bits.
BlockGeometry geometry_for(uint64_t bytes) {
  if (bytes == 0) fail(CXLT_ERROR_INVALID_ARGUMENT, "block bytes: 0 is not a block size");
  if (bytes == kCanonicalBlockBytes) return BlockGeometry{};
  BlockGeometry g;
  g.layers = 1;
  g.kv_heads = 1;
  g.bytes_per_element = 1;
  g.k_and_v = false;
  uint64_t dim = 1;
  while (dim < (1ull << 30) && bytes % (dim * 2) == 0) dim *= 2;
  if (bytes / dim > UINT32_MAX)
    fail(CXLT_ERROR_INVALID_ARGUMENT, "block bytes: ", bytes, " is not supported (an odd factor above 2^32)");
  g.head_dim = static_cast<uint32_t>(dim);
  g.tokens_per_block = static_cast<uint32_t>(bytes / dim);
  return g;
}

// LRU and FIFO on one tier decide by what happens while a block is resident (its reference
// tick, its arrival), never by the state an evicted block left behind, and one tier promotes
// nothing. Their replays keep the states of the resident blocks and one more (the room a miss
// needs before its victim leaves): the same runtime code with a bounded store, whose index and
// policy arrays then stay in cache however many blocks the trace names. The hits are the same
// as with every state kept (tests/replay); no state is restored, so readmissions_restored is 0.
// A bounded store sizes its arrays at open (about 120 bytes a state), so capacities above the
// runtime's default store capacity (2^20 states) keep the growing store instead.
constexpr uint64_t kMaxBoundedStore = 1u << 20;

uint64_t total_blocks(const std::vector<TierBudget> &tiers, uint64_t block_bytes) {
  uint64_t total = 0;
  for (const TierBudget &t : tiers) total += t.budget_bytes / block_bytes;
  return total;
}

bool resident_states_only(PolicyChoice policy, const std::vector<TierBudget> &tiers, uint64_t block_bytes) {
  return tiers.size() == 1 && (policy.kind == PolicyKind::lru || policy.kind == PolicyKind::fifo) &&
         total_blocks(tiers, block_bytes) < kMaxBoundedStore;
}

RuntimeConfig runtime_config(const Options &o, PolicyChoice policy, const std::vector<TierBudget> &tiers) {
  RuntimeConfig cfg;
  cfg.geometry = geometry_for(o.block_bytes);
  cfg.topology = "emulated";  // null tiers stand for the embedded hbm/dram/cxl tiers
  cfg.policy = policy.kind;
  cfg.persist = policy.persist;
  cfg.lrfu = o.lrfu;
  cfg.index_buckets = o.index_buckets;
  cfg.store_capacity = 0;  // every state kept: memory grows with the unique blocks
  if (resident_states_only(policy, tiers, o.block_bytes)) {
    cfg.store_capacity = total_blocks(tiers, o.block_bytes) + 1;
    cfg.persist = false;
  }
  cfg.synchronous = true;
  cfg.promotion = tiers.size() > 1 ? o.promotion : PromotionRule::never;
  cfg.huge_pages = HugePages::none;
  // One pass over the trace touches each state's page about once and reads few at random later:
  // with huge pages the first touches cost more than the TLB misses they save (the 40-copy
  // LRFU replay: the same user time, and 0.4-0.9 s more system time clearing fresh 2 MiB pages
  // on this project's virtual machines; bench/README.md, section 4).
  cfg.state_huge_pages = false;
  cfg.verify_placement = false;
  cfg.extent_blocks = 4096;  // null extents hold nothing: few, large ones keep the pool small
  // The backend that holds no bytes and copies nothing: budgets count, copies cost nothing.
  const TierOps *none = first_backend_with(CXLT_TRAIT_COPIES_ITSELF, CXLT_TRAIT_HOLDS_BYTES | CXLT_TRAIT_WRAPS_INNER);
  if (none == nullptr) fail(CXLT_ERROR_NOT_SUPPORTED, "replay: this build has no backend that holds no bytes");
  const std::string null_backend = none->name;
  for (size_t i = 0; i < tiers.size(); ++i) {
    TierConfig t;
    t.name = tiers[i].name;
    // Not `kind`: Runtime::open bounds a tier matched to an emulated topology tier by that
    // tier's declared capacity (the embedded hbm is 4 GiB), null backend or not, so a 32 GiB
    // replay budget would be refused. A NUMA node that no topology tier has matches none: no
    // ceiling, and the runtime calls the tier's kind "unknown" (the replay reports its own).
    t.numa_nodes = {1023u - static_cast<unsigned>(i)};
    t.budget_bytes = tiers[i].budget_bytes;
    t.backend = null_backend;
    cfg.tiers.push_back(t);
  }
  return cfg;
}

std::vector<TierBudget> one_tier(uint64_t blocks, uint64_t block_bytes) {
  uint64_t budget = 0;
  if (__builtin_mul_overflow(blocks, block_bytes, &budget))
    fail(CXLT_ERROR_INVALID_ARGUMENT, "capacity: ", blocks, " blocks of ", block_bytes, " bytes overflow 64 bits");
  return {TierBudget{"hbm", TierKind::hbm, budget}};
}

// The replay proper, on one tier list.
Result replay_on(const Options &o, PolicyChoice policy, const std::vector<TierBudget> &tiers, const Prepass *pp) {
  const auto t0 = std::chrono::steady_clock::now();
  std::unique_ptr<Runtime> rt = Runtime::open(runtime_config(o, policy, tiers));
  trace::Reader reader(o.trace, o.reader);
  const bool opt = policy.kind == PolicyKind::opt;
  const bool attn = reader.has_attention();
  const uint64_t *next = opt ? pp->next.data() : nullptr;
  const uint64_t next_n = opt ? pp->next.size() : 0;

  Result r;
  r.trace = o.trace;
  r.format = reader.format();
  r.block_size_tokens = reader.block_size_tokens();
  r.policy = policy;
  r.lrfu = o.lrfu;
  r.index_buckets = o.index_buckets;
  r.promotion = tiers.size() > 1 ? o.promotion : PromotionRule::never;
  r.block_bytes = o.block_bytes;
  r.trace_attention = attn;
  std::vector<uint64_t> tier_hits(rt->tier_count(), 0);

  // The unique blocks: the pre-pass counted them, else a store that keeps every state holds
  // one per block, else (a bounded store) the replay counts them itself.
  const bool count_unique = pp == nullptr && resident_states_only(policy, tiers, o.block_bytes);
  detail::IdSet unique(count_unique ? 1u << 16 : 0);

  trace::Request q;
  std::vector<Key> keys;
  std::vector<ReferenceResult> results;
  uint64_t ref = 0, bypassed = 0, next_progress = kProgressEvery;
  bool first = true;
  uint64_t prev_step = 0;
  while (reader.next(q)) {
    // The decode clock: once per request; per decode step for attention traces (a gap in the
    // step numbers advances it by the gap).
    if (!first) {
      uint64_t adv = attn && q.step > prev_step ? q.step - prev_step : 1;
      for (uint64_t i = 0; i < adv; ++i) rt->step();
    }
    first = false;
    prev_step = q.step;
    const size_t n = q.blocks.size();
    // The unique-id set is large (8 bytes a slot, at most half full) and the ids land at random
    // in it: their slots are fetched now and counted after the runtime's work for the request.
    if (count_unique)
      for (uint64_t id : q.blocks) unique.prefetch(id);
    if (opt && next_n - ref < n)
      fail(CXLT_ERROR_INVALID_ARGUMENT, o.trace, ": the OPT next-use table holds ", next_n,
           " references but the trace has more (was it changed during the replay?)");
    // The request's references in one call: the runtime prefetches the later ones' state.
    keys.resize(n);
    results.resize(n);
    for (size_t i = 0; i < n; ++i) keys[i] = key_from_trace_id(q.blocks[i]);
    rt->reference_many(keys.data(), attn ? q.attention.data() : nullptr, opt ? next + ref : nullptr, n, results.data());
    ref += n;
    if (count_unique)
      for (uint64_t id : q.blocks) unique.insert(id);
    for (const ReferenceResult &res : results) {
      if (res.hit_tier >= 0) {
        ++tier_hits[static_cast<size_t>(res.hit_tier)];
      } else if (!res.admitted) {
        ++bypassed;
      }
    }
    if (o.progress && ref >= next_progress) {
      next_progress = ref + kProgressEvery;
      o.progress(Progress{ref, reader.stats().requests, reader.stats().bytes});
    }
  }
  if (opt && ref != next_n)
    fail(CXLT_ERROR_INVALID_ARGUMENT, o.trace, ": the OPT next-use table holds ", next_n, " references but the trace has ",
         ref, " (was it changed during the replay?)");
  const trace::ReaderStats &rs = reader.stats();
  if (o.progress) o.progress(Progress{ref, rs.requests, rs.bytes});

  const cxlt_stats_t s = rt->stats(/*measure_placement=*/false);  // the report has no placement figures
  r.requests = rs.requests;
  r.steps = rt->current_step();
  r.references = ref;
  r.unique_blocks = pp ? pp->unique_blocks : count_unique ? unique.size() : s.store_entries;
  for (size_t t = 0; t < tier_hits.size(); ++t) {
    const cxlt_tier_info_t info = rt->tier_info(t);
    TierResult tr;
    tr.name = info.name;
    tr.kind = tiers[t].kind;
    tr.budget_bytes = info.budget_bytes;
    tr.capacity_blocks = info.budget_bytes / o.block_bytes;
    tr.hits = tier_hits[t];
    tr.admissions = s.tier[t].admissions;
    tr.blocks_at_end = info.blocks;
    r.capacity_blocks += tr.capacity_blocks;
    r.hits += tr.hits;
    // Our count and the runtime's must agree: both see every reference.
    if (s.tier[t].hits != tr.hits)
      fail(CXLT_ERROR_UNKNOWN, "replay: tier ", tr.name, " counted ", s.tier[t].hits, " hits in the runtime and ",
           tr.hits, " in the replay");
    r.tiers.push_back(std::move(tr));
  }
  r.misses = ref - r.hits;
  if (s.misses != r.misses)
    fail(CXLT_ERROR_UNKNOWN, "replay: the runtime counted ", s.misses, " misses, the replay ", r.misses);
  r.hit_rate = ref ? static_cast<double>(r.hits) / static_cast<double>(ref) : 0.0;
  r.drops = s.drops;
  r.demotions = s.demotions;
  r.promotions = s.promotions;
  r.readmissions_restored = s.readmissions_restored;
  r.opt_bypassed = bypassed;
  r.malformed_lines = rs.malformed;
  r.issues = rs.issues;
  r.other_events = rs.other_events;
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

}  // namespace

// --- Names ------------------------------------------------------------------------------------

PolicyChoice parse_policy(std::string_view text) {
  const std::string t(trim(text));
  std::string_view base = t;
  bool persist = true;
  constexpr std::string_view suffix = "-nopersist";
  if (base.size() > suffix.size() && iequal(base.substr(base.size() - suffix.size()), suffix)) {
    base.remove_suffix(suffix.size());
    persist = false;
  }
  auto k = parse_policy_kind(base);
  if (!k || (!persist && !persist_matters(*k)))
    fail(CXLT_ERROR_INVALID_ARGUMENT, "policy '", t,
         "' is not known (known: lru, fifo, lfu, arc, lrfu, opt, lrfu-nopersist, lfu-nopersist)");
  return PolicyChoice{*k, persist};
}

std::string policy_label(PolicyChoice p) {
  std::string s = policy_kind_name(p.kind);
  if (!p.persist && persist_matters(p.kind)) s += "-nopersist";
  return s;
}

bool persist_matters(PolicyKind kind) noexcept { return kind == PolicyKind::lrfu || kind == PolicyKind::lfu; }

std::vector<TierBudget> parse_tiers(std::string_view spec) {
  std::vector<TierBudget> out;
  for (const std::string &item : split_list(spec, "--tiers")) {
    size_t eq = item.find('=');
    if (eq == std::string::npos)
      fail(CXLT_ERROR_INVALID_ARGUMENT, "--tiers: '", item, "' is not KIND=SIZE (e.g. hbm=32GiB)");
    std::string name(trim(std::string_view(item).substr(0, eq)));
    auto kind = parse_tier_kind(name);
    if (!kind || (*kind != TierKind::hbm && *kind != TierKind::dram && *kind != TierKind::cxl))
      fail(CXLT_ERROR_INVALID_ARGUMENT, "--tiers: '", name, "' is not a tier kind a replay can use (hbm, dram, cxl)");
    for (const TierBudget &b : out)
      if (b.kind == *kind) fail(CXLT_ERROR_INVALID_ARGUMENT, "--tiers: '", name, "' is given twice");
    uint64_t bytes = parse_size(std::string_view(item).substr(eq + 1), "--tiers " + name);
    if (bytes == 0) fail(CXLT_ERROR_INVALID_ARGUMENT, "--tiers: ", name, " has a budget of 0 bytes");
    out.push_back(TierBudget{tier_kind_name(*kind), *kind, bytes});
  }
  if (out.empty()) fail(CXLT_ERROR_INVALID_ARGUMENT, "--tiers: no tier given");
  if (out.size() > CXLT_MAX_TIERS) fail(CXLT_ERROR_INVALID_ARGUMENT, "--tiers: at most ", CXLT_MAX_TIERS, " tiers");
  return out;
}

const char *attention_source(const Result &r) noexcept { return r.trace_attention ? "trace" : "constant-1.0"; }

// --- Pre-pass ---------------------------------------------------------------------------------

Prepass prepass(const std::string &path, const trace::ReaderOptions &ropt, bool next_use) {
  trace::Reader reader(path, ropt);
  Prepass p;
  p.format = reader.format();
  p.block_size_tokens = reader.block_size_tokens();
  p.trace_attention = reader.has_attention();
  // Each id's latest reference index: the slot that the id's next reference fills in.
  detail::IdTable<uint64_t> last(1u << 16);
  trace::Request q;
  uint64_t ref = 0;
  while (reader.next(q)) {
    for (uint64_t id : q.blocks) {
      bool fresh = false;
      uint64_t &at = last.find_or_insert(id, ref, fresh);
      if (next_use) {
        p.next.push_back(kNever);
        if (!fresh) p.next[at] = ref;
      }
      at = ref;
      ++ref;
    }
  }
  p.requests = reader.stats().requests;
  p.references = ref;
  p.unique_blocks = last.size();
  p.malformed_lines = reader.stats().malformed;
  return p;
}

// --- Replay -----------------------------------------------------------------------------------

Result run(const Options &o) {
  if (o.capacity_blocks != 0 && !o.tiers.empty())
    fail(CXLT_ERROR_INVALID_ARGUMENT, "replay: give a capacity in blocks or several tiers, not both");
  if (o.capacity_blocks == 0 && o.tiers.empty())
    fail(CXLT_ERROR_INVALID_ARGUMENT, "replay: no capacity (give --capacity-blocks N, --budget SIZE or --tiers SPEC)");
  if (o.block_bytes == 0) fail(CXLT_ERROR_INVALID_ARGUMENT, "replay: --block-bytes is 0");
  if (o.policy.kind == PolicyKind::lrfu) o.lrfu.validate();
  std::vector<TierBudget> tiers = o.capacity_blocks ? one_tier(o.capacity_blocks, o.block_bytes) : o.tiers;
  uint64_t total = 0;
  for (const TierBudget &t : tiers) {
    if (t.budget_bytes < o.block_bytes)
      fail(CXLT_ERROR_INVALID_ARGUMENT, "replay: tier ", t.name, " (", format_bytes(t.budget_bytes),
           ") is smaller than one block (", format_bytes(o.block_bytes), ")");
    total += t.budget_bytes / o.block_bytes;
  }
  const bool opt = o.policy.kind == PolicyKind::opt;
  const bool bound = o.opt_bound || tiers.size() > 1;
  Prepass own;
  const Prepass *pp = o.next_use;
  if ((opt || bound) && pp == nullptr) {
    own = prepass(o.trace, o.reader, true);
    pp = &own;
  }
  if (opt && tiers.size() > 1) {
    // Belady's bound does not depend on which tier holds a block: one tier of the total.
    Result r = replay_on(o, o.policy, one_tier(total, o.block_bytes), pp);
    r.opt_single_tier = true;
    r.opt_hits = r.hits;
    return r;
  }
  Result r = replay_on(o, o.policy, tiers, pp);
  if (opt) {
    r.opt_hits = r.hits;
  } else if (bound) {
    Result b = replay_on(o, PolicyChoice{PolicyKind::opt, true}, one_tier(total, o.block_bytes), pp);
    r.opt_hits = b.hits;
    if (r.hits > b.hits)
      r.opt_violation = policy_label(r.policy) + " at " + std::to_string(total) + " blocks: " + std::to_string(r.hits) +
                        " hits > opt's " + std::to_string(b.hits) + " on the same stream (a bug: no policy beats Belady)";
  }
  return r;
}

std::string to_json(const Result &r, int indent) {
  using nlohmann::json;
  json params = json::object();
  params["persist"] = r.policy.persist;
  params["persist_matters"] = persist_matters(r.policy.kind);
  if (r.policy.kind == PolicyKind::lrfu) {
    params["alpha"] = r.lrfu.alpha;
    params["beta"] = r.lrfu.beta;
    params["score_mode"] = score_mode_name(r.lrfu.mode);
    params["index_buckets"] = r.index_buckets;
  }
  json tiers = json::array();
  for (const TierResult &t : r.tiers)
    tiers.push_back({{"name", t.name},
                     {"kind", tier_kind_name(t.kind)},
                     {"budget_bytes", t.budget_bytes},
                     {"capacity_blocks", t.capacity_blocks},
                     {"hits", t.hits},
                     {"hit_rate", r.references ? static_cast<double>(t.hits) / static_cast<double>(r.references) : 0.0},
                     {"admissions", t.admissions},
                     {"blocks_at_end", t.blocks_at_end}});
  json issues = json::array();
  for (const trace::Issue &i : r.issues) issues.push_back({{"line", i.line}, {"reason", i.reason}});
  json j;
  j["trace"] = r.trace;
  j["format"] = trace::format_name(r.format);
  j["block_size_tokens"] = r.block_size_tokens;
  j["policy"] = policy_label(r.policy);
  j["params"] = params;
  j["capacity_blocks"] = r.capacity_blocks;
  j["block_bytes"] = r.block_bytes;
  j["requests"] = r.requests;
  j["steps"] = r.steps;
  j["references"] = r.references;
  j["unique_blocks"] = r.unique_blocks;
  j["hits"] = r.hits;
  j["misses"] = r.misses;
  j["hit_rate"] = r.hit_rate;
  j["attention_source"] = attention_source(r);
  j["tiers"] = tiers;
  j["promotion"] = r.tiers.size() > 1 ? json(promotion_rule_name(r.promotion)) : json(nullptr);
  j["drops"] = r.drops;
  j["demotions"] = r.demotions;
  j["promotions"] = r.promotions;
  j["readmissions_restored"] = r.readmissions_restored;
  j["opt_bypassed"] = r.opt_bypassed;
  j["opt_single_tier"] = r.opt_single_tier;
  if (r.opt_hits) {
    j["opt_bound"] = {{"capacity_blocks", r.capacity_blocks},
                      {"hits", *r.opt_hits},
                      {"hit_rate", r.references ? static_cast<double>(*r.opt_hits) / static_cast<double>(r.references) : 0.0},
                      {"violation", r.opt_violation.empty() ? json(nullptr) : json(r.opt_violation)}};
  } else {
    j["opt_bound"] = nullptr;
  }
  j["malformed_lines"] = r.malformed_lines;
  j["malformed"] = issues;
  j["other_events"] = r.other_events;
  j["seconds"] = r.seconds;
  j["references_per_second"] = r.seconds > 0 ? static_cast<double>(r.references) / r.seconds : 0.0;
  j["engine"] = "cxltier runtime: null tier backend, synchronous, Runtime::reference per block reference";
  return j.dump(indent);
}

}  // namespace cxltier::replay
