// SPDX-License-Identifier: Apache-2.0
// Opening and closing a runtime: the configured tiers resolved against the topology, one
// backend, pool and policy index per tier, the score store (and its checkpoint), the threads.
#include "lib/memory/choose.hpp"
#include "lib/policy/lrfu_id_records.hpp"
#include "lib/runtime/runtime_impl.hpp"
#include "lib/runtime/test_access.hpp"

#include "lib/store/store_file.hpp"
#include "lib/runtime/host_budget.hpp"

#include <cxltier/error.hpp>
#include <cxltier/tools/units.hpp>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <sys/stat.h>
#include <unistd.h>

namespace cxltier {

namespace {

HugePageMode to_mode(HugePages h) {
  switch (h) {
    case HugePages::none: return HugePageMode::none;
    case HugePages::thp: return HugePageMode::thp;
    case HugePages::hugetlb: return HugePageMode::hugetlb;
  }
  return HugePageMode::thp;
}

std::string kinds_of(const Topology &topo) {
  std::string s;
  for (const TierDesc &t : topo.tiers) s += (s.empty() ? "" : ", ") + std::string(tier_kind_name(t.kind));
  return s.empty() ? "none" : s;
}

// A tier's backend option `key` holds a number above 0 (validate() has checked it parses).
bool option_above_zero(const TierConfig &tc, const char *key) {
  auto it = tc.options.find(key);
  if (it == tc.options.end()) return false;
  char *end = nullptr;
  return std::strtod(it->second.c_str(), &end) > 0;
}

// Which topology tier a configured tier stands for (nullptr: nodes outside every tier).
const TierDesc *match_tier(const Topology &topo, const TierConfig &tc, size_t index) {
  if (tc.kind) {
    for (const TierDesc &t : topo.tiers)
      if (t.kind == *tc.kind) return &t;
    fail(CXLT_ERROR_CONFIG, "tiers.", index, ".kind = ", tier_kind_name(*tc.kind), ": the topology (",
         topology_source_name(topo.source), ", ", topo.origin, ") has no such tier (it has: ", kinds_of(topo), ")");
  }
  if (!tc.numa_nodes.empty()) {
    for (const TierDesc &t : topo.tiers) {
      bool all = std::all_of(tc.numa_nodes.begin(), tc.numa_nodes.end(), [&](unsigned n) {
        return std::find(t.numa_nodes.begin(), t.numa_nodes.end(), n) != t.numa_nodes.end();
      });
      if (all) return &t;
    }
    return nullptr;
  }
  fail(CXLT_ERROR_CONFIG, "tiers.", index, " names neither a kind nor numa_nodes");
}

}  // namespace

std::unique_ptr<Runtime> Runtime::open(const RuntimeConfig &config) {
  config.validate();
  if (config.policy == PolicyKind::opt && !config.synchronous)
    fail(CXLT_ERROR_CONFIG, "policy.kind = opt needs the future of a trace: it is for `cxltier replay` "
                            "(runtime.synchronous = true, references through Runtime::reference)");
  auto m = std::make_unique<Impl>();
  m->cfg = config;
  RuntimeConfig &cfg = m->cfg;
  m->block_bytes = cfg.geometry.bytes();
  m->topo = discover_topology(cfg.topology);

  std::vector<TierConfig> wanted = cfg.tiers;
  if (wanted.empty()) {
    for (const TierDesc &t : m->topo.tiers) {
      // GPU tiers are opt-in (kind = "gpu"): their blocks are device pointers the engine must
      // copy with CUDA, and their memory is the engine's to share out (docs/gpu.md).
      if (t.cuda_device >= 0) continue;
      TierConfig tc;
      tc.kind = t.kind;
      tc.name = tier_kind_name(t.kind);
      for (const TierConfig &w : wanted)
        if (w.name == tc.name) tc.name += std::to_string(t.rank);
      tc.numa_nodes = t.numa_nodes;
      wanted.push_back(tc);
    }
    if (wanted.size() > CXLT_MAX_TIERS) wanted.resize(CXLT_MAX_TIERS);
  }
  const bool system_topology = m->topo.source == TopologySource::this_system;
  // With a device-memory tier, host tiers exchange blocks with that GPU: choose_backend() opens
  // them through the decorator that pins their extents for its DMA (lib/memory/choose.hpp).
  auto wish_for = [&](const TierConfig &tc, const TierDesc *d) {
    BackendWish w;
    w.backend = tc.backend;
    w.device_tier = d && d->cuda_device >= 0;
    w.emulated = (!system_topology && !w.device_tier) || (d && d->emulated);  // GPUs are real
    w.paced = option_above_zero(tc, CXLT_OPTION_PACE);
    return w;
  };
  int pin_for_gpu = -1;
  for (size_t i = 0; i < wanted.size() && pin_for_gpu < 0; ++i) {
    const TierDesc *d = match_tier(m->topo, wanted[i], i);
    try {
      if (choose_backend(wish_for(wanted[i], d)).traits & CXLT_TRAIT_DEVICE_MEMORY)
        pin_for_gpu = d && d->cuda_device >= 0 ? d->cuda_device : 0;
    } catch (const Error &e) {
      fail(e.code(), "tiers.", i, ": ", e.what());
    }
  }
  size_t null_tiers = 0;
  // The tiers' LRFU indexes share one record per id: a block is in one tier's index at a time.
  auto lrfu_records = std::make_shared<LrfuIdRecords>();
  for (size_t i = 0; i < wanted.size(); ++i) {
    const TierConfig &tc = wanted[i];
    const TierDesc *desc = match_tier(m->topo, tc, i);
    TierRt t;
    t.kind = tc.kind ? *tc.kind : (desc ? desc->kind : TierKind::unknown);
    t.name = !tc.name.empty() ? tc.name : tier_kind_name(t.kind);
    t.nodes = !tc.numa_nodes.empty() ? tc.numa_nodes : (desc ? desc->numa_nodes : std::vector<unsigned>{});
    BackendWish wish = wish_for(tc, desc);
    wish.pin_for_device = pin_for_gpu >= 0;
    t.emulated = wish.emulated;
    t.bandwidth_mib_s = tc.bandwidth_mib_s.value_or(desc && desc->bandwidth_mib_s ? *desc->bandwidth_mib_s : 0.0);
    t.latency_ns = tc.latency_ns.value_or(desc && desc->latency_ns ? *desc->latency_ns : 0.0);
    BackendChoice choice;
    try {
      choice = choose_backend(wish);
    } catch (const Error &e) {
      fail(e.code(), "tiers.", i, " ('", t.name, "'): ", e.what());
    }
    t.backend_name = choice.name;
    if (choice.ops && !(choice.traits & CXLT_TRAIT_HOLDS_BYTES)) ++null_tiers;
    uint64_t budget = tc.budget_bytes;
    if (budget == 0) {
      TierDesc d = desc ? *desc : TierDesc{};
      d.kind = t.kind;
      budget = default_tier_budget(d, t.emulated);
    }
    if (budget < m->block_bytes)
      fail(CXLT_ERROR_CONFIG, "tiers.", i, ".budget = ", format_bytes(budget), " is smaller than one block (",
           format_bytes(m->block_bytes), ")");
    TierBackendParams p;
    p.tier_name = t.name;
    p.kind = t.kind;
    p.numa_nodes = t.nodes;
    p.budget_bytes = budget;
    p.block_bytes = m->block_bytes;
    p.capacity_bytes = t.emulated && desc ? desc->capacity_bytes : 0;
    p.huge_pages = to_mode(cfg.huge_pages);
    p.verify_placement = cfg.verify_placement;
    for (const auto &[key, value] : tc.options) p.set_option(key, value);  // checked by validate()
    // The keys the contract fills by trait (tier_ops.hpp, CXLT_OPTION_*).
    if (choice.traits & CXLT_TRAIT_DEVICE_MEMORY)
      p.set_option(CXLT_OPTION_DEVICE, std::to_string(desc && desc->cuda_device >= 0 ? desc->cuda_device : 0));
    if (tc.layout == "per-layer") {  // K and V of each layer apart, as engines keep them (docs/gpu.md)
      if (choice.ops && !(choice.traits & CXLT_TRAIT_KV_LAYOUT))
        fail(CXLT_ERROR_CONFIG, "tiers.", i, ".layout = per-layer: only the cuda backend lays blocks out per layer (tier '",
             t.name, "' uses ", t.backend_name, ")");
      p.set_option(CXLT_OPTION_KV_SEGMENTS, std::to_string(cfg.geometry.layers * (cfg.geometry.k_and_v ? 2u : 1u)));
    }
    if (choice.wrapped) {
      p.set_option(CXLT_OPTION_INNER_BACKEND, choice.name);  // pinned for DMA with the runtime's GPU (a paced tier keeps its pacing)
      p.set_option(CXLT_OPTION_DEVICE, std::to_string(pin_for_gpu));
    }
    try {
      t.backend = std::make_unique<TierBackend>(choice.open_as, p);
    } catch (const Error &e) {
      fail(e.code() == CXLT_ERROR_NOT_SUPPORTED ? CXLT_ERROR_CONFIG : e.code(), "tiers.", i, " ('", t.name,
           "'): ", e.what());
    }
    TierCapacity cap = t.backend->capacity();
    if (budget > cap.total_bytes)
      fail(CXLT_ERROR_CONFIG, "tiers.", i, ".budget = ", format_bytes(budget), " exceeds the capacity of tier '", t.name,
           "' (", format_bytes(cap.total_bytes), ", backend ", t.backend_name, ")");
    const uint32_t traits = t.backend->ops().traits;
    t.no_bytes = !(traits & CXLT_TRAIT_HOLDS_BYTES);
    t.host = !t.no_bytes && (traits & CXLT_TRAIT_HOST_ADDRESSABLE);  // device memory: only its backend copies it
    BlockPoolConfig pc;
    pc.name = t.name;
    pc.block_bytes = m->block_bytes;
    pc.budget_bytes = budget;
    pc.blocks_per_extent = cfg.extent_blocks;
    pc.reserve_all = cfg.reserve_memory;
    t.pool = std::make_unique<BlockPool>(*t.backend, pc);
    PolicyConfig pol;
    pol.kind = cfg.policy;
    pol.lrfu = cfg.lrfu;
    pol.capacity_blocks = t.pool->max_slots();
    pol.index_buckets = cfg.index_buckets;
    pol.audit = cfg.audit;
    pol.huge_pages = cfg.state_huge_pages;
    pol.lrfu_records = lrfu_records;
    t.policy = make_policy(pol);
    t.lrfu = dynamic_cast<LrfuIndex *>(t.policy.get());  // null for the other policies
    m->tiers.push_back(std::move(t));
  }
  if (m->tiers.empty()) fail(CXLT_ERROR_CONFIG, "tiers: no tier to run on");
  m->all_lrfu = std::all_of(m->tiers.begin(), m->tiers.end(), [](const TierRt &t) { return t.lrfu != nullptr; });
  if (cfg.policy == PolicyKind::lrfu && cfg.lrfu.mode == ScoreMode::decay) {
    m->decay_factor.resize(Runtime::Impl::kDecayFactors);
    for (size_t d = 0; d < m->decay_factor.size(); ++d)
      m->decay_factor[d] = std::pow(1.0 - cfg.lrfu.alpha, static_cast<double>(d));
  }
  if (cfg.verify_copies)
    for (const TierRt &t : m->tiers)
      if (!t.host && !t.no_bytes)
        fail(CXLT_ERROR_CONFIG, "runtime.verify_copies = true hashes blocks on the CPU, but tier '", t.name,
             "' is device memory (backend ", t.backend_name, ")");
  std::vector<HostBudget> host_budgets;
  for (const TierRt &t : m->tiers)
    if (t.host && !t.no_bytes) host_budgets.push_back({t.name, t.pool->budget_bytes(), t.emulated, t.nodes});
  check_host_budgets(host_budgets, host_memory_bytes(), host_node_memory_bytes);
  if (null_tiers != 0 && null_tiers != m->tiers.size())
    fail(CXLT_ERROR_CONFIG, "tiers: the null backend holds no bytes, so it cannot share a runtime with tiers that do");
  for (size_t i = 0; i < m->tiers.size(); ++i)
    for (size_t j = 0; j < i; ++j)
      if (m->tiers[i].name == m->tiers[j].name)
        fail(CXLT_ERROR_CONFIG, "tiers.", i, ".name = '", m->tiers[i].name, "' is used by tiers.", j, " too");

  uint64_t slots = 0;
  for (const TierRt &t : m->tiers) slots += t.pool->max_slots();
  if (cfg.store_capacity != 0 && cfg.store_capacity < slots)
    fail(CXLT_ERROR_CONFIG, "store.capacity = ", cfg.store_capacity, " is smaller than the ", slots,
         " blocks the tiers can hold together; it must keep every resident block's state");
  // The store and every tier's policy keep per-state arrays that grow to store.capacity (the
  // key index is sized to it at open; docs/runtime.md, "Memory per block"). A capacity whose
  // arrays would take more than half of this machine's memory once the store is full is
  // refused here with the figure (bytes_per_state), rather than answered by the OOM killer later.
  if (cfg.store_capacity != 0) {
    const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
    const double per_state = m->bytes_per_state(cfg.store_capacity);
    const double need = per_state * static_cast<double>(cfg.store_capacity);
    if (pages > 0 && page > 0 && need > 0.5 * static_cast<double>(pages) * static_cast<double>(page))
      fail(CXLT_ERROR_CONFIG, "store.capacity = ", cfg.store_capacity, " states would take about ",
           format_bytes(static_cast<uint64_t>(need)), " of policy state when full (", per_state,
           " bytes per state with ", m->tiers.size(), " tiers), more than half of this machine's ",
           format_bytes(static_cast<uint64_t>(pages) * static_cast<uint64_t>(page)), " of memory; lower it");
  }
  StoreOptions so;
  so.capacity = cfg.store_capacity;
  so.forget_by = cfg.policy;
  so.lrfu = cfg.lrfu;
  so.huge_pages = cfg.state_huge_pages;
  so.fixed_addresses = true;  // engine threads check handles against the entries without M
  m->store = std::make_unique<ScoreStore>(so);
  // The LRFU indexes read each block's score and last access from its store entry, which
  // keeps them already, rather than a copy of their own, and keep its stamp in the same line
  // (lrfu_id_records.hpp).
  static_assert(offsetof(PolicyState, last_access) == offsetof(PolicyState, score) + sizeof(double));
  m->store->on_entries_moved([lrfu_records](StoreEntry *first) {
    lrfu_records->external_states(first ? &first->st.score : nullptr, first ? &first->res.policy_stamp : nullptr,
                                  sizeof(StoreEntry));
  });

  if (!cfg.store_path.empty()) {
    m->store_lock = StoreLock(cfg.store_path);  // refuses a store that another runtime holds
    check_store_writable(cfg.store_path);       // a checkpoint that could never be written is refused now
    struct stat st {};
    if (lstat(cfg.store_path.c_str(), &st) == 0) {
      LoadedCheckpoint cp = ScoreStore::load(cfg.store_path);  // throws, loading nothing, if damaged
      m->store->replace_with(cp);  // before any block is placed: the indexes hold no entry yet
      m->now = cp.meta.current_step;
      m->tick = cp.meta.current_tick;
      m->checkpoint_at_step = m->now;
      m->checkpoint_written_tick = m->tick;
      if (cp.meta.alpha != cfg.lrfu.alpha || cp.meta.beta != cfg.lrfu.beta || cp.meta.mode != cfg.lrfu.mode)
        std::fprintf(stderr,
                     "cxltier: warning: %s was written with alpha %g, beta %g, %s mode; this runtime uses alpha %g, beta "
                     "%g, %s mode (stored scores are kept as they are)\n",
                     cfg.store_path.c_str(), cp.meta.alpha, cp.meta.beta, score_mode_name(cp.meta.mode), cfg.lrfu.alpha,
                     cfg.lrfu.beta, score_mode_name(cfg.lrfu.mode));
    }
  }
  // A bounded store plans its capacity in every index (address room, no pages touched), and the
  // ids issued so far are made usable; later ids grow the arrays within that room as they come.
  if (cfg.store_capacity) {
    for (TierRt &t : m->tiers) t.policy->plan_ids(cfg.store_capacity);
    if (cfg.policy == PolicyKind::opt) m->opt_next.reserve(cfg.store_capacity);
  }
  m->ensure_policy_ids();
  // The drains, which may not throw, queue promotions up to the limit: room for all of them now
  // (256 KiB), where a failure is the open's.
  if (m->tiers.size() > 1 && cfg.promotion != PromotionRule::never && !cfg.synchronous)
    m->promote_queue.reserve(Runtime::Impl::kPromoteQueueLimit);

  if (cfg.copy_kernel == "memcpy") {
    m->kernel_down = m->kernel_up = CopyKernel::memcpy;
  } else if (cfg.copy_kernel == "nt") {
    m->kernel_down = m->kernel_up = CopyKernel::nt;
  } else if (cfg.copy_kernel == "auto") {
    m->kernel_down = CopyKernel::nt;
    m->kernel_up = CopyKernel::memcpy;
  } else {
    auto k = parse_copy_kernel(cfg.copy_kernel);
    if (!k) fail(CXLT_ERROR_CONFIG, "runtime.copy_kernel = '", cfg.copy_kernel, "' is not auto, memcpy, nt, nt-avx2, nt-sse2 or nt-scalar");
    if (!copy_kernel_available(*k))
      fail(CXLT_ERROR_CONFIG, "runtime.copy_kernel = '", cfg.copy_kernel, "' is not available on this CPU");
    m->kernel_down = m->kernel_up = *k;
  }
  if (cfg.remote.enabled) {
    if (null_tiers != 0)
      fail(CXLT_ERROR_CONFIG, "remote.enabled = true: the null backend holds no bytes to write out or fetch into");
    m->remote = open_remote_tier(cfg);  // the remote tier (remote.hpp)
  }
  m->start_threads();
  return std::unique_ptr<Runtime>(new Runtime(std::move(m)));
}

void Runtime::close() {
  Impl &m = *impl_;
  {
    std::unique_lock lk = m.lock();
    if (m.closed) {
      // Another thread's close() may still be stopping the threads: return once it is done,
      // so that a caller who destroys the runtime next frees nothing still in use.
      m.moved_cv.wait(lk, [&] { return m.close_finished; });
      return;
    }
    m.closed = true;
  }
  struct Finished {  // on return or throw
    Impl &m;
    ~Finished() {
      {
        const std::unique_lock lk = m.lock();
        m.close_finished = true;
      }
      m.moved_cv.notify_all();
    }
  } finished{m};
  m.stop_threads();
  if (m.remote) m.remote->stop();  // every write-out finished (its slot freed) before memory goes
  if (!m.cfg.store_path.empty()) {
    std::unique_lock lk = m.lock();
    m.drain_accesses();
    m.write_checkpoint_now(lk);
  }
}

Runtime::~Runtime() {
  Impl &m = *impl_;
  try {
    close();
  } catch (const std::exception &e) {
    std::fprintf(stderr, "cxltier: final score-store checkpoint failed: %s\n", e.what());
  }
  // Pools before backends (the pool returns its extents to the backend).
  m.all_lrfu = false;
  for (TierRt &t : m.tiers) {
    t.lrfu = nullptr;
    t.policy.reset();
    t.pool.reset();
    t.backend.reset();
  }
}

// Summed from the structures themselves: the store's, each tier's policy's,
// with LRFU the records the tiers share (whose states and stamps the store entries keep), and
// with OPT the next use the runtime keeps beside its policy's.
double Runtime::Impl::bytes_per_state(uint64_t capacity) const noexcept {
  double b = ScoreStore::bytes_per_state(capacity);
  for (const TierRt &t : tiers) b += static_cast<double>(t.policy->bytes_per_id());
  if (cfg.policy == PolicyKind::lrfu) b += static_cast<double>(LrfuIdRecords::bytes_per_id(/*external_states=*/true));
  if (cfg.policy == PolicyKind::opt) b += sizeof(decltype(opt_next)::value_type);
  return b;
}

double RuntimeTestAccess::bytes_per_state(Runtime &rt, uint64_t capacity) { return rt.impl_->bytes_per_state(capacity); }

std::shared_ptr<FaultControl> RuntimeTestAccess::faults(Runtime &rt, size_t rank) {
  if (rank >= rt.impl_->tiers.size()) return nullptr;
  const TierBackend &b = *rt.impl_->tiers[rank].backend;
  if (!(b.ops().traits & CXLT_TRAIT_INJECTS_FAULTS)) return nullptr;
  // A fault-injecting backend's control object is a FaultControl (the trait's contract).
  return std::static_pointer_cast<FaultControl>(b.control());
}

}  // namespace cxltier
