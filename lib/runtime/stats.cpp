// SPDX-License-Identifier: Apache-2.0
// What the runtime reports: the stats (C struct and JSON, from the counter lists of
// counters.hpp), per-tier info, the copy method of each tier pair, and validate(), the
// consistency check the tests run after every operation.
#include "lib/runtime/runtime_impl.hpp"

#include <cxltier/error.hpp>

#include <nlohmann/json.hpp>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

namespace cxltier {

cxlt_stats_t Runtime::stats() const { return stats(true); }

// The placement measure is taken in three parts, so that the engine's threads wait only for
// the scan, never for the sort (at 1M resident blocks the sort is most of the measure):
//   1. Under the mutex, with the counters: every movable block's keep value is copied out per
//      tier, and the snapshot is numbered (snapshot_keep_values).
//   2. With no lock: the values are sorted and the inversions counted (count_inversions).
//   3. Under the mutex again: the measure is recorded (PlacementTrack::record: the latest
//      snapshot's is kept when two callers count at once), and the steps since a measure last
//      found no inversion are read at the current step.
// The counters and the inversions returned are as of part 1; steps_since_no_inversion is as of
// part 3 (steps the engine took during the sort count).
cxlt_stats_t Runtime::stats(bool measure_placement) const {
  const Impl &m = *impl_;
  thread_local std::vector<std::vector<double>> by_tier;  // keeps its capacity between calls
  std::unique_lock lk = m.lock();
  const_cast<Impl &>(m).drain_accesses();  // recorded accesses count (applying them is logically const)
  cxlt_stats_t s{};
  s.size = sizeof s;
  s.version = CXLT_STATS_VERSION;
  s.tier_count = static_cast<uint32_t>(m.tiers.size());
  for (size_t i = 0; i < m.tiers.size(); ++i) {
    const TierRt &t = m.tiers[i];
    s.tier[i].budget_bytes = t.pool->budget_bytes();
    s.tier[i].used_bytes = t.pool->bytes_used();
    s.tier[i].blocks = t.pool->slots_used();
#define CXLT_X(name) s.tier[i].name = t.name;
    CXLT_TIER_COUNTERS(CXLT_X)
#undef CXLT_X
  }
#define CXLT_X(member, name) s.name = m.member;
  CXLT_RUNTIME_COUNTERS(CXLT_X)
#undef CXLT_X
#define CXLT_X(name)                                    \
  static_assert(sizeof s.name == sizeof m.name, #name); \
  std::memcpy(s.name, m.name, sizeof s.name);
  CXLT_PAIR_COUNTERS(CXLT_X)
#undef CXLT_X
  s.store_entries = m.store->size();
  s.store_forgotten = m.store->forgotten_total();
  if (m.remote) {
    const RemoteCounters rc = m.remote->counters();
#define CXLT_X(name) s.remote_##name = rc.name;
    CXLT_REMOTE_STATS_COUNTERS(CXLT_X)
#undef CXLT_X
  }
  PlacementMeasure pm = m.placement.last;
  if (measure_placement) {
    const uint64_t snapshot = m.snapshot_keep_values(by_tier), snapshot_step = m.now;
    lk.unlock();
    pm = count_inversions(by_tier);
    m.relock(lk);
    m.placement.record(pm, snapshot, snapshot_step);
  }
  s.inversions = pm.inversions;
  s.inversion_max_gap = pm.max_gap;
  s.steps_since_no_inversion = m.placement.ever_clean ? m.now - m.placement.last_clean_step : m.now;
  s.placement_blocks = pm.blocks;
  return s;
}

std::string Runtime::stats_json() const {
  cxlt_stats_t s = stats();
  nlohmann::json j;
  j["version"] = s.version;
  j["step"] = current_step();
  j["block_bytes"] = impl_->block_bytes;
  nlohmann::json tiers = nlohmann::json::array();
  for (uint32_t i = 0; i < s.tier_count; ++i) {
    const TierRt &t = impl_->tiers[i];
    nlohmann::json tj = {{"rank", i},
                         {"name", t.name},
                         {"kind", tier_kind_name(t.kind)},
                         {"backend", t.backend_name},
                         {"emulated", t.emulated},
                         {"budget_bytes", s.tier[i].budget_bytes},
                         {"used_bytes", s.tier[i].used_bytes},
                         {"blocks", s.tier[i].blocks}};
#define CXLT_X(name) tj[#name] = s.tier[i].name;
    CXLT_TIER_COUNTERS(CXLT_X)
#undef CXLT_X
    tiers.push_back(std::move(tj));
  }
  j["tiers"] = tiers;
#define CXLT_X(member, name) j[#name] = s.name;
  CXLT_RUNTIME_COUNTERS(CXLT_X)
#undef CXLT_X
  nlohmann::json pairs = nlohmann::json::array();
  for (uint32_t a = 0; a < s.tier_count; ++a)
    for (uint32_t b = 0; b < s.tier_count; ++b) {
      if (a == b || s.pair_blocks[a][b] == 0) continue;
      double sec = static_cast<double>(s.pair_ns[a][b]) / 1e9;
      pairs.push_back({{"from", impl_->tiers[a].name},
                       {"to", impl_->tiers[b].name},
                       {"method", copy_method(a, b)},
                       {"blocks", s.pair_blocks[a][b]},
                       {"bytes", s.pair_bytes[a][b]},
                       {"copy_seconds", sec},
                       {"gbps", sec > 0 ? static_cast<double>(s.pair_bytes[a][b]) / sec / 1e9 : 0.0}});
    }
  j["pairs"] = pairs;
  j["placement"] = {{"inversions", s.inversions},
                    {"max_gap", s.inversion_max_gap},
                    {"steps_since_no_inversion", s.steps_since_no_inversion},
                    {"blocks_compared", s.placement_blocks}};
  j["store"] = {{"entries", s.store_entries}, {"forgotten", s.store_forgotten}, {"capacity", impl_->cfg.store_capacity}};
  if (impl_->remote) {
    const RemoteCounters rc = impl_->remote->counters();
    nlohmann::json r = {{"engine", impl_->remote->describe()}};
#define CXLT_X(name) r[#name] = rc.name;
    CXLT_REMOTE_STATS_COUNTERS(CXLT_X)
    CXLT_REMOTE_JSON_COUNTERS(CXLT_X)
#undef CXLT_X
    j["remote"] = std::move(r);
  } else {
    j["remote"] = nullptr;
  }
  return j.dump(2);
}

size_t Runtime::tier_count() const { return impl_->tiers.size(); }

cxlt_tier_info_t Runtime::tier_info(size_t rank) const {
  const Impl &m = *impl_;
  if (rank >= m.tiers.size()) fail(CXLT_ERROR_INVALID_ARGUMENT, "tier rank ", rank, " >= tier count ", m.tiers.size());
  const std::unique_lock lk = m.lock();
  const TierRt &t = m.tiers[rank];
  cxlt_tier_info_t info{};
  info.rank = static_cast<int>(rank);
  info.kind = static_cast<cxlt_tier_kind_t>(t.kind);
  std::snprintf(info.name, sizeof info.name, "%s", t.name.c_str());
  std::snprintf(info.backend, sizeof info.backend, "%s", t.backend_name.c_str());
  info.budget_bytes = t.pool->budget_bytes();
  info.used_bytes = t.pool->bytes_used();
  info.blocks = t.pool->slots_used();
  info.bandwidth_mib_s = t.bandwidth_mib_s;
  info.latency_ns = t.latency_ns;
  info.emulated = t.emulated ? 1 : 0;
  return info;
}

namespace {

// A pacing backend paces when its pacing option holds a number above 0 (tier_ops.hpp).
bool paced(const TierBackendParams &p) {
  const std::string *v = p.option(CXLT_OPTION_PACE);
  return v && std::strtod(v->c_str(), nullptr) > 0;
}

}  // namespace

std::string Runtime::copy_method(size_t from, size_t to) const {
  const Impl &m = *impl_;
  if (from >= m.tiers.size() || to >= m.tiers.size()) return "?";
  const TierRt &a = m.tiers[from], &b = m.tiers[to];
  if (a.no_bytes && b.no_bytes) return "none";
  const uint32_t at = a.backend->ops().traits, bt = b.backend->ops().traits;
  if (b.backend->supports(TierOp::copy_in) && (bt & CXLT_TRAIT_COPIES_ITSELF)) return "backend:" + b.backend_name;
  if ((bt & CXLT_TRAIT_PACES) && paced(b.backend->params())) return "backend:" + b.backend_name + "-paced";
  if (a.backend->supports(TierOp::copy_out) && (at & CXLT_TRAIT_COPIES_ITSELF)) return "backend:" + a.backend_name;
  return copy_kernel_name(resolve_copy_kernel(to > from ? m.kernel_down : m.kernel_up));
}

std::string Runtime::validate() const {
  const Impl &m = *impl_;
  const std::unique_lock lk = m.lock();
  const_cast<Impl &>(m).drain_accesses();  // recorded accesses count (applying them is logically const)
  std::string err;
  std::vector<uint32_t> per_tier(m.tiers.size(), 0), moving(m.tiers.size(), 0);
  // A block flagged as queued for promotion is in the queue (the queue may also hold blocks
  // whose flag a move cleared since).
  std::vector<uint8_t> queued(m.store->id_limit(), 0);
  for (NodeId id : m.promote_queue)
    if (id < queued.size()) queued[id] = 1;
  m.store->for_each([&](NodeId id, const StoreEntry &e) {
    if ((e.res.flags & kFlagPromoteQueued) && !queued[id])
      err += "block " + e.key.hex() + " is flagged as queued for promotion but is not in the queue; ";
    // What an engine thread's handle check reads (access_log.cpp, step 1): a slot exactly while
    // the block is resident in a tier.
    if ((e.res.slot() != kInvalidSlot) != (e.res.tier >= 0))
      err += "block " + e.key.hex() + " has slot " + std::to_string(e.res.slot()) + " in tier " +
             std::to_string(e.res.tier) + "; ";
    const uint64_t word = LowIdWords::word_for(e.res.generation(), e.res.tier >= 0);
    if (id < LowIdWords::kIds && m.low_words.word(id) != word)
      err += "block " + e.key.hex() + " has residency word " + std::to_string(m.low_words.word(id)) + ", expected " +
             std::to_string(word) + "; ";
    if (e.res.tier < 0) {
      if (e.res.pins) err += "block " + e.key.hex() + " is pinned but resident nowhere; ";
      return;
    }
    if (static_cast<size_t>(e.res.tier) >= m.tiers.size()) {
      err += "block " + e.key.hex() + " has tier " + std::to_string(e.res.tier) + "; ";
      return;
    }
    ++per_tier[e.res.tier];
    if (e.res.flags & (kFlagMoving | kFlagUnindexed)) ++moving[e.res.tier];  // out of the index meanwhile
    if (!m.tiers[e.res.tier].pool->is_allocated(e.res.slot()))
      err += "block " + e.key.hex() + " holds slot " + std::to_string(e.res.slot()) + " that its pool says is free; ";
    (void)id;
  });
  for (size_t t = 0; t < m.tiers.size(); ++t) {
    const TierRt &tr = m.tiers[t];
    std::string why;
    if (!tr.pool->is_valid(&why)) err += "tier " + tr.name + " pool: " + why + "; ";
    if (tr.pool->bytes_used() > tr.pool->budget_bytes()) err += "tier " + tr.name + " is over budget; ";
    // Pool slots = resident blocks + destinations of moves in flight into this tier.
    uint32_t incoming = 0;
    for (const MoveJob &j : m.jobs)
      if (j.dst == static_cast<int>(t)) ++incoming;
    if (m.in_flight == 0 && tr.pool->slots_used() != per_tier[t])
      err += "tier " + tr.name + " pool holds " + std::to_string(tr.pool->slots_used()) + " slots for " +
             std::to_string(per_tier[t]) + " blocks; ";
    if (tr.policy->size() != per_tier[t] - moving[t])
      err += "tier " + tr.name + " index holds " + std::to_string(tr.policy->size()) + " blocks, expected " +
             std::to_string(per_tier[t] - moving[t]) + "; ";
    std::string pv = tr.policy->validate();
    if (!pv.empty()) err += "tier " + tr.name + " index: " + pv;
    if (tr.moving_out != moving[t]) err += "tier " + tr.name + " moving-out count is off; ";
    (void)incoming;
  }
  std::string sv = m.store->validate(kFlagAdmitting);  // placed with the lock released: resident, no tier yet
  if (!sv.empty()) err += "store: " + sv;
  return err;
}

}  // namespace cxltier
