// SPDX-License-Identifier: Apache-2.0
// Micro-benchmark: the runtime's access path (Runtime::access_handles, Runtime::access) for a
// batch of 4096 distinct resident blocks (all of them when fewer are resident; as one decode
// step touches each block once) at 1K, 64K and 1M resident blocks, drawn either at random (the worst
// case for the caches) or as 64 runs of 64 consecutive admissions (the blocks of 64 sequences:
// what an engine's step looks like), against the
// baseline a runtime without handles would be: a plain std::unordered_map<Key, state> update of
// the same batch with the same LRFU formula. Null backend, synchronous runtime, one tier (no
// promotion), so only the bookkeeping is timed: lock, handle check, score update, the policy
// index's reordering. Time per batch, lower is better; items/s = block accesses per second.
// BM_AccessHandlesThenAdmit adds what the step's accesses leave for later: the LRFU index
// gives an accessed block its new heap entry at the next victim search, so each step there
// also admits one new block into the full tier, which asks the tier's victim (a second null
// tier takes what is demoted or admitted past it; promotion off).
// Goals: >= 20 M block accesses per second per core by handle at 1M resident blocks, >= 8x the
// map there; two engine threads (BM_AccessHandlesThreads: each records half of every batch,
// wall time per batch) >= 1.6x one thread's total rate.
// The thread is pinned (CXLT_BENCH_CPU, default 0; thread i of a threaded run to the next CPUs).
#include "bench_ratio.hpp"

#include <cxltier/config.hpp>
#include <cxltier/key.hpp>
#include <cxltier/policy.hpp>
#include <cxltier/runtime.hpp>

#include <benchmark/benchmark.h>
#include <sched.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <map>
#include <numeric>
#include <memory>
#include <mutex>
#include <random>
#include <stdexcept>
#include <thread>
#include <tuple>
#include <unordered_map>
#include <vector>

namespace {

constexpr size_t kBatch = 4096;
constexpr size_t kBatches = 256;  // distinct batches, cycled


// n resident blocks in one null tier; kBatches batches of min(kBatch, n) distinct residents
// (keys, handles, attention), random or in runs of 64. Built once per (n, shape) and kept:
// admitting 1M blocks takes about a second.
struct Resident {
  size_t batch = 0;
  std::unique_ptr<cxltier::Runtime> rt;
  std::vector<cxltier::Key> keys;              // per batch slot: kBatches * kBatch
  std::vector<uint64_t> handles;
  std::vector<float> attention;
  bool admitted = false;  // BM_AccessHandlesThenAdmit has made its first admission
};

constexpr size_t kSpare = size_t{1} << 18;  // admissions room in the second tier (evicting)

// The CPUs this process may use, as it started (before any case pinned its thread): what the
// runtimes' own threads are given (resident(), below).
struct StartCpus {
  cpu_set_t set;
  bool known;
  StartCpus() { known = sched_getaffinity(0, sizeof set, &set) == 0; }
};
const StartCpus start_cpus;

// The runtimes the cases run on: one synchronous tier holding every block; the same with a
// second tier that takes what is demoted or admitted past it (evicting); or two tiers,
// asynchronous (the mover, its reconciliation of the tiers' order and the migration workers
// all run), promotion off, 60 % of the blocks fitting the first tier (tiered).
enum class Shape { one_tier, evicting, tiered };

// The threads of a threaded case call this at once: the first builds, the other waits.
Resident &resident(size_t n, bool runs, Shape shape = Shape::one_tier) {
  static std::mutex mu;
  std::lock_guard lk(mu);
  static std::map<std::tuple<size_t, bool, Shape>, std::unique_ptr<Resident>> cache;
  auto &slot = cache[{n, runs, shape}];
  if (slot) return *slot;
  cxltier::RuntimeConfig cfg;
  cfg.topology = "emulated";
  cfg.geometry.layers = cfg.geometry.kv_heads = cfg.geometry.head_dim = cfg.geometry.bytes_per_element = 1;
  cfg.geometry.k_and_v = false;
  cfg.geometry.tokens_per_block = 1024;  // 1 KiB "blocks": only budgets see the size
  cxltier::TierConfig t;
  t.name = "hbm";
  t.kind = cxltier::TierKind::hbm;
  t.backend = "null";
  t.budget_bytes = n * 1024;
  cfg.tiers.push_back(t);
  cfg.synchronous = true;
  cfg.store_capacity = n + 1024;
  if (shape == Shape::evicting) {
    t.name = "dram";
    t.kind = cxltier::TierKind::dram;
    t.budget_bytes = kSpare * 1024;
    cfg.tiers.push_back(t);
    cfg.promotion = cxltier::PromotionRule::never;
    cfg.store_capacity = n + kSpare + 1024;
  } else if (shape == Shape::tiered) {
    cfg.tiers[0].budget_bytes = n * 6 / 10 * 1024;
    t.name = "dram";
    t.kind = cxltier::TierKind::dram;
    t.budget_bytes = n * 1024;
    cfg.tiers.push_back(t);
    cfg.synchronous = false;
    cfg.promotion = cxltier::PromotionRule::never;
    cfg.store_capacity = 2 * n;  // at least the blocks both tiers could hold
  }
  auto r = std::make_unique<Resident>();
  {
    // Opened with the CPUs the process started with: the runtime's threads (the mover, the
    // migration workers) inherit the opening thread's CPUs, and the calling case has pinned its
    // thread to one. The tiered case measured its engine thread and the mover sharing that one
    // CPU until 2026-12-06.
    cpu_set_t pinned;
    const bool saved = start_cpus.known && sched_getaffinity(0, sizeof pinned, &pinned) == 0;
    if (saved && sched_setaffinity(0, sizeof start_cpus.set, &start_cpus.set) != 0)
      throw std::runtime_error("bench_runtime_access: cannot give the runtime's threads the process's CPUs");
    r->rt = cxltier::Runtime::open(cfg);
    if (saved) (void)sched_setaffinity(0, sizeof pinned, &pinned);
  }
  std::vector<cxltier::Key> all(n);
  std::vector<uint64_t> all_handles(n);
  for (size_t i = 0; i < n; ++i) {
    all[i] = cxltier::key_from_sequence(i / 64, i % 64);
    all_handles[i] = r->rt->admit(all[i]).handle;
  }
  if (shape == Shape::tiered) r->rt->wait_idle(-1);  // the demotions and the order settled first
  std::mt19937_64 rng(42);
  std::uniform_real_distribution<float> att(0.0f, 1.0f);
  r->batch = std::min(kBatch, n);
  std::vector<size_t> order(n);
  std::iota(order.begin(), order.end(), size_t{0});
  for (size_t b = 0; b < kBatches; ++b) {
    if (runs) {
      // 64 runs of 64 consecutive blocks, at random distinct run starts.
      std::vector<size_t> starts(n / 64);
      std::iota(starts.begin(), starts.end(), size_t{0});
      std::shuffle(starts.begin(), starts.end(), rng);
      for (size_t i = 0; i < r->batch; ++i) order[i] = starts[i / 64] * 64 + i % 64;
    } else {
      // The first `batch` of a random permutation (partial Fisher-Yates over the last one).
      for (size_t i = 0; i < r->batch; ++i) std::swap(order[i], order[i + rng() % (n - i)]);
    }
    for (size_t i = 0; i < r->batch; ++i) {
      r->keys.push_back(all[order[i]]);
      r->handles.push_back(all_handles[order[i]]);
      r->attention.push_back(att(rng));
    }
  }
  slot = std::move(r);
  return *slot;
}

void BM_AccessHandles(benchmark::State &state) {
  cxlt_bench::pin_to_bench_cpu();
  Resident &r = resident(static_cast<size_t>(state.range(0)), state.range(1) != 0);
  const size_t k = r.batch;
  size_t b = 0;
  for (auto _ : state) {
    r.rt->access_handles(r.handles.data() + b * k, r.attention.data() + b * k, k);
    r.rt->step();
    b = (b + 1) % kBatches;
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations() * k));
}
BENCHMARK(BM_AccessHandles)->ArgsProduct({{1 << 10, 1 << 16, 1 << 20}, {0, 1}})->ArgNames({"resident", "runs"});

// As BM_AccessHandles, and one admission a step into the full first tier: the victim search
// that pays for the index entries the step's accesses deferred. Items: block accesses.
void BM_AccessHandlesThenAdmit(benchmark::State &state) {
  cxlt_bench::pin_to_bench_cpu();
  Resident &r = resident(static_cast<size_t>(state.range(0)), state.range(1) != 0, Shape::evicting);
  const size_t k = r.batch;
  static uint64_t fresh = 0;  // new blocks, numbered past every resident one across runs
  // One admission before the clock starts: at a power-of-two resident count the first one
  // doubles the store and the index's per-id arrays (hundreds of ms at 1M, once), which would
  // otherwise be the whole of a one-iteration measurement.
  if (!r.admitted) {
    r.rt->admit(cxltier::key_from_sequence(uint64_t{1} << 40, fresh++));
    r.admitted = true;
  }
  size_t b = 0;
  for (auto _ : state) {
    r.rt->access_handles(r.handles.data() + b * k, r.attention.data() + b * k, k);
    r.rt->step();
    if (fresh >= kSpare) {
      state.SkipWithError("the second tier is full");
      break;
    }
    r.rt->admit(cxltier::key_from_sequence(uint64_t{1} << 40, fresh++));
    b = (b + 1) % kBatches;
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations() * k));
}
BENCHMARK(BM_AccessHandlesThenAdmit)->ArgsProduct({{1 << 10, 1 << 16, 1 << 20}, {0}})->ArgNames({"resident", "runs"});

void BM_AccessKeys(benchmark::State &state) {
  cxlt_bench::pin_to_bench_cpu();
  Resident &r = resident(static_cast<size_t>(state.range(0)), state.range(1) != 0);
  const size_t k = r.batch;
  size_t b = 0;
  for (auto _ : state) {
    r.rt->access(r.keys.data() + b * k, r.attention.data() + b * k, k);
    r.rt->step();
    b = (b + 1) % kBatches;
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations() * k));
}
BENCHMARK(BM_AccessKeys)->ArgsProduct({{1 << 10, 1 << 16, 1 << 20}, {0, 1}})->ArgNames({"resident", "runs"});

// Baseline: the same batch through an unordered_map from key to policy state, the same LRFU
// update, no lock, no policy index.
void BM_AccessHashMap(benchmark::State &state) {
  cxlt_bench::pin_to_bench_cpu();
  const size_t n = static_cast<size_t>(state.range(0));
  Resident &r = resident(n, state.range(1) != 0);
  const size_t k = r.batch;
  std::unordered_map<cxltier::Key, cxltier::PolicyState, cxltier::KeyHash> map;
  map.reserve(n);
  for (size_t i = 0; i < n; ++i) map[cxltier::key_from_sequence(i / 64, i % 64)] = {};
  const cxltier::LrfuParams params;
  uint64_t now = 1;
  size_t b = 0;
  for (auto _ : state) {
    const cxltier::Key *keys = r.keys.data() + b * k;
    const float *a = r.attention.data() + b * k;
    for (size_t i = 0; i < k; ++i) {
      cxltier::PolicyState &s = map.find(keys[i])->second;
      s.score = cxltier::lrfu_access(s.score, now - s.last_access, a[i], params);
      s.last_access = now;
      ++s.accesses;
    }
    ++now;
    benchmark::ClobberMemory();
    b = (b + 1) % kBatches;
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations() * k));
}
BENCHMARK(BM_AccessHashMap)->ArgsProduct({{1 << 10, 1 << 16, 1 << 20}, {0, 1}})->ArgNames({"resident", "runs"});

// What the memory alone allows: the same batches' blocks, each touching `lines` random cache
// lines that hold nothing but an LRFU state, with the prefetch distances the runtime uses (64
// ahead in the check pass, as its engine threads' handle check; 16 in the update pass, as its
// drain) and no other bookkeeping. lines 1 with checked 1 is the runtime's layout: a check pass
// reads each block's line (the generation and slot a handle is checked against, as the engine's
// thread does), and the update pass finds most of the batch's 4,096 lines (256 KiB) still
// cached: one random line a block from memory, read twice. lines 1 with checked 0 is the same
// line with no check at all. lines 2 was the runtime's layout until the third session of
// 2026-12-07 (an 8-byte residency word of its own, checked first over the batch, then the
// 64-byte store line); lines 3 adds the index record an access also updated until the
// index's stamp moved to the store line (32 bytes here, as the record was before its score and
// step moved there; it was 16 at the end). Huge pages as the runtime asks for them. The
// runtime's time over these is what its bookkeeping adds to its memory traffic; the map's time
// over lines 1 is the most any layout with one random line per access could reach against the
// map on this machine.
struct alignas(64) TouchLine {
  cxltier::PolicyState st;
  uint64_t pad[4];
};
struct alignas(32) TouchRecord {
  double s;
  uint64_t t;
  uint64_t version, pad;
};

template <typename T>
T *huge_array(size_t n) {
  constexpr size_t kHuge = size_t{2} << 20;
  const size_t bytes = (n * sizeof(T) + kHuge - 1) / kHuge * kHuge;
  void *p = std::aligned_alloc(kHuge, bytes);
  if (p == nullptr) throw std::bad_alloc();
  madvise(p, bytes, MADV_HUGEPAGE);
  std::memset(p, 0, bytes);
  return static_cast<T *>(p);
}

void BM_TouchLines(benchmark::State &state) {
  cxlt_bench::pin_to_bench_cpu();
  const size_t n = static_cast<size_t>(state.range(0));
  const int lines = static_cast<int>(state.range(1));
  const bool checked = state.range(2) != 0;  // lines 1 only: the check pass reads the line itself
  Resident &r = resident(n, false);
  const size_t k = r.batch;
  std::vector<uint32_t> ids(r.handles.size());
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<uint32_t>(r.handles[i] & 0xffffffffu) % n;
  std::unique_ptr<uint64_t, decltype(&std::free)> words(huge_array<uint64_t>(n), &std::free);
  std::unique_ptr<TouchLine, decltype(&std::free)> line(huge_array<TouchLine>(n), &std::free);
  std::unique_ptr<TouchRecord, decltype(&std::free)> rec(huge_array<TouchRecord>(n), &std::free);
  const cxltier::LrfuParams params;
  constexpr size_t kCheckAhead = 64, kLineAhead = 16, kRecordAhead = 8;  // the runtime's distances
  uint64_t now = 1, bad = 0;
  size_t b = 0;
  for (auto _ : state) {
    const uint32_t *id = ids.data() + b * k;
    const float *a = r.attention.data() + b * k;
    if (lines >= 2)
      for (size_t i = 0; i < k; ++i) {
        if (i + kCheckAhead < k) __builtin_prefetch(words.get() + id[i + kCheckAhead]);
        bad += words.get()[id[i]] != 0;
      }
    else if (checked)
      for (size_t i = 0; i < k; ++i) {
        if (i + kCheckAhead < k) __builtin_prefetch(line.get() + id[i + kCheckAhead]);
        bad += line.get()[id[i]].pad[0] != 0;  // the generation a handle names
      }
    for (size_t i = 0; i < k; ++i) {
      if (i + kLineAhead < k) __builtin_prefetch(line.get() + id[i + kLineAhead], 1);
      if (lines == 3 && i + kRecordAhead < k) __builtin_prefetch(rec.get() + id[i + kRecordAhead], 1);
      cxltier::PolicyState &s = line.get()[id[i]].st;
      s.score = cxltier::lrfu_access(s.score, now - s.last_access, a[i], params);
      s.last_access = now;
      ++s.accesses;
      if (lines == 3) {
        TouchRecord &x = rec.get()[id[i]];
        x.s = s.score;
        x.t = now;
        ++x.version;
      }
    }
    ++now;
    benchmark::ClobberMemory();
    b = (b + 1) % kBatches;
  }
  benchmark::DoNotOptimize(bad);
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations() * k));
}
BENCHMARK(BM_TouchLines)
    ->Args({1 << 20, 1, 0})
    ->Args({1 << 20, 1, 1})
    ->Args({1 << 20, 2, 0})
    ->Args({1 << 20, 3, 0})
    ->ArgNames({"resident", "lines", "checked"});

// Thread i of a threaded case runs on CPU CXLT_BENCH_CPU + i (default 0 + i), modulo the CPUs.
void pin_bench_thread(const benchmark::State &state) { cxlt_bench::pin_to_bench_cpu(state.thread_index()); }

// The runtime's floor (BM_TouchLines, lines 1, checked 1) for one and two threads: each thread
// checks the lines of its half of every batch by position (as each engine thread checks the
// handles it records), then updates lines of the batch's blocks. With by_checker 1 it updates
// the lines it checked (as a drain in parts applies each thread's records, its own shard's
// parts, since 2026-12-07); with by_checker 0 those of the blocks in its runs of 8 ids,
// alternating between the threads (as the drain's parts by block did before), so that about
// half of the lines a thread updates were read by the other thread's check, in the other
// core's cache. Nothing else, and the threads do not wait for each other. Wall time, so the
// two-thread rate over the one-thread rate is what this machine's two cores give the access's
// memory traffic.
struct TouchShared {
  std::unique_ptr<TouchLine, decltype(&std::free)> line{nullptr, &std::free};
  std::vector<uint32_t> check[2];    // thread t's half of batch 0 by position, then of batch 1, ...
  std::vector<uint32_t> update[2];   // thread t's blocks of batch 0 by part, then of batch 1, ...
  std::vector<size_t> check_at[2], update_at[2];  // where batch b starts (kBatches + 1 each)
};

TouchShared &touch_shared(size_t n, size_t threads, bool by_checker) {
  static std::mutex mu;
  std::lock_guard lk(mu);
  static std::map<std::tuple<size_t, size_t, bool>, std::unique_ptr<TouchShared>> cache;
  auto &slot = cache[{n, threads, by_checker}];
  if (slot) return *slot;
  if (threads < 1 || threads > 2) throw std::invalid_argument("BM_TouchLinesThreads: one or two threads");
  Resident &r = resident(n, false);
  auto sh = std::make_unique<TouchShared>();
  sh->line.reset(huge_array<TouchLine>(n));
  const size_t k = r.batch;
  for (size_t t = 0; t < threads; ++t) {
    for (size_t b = 0; b < kBatches; ++b) {
      sh->check_at[t].push_back(sh->check[t].size());
      sh->update_at[t].push_back(sh->update[t].size());
      for (size_t i = 0; i < k; ++i) {
        const auto id = static_cast<uint32_t>(r.handles[b * k + i] & 0xffffffffu) % n;
        if (i * threads / k == t) sh->check[t].push_back(id);
        if (by_checker ? i * threads / k == t : (id >> 3) % threads == t) sh->update[t].push_back(id);
      }
    }
    sh->check_at[t].push_back(sh->check[t].size());
    sh->update_at[t].push_back(sh->update[t].size());
  }
  slot = std::move(sh);
  return *slot;
}

void BM_TouchLinesThreads(benchmark::State &state) {
  pin_bench_thread(state);
  const size_t n = static_cast<size_t>(state.range(0));
  Resident &r = resident(n, false);
  TouchShared &sh = touch_shared(n, static_cast<size_t>(state.threads()), state.range(1) != 0);
  const auto t = static_cast<size_t>(state.thread_index());
  const cxltier::LrfuParams params;
  constexpr size_t kCheckAhead = 64, kLineAhead = 16;  // the runtime's distances
  uint64_t now = 1, bad = 0, items = 0;
  size_t b = 0;
  for (auto _ : state) {
    const uint32_t *c = sh.check[t].data() + sh.check_at[t][b];
    const size_t kc = sh.check_at[t][b + 1] - sh.check_at[t][b];
    for (size_t i = 0; i < kc; ++i) {
      if (i + kCheckAhead < kc) __builtin_prefetch(sh.line.get() + c[i + kCheckAhead]);
      bad += sh.line.get()[c[i]].pad[0] != 0;  // the generation a handle names
    }
    const uint32_t *u = sh.update[t].data() + sh.update_at[t][b];
    const size_t ku = sh.update_at[t][b + 1] - sh.update_at[t][b];
    const float *a = r.attention.data() + b * r.batch;
    for (size_t i = 0; i < ku; ++i) {
      if (i + kLineAhead < ku) __builtin_prefetch(sh.line.get() + u[i + kLineAhead], 1);
      cxltier::PolicyState &s = sh.line.get()[u[i]].st;
      s.score = cxltier::lrfu_access(s.score, now - s.last_access, a[i], params);
      s.last_access = now;
      ++s.accesses;
    }
    items += kc;  // the accesses this thread recorded; the updates of both threads add up to the same
    ++now;
    benchmark::ClobberMemory();
    b = (b + 1) % kBatches;
  }
  benchmark::DoNotOptimize(bad);
  state.SetItemsProcessed(static_cast<int64_t>(items));
}
BENCHMARK(BM_TouchLinesThreads)
    ->Args({1 << 10, 0})
    ->Args({1 << 20, 0})
    ->Args({1 << 20, 1})
    ->ArgNames({"resident", "by_checker"})
    ->UseRealTime()
    ->Threads(1)
    ->Threads(2);

// Two engine threads record the accesses of one step, each half of the batch; thread 0 then
// advances the step (applying what both recorded). Time per batch (wall), so the ratio of the
// one-thread to the two-thread time is the two-thread total rate over one thread's. With
// disjoint 0 the halves are by position, so both threads touch blocks anywhere in the resident
// set (and a line one core checked or updated is often in the other's cache); with disjoint 1
// thread t takes the blocks of the batch in its half of the ids (as engine threads that each run
// their own sequences), about half of the batch each. One thread records the whole batch either way.
struct DisjointHalves {
  std::vector<uint64_t> handles[2];
  std::vector<float> attention[2];
  std::vector<size_t> at[2];  // where batch b starts (kBatches + 1 each)
};

DisjointHalves &disjoint_halves(Resident &r, size_t n) {
  static std::mutex mu;
  std::lock_guard lk(mu);
  static std::map<size_t, std::unique_ptr<DisjointHalves>> cache;
  auto &slot = cache[n];
  if (slot) return *slot;
  auto d = std::make_unique<DisjointHalves>();
  // Ids are issued in admission order from 0, so the lower half of the ids is a half of the blocks.
  for (size_t b = 0; b < kBatches; ++b) {
    for (size_t t = 0; t < 2; ++t) d->at[t].push_back(d->handles[t].size());
    for (size_t i = 0; i < r.batch; ++i) {
      const uint64_t h = r.handles[b * r.batch + i];
      const size_t t = (h & 0xffffffffu) < n / 2 ? 0 : 1;
      d->handles[t].push_back(h);
      d->attention[t].push_back(r.attention[b * r.batch + i]);
    }
  }
  for (size_t t = 0; t < 2; ++t) d->at[t].push_back(d->handles[t].size());
  slot = std::move(d);
  return *slot;
}

void BM_AccessHandlesThreads(benchmark::State &state) {
  pin_bench_thread(state);
  const auto n = static_cast<size_t>(state.range(0));
  Resident &r = resident(n, state.range(1) != 0);
  const bool disjoint = state.range(2) != 0 && state.threads() == 2;
  DisjointHalves *d = disjoint ? &disjoint_halves(r, n) : nullptr;
  const size_t k = r.batch, parts = static_cast<size_t>(state.threads());
  const auto t = static_cast<size_t>(state.thread_index());
  const size_t lo = k * t / parts, hi = k * (t + 1) / parts;
  size_t b = 0, items = 0;
  for (auto _ : state) {
    if (d != nullptr) {
      const size_t from = d->at[t][b], count = d->at[t][b + 1] - from;
      r.rt->access_handles(d->handles[t].data() + from, d->attention[t].data() + from, count);
      items += count;
    } else {
      r.rt->access_handles(r.handles.data() + b * k + lo, r.attention.data() + b * k + lo, hi - lo);
      items += hi - lo;
    }
    if (t == 0) r.rt->step();
    b = (b + 1) % kBatches;
  }
  state.SetItemsProcessed(static_cast<int64_t>(items));
}
BENCHMARK(BM_AccessHandlesThreads)
    ->ArgsProduct({{1 << 10, 1 << 16, 1 << 20}, {0}, {0}})
    ->Args({1 << 10, 0, 1})
    ->Args({1 << 16, 0, 1})
    ->Args({1 << 20, 0, 1})
    ->ArgNames({"resident", "runs", "disjoint"})
    ->UseRealTime()
    ->Threads(1)
    ->Threads(2);

// The same step made as an engine that calls once per sequence: each thread's half of the batch
// in calls of 64 accesses (one sequence's blocks), so two threads' batches waiting in one drain
// interleave (the drain applies them in the order they were made, a call at a time).
void BM_AccessHandlesThreadsPerSequence(benchmark::State &state) {
  pin_bench_thread(state);
  const auto n = static_cast<size_t>(state.range(0));
  Resident &r = resident(n, false);
  constexpr size_t kPerCall = 64;
  const size_t k = r.batch, parts = static_cast<size_t>(state.threads());
  const auto t = static_cast<size_t>(state.thread_index());
  const size_t lo = k * t / parts, hi = k * (t + 1) / parts;
  size_t b = 0, items = 0;
  for (auto _ : state) {
    for (size_t at = lo; at < hi; at += kPerCall) {
      const size_t count = std::min(kPerCall, hi - at);
      r.rt->access_handles(r.handles.data() + b * k + at, r.attention.data() + b * k + at, count);
    }
    items += hi - lo;
    if (t == 0) r.rt->step();
    b = (b + 1) % kBatches;
  }
  state.SetItemsProcessed(static_cast<int64_t>(items));
}
BENCHMARK(BM_AccessHandlesThreadsPerSequence)
    ->Arg(1 << 10)
    ->Arg(1 << 20)
    ->ArgNames({"resident"})
    ->UseRealTime()
    ->Threads(1)
    ->Threads(2);

// An engine thread's accesses while a second thread polls the stats, a millisecond between
// calls. Each call measures the placement (docs/runtime.md, "Placement quality"): a scan of
// every remembered state under the runtime's mutex, then a sort of the keep values without it.
// The pause keeps the case comparable with a library that sorted under the mutex: polled back
// to back, the poller took the mutex again before the engine thread woke, and the engine
// starved. The poller runs on the next CPU. Time per batch (wall) of the engine thread, so its
// rate over BM_AccessHandles's is the share of the access path a stats poller leaves to the
// engine (1 would be none taken). Counter stats_per_s: the poller's calls per second.
void BM_AccessHandlesWhileStats(benchmark::State &state) {
  cxlt_bench::pin_to_bench_cpu();
  Resident &r = resident(static_cast<size_t>(state.range(0)), false);
  const size_t k = r.batch;
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> calls{0};
  std::thread poller([&] {
    cxlt_bench::pin_to_bench_cpu(1);
    while (!stop.load(std::memory_order_relaxed)) {
      benchmark::DoNotOptimize(r.rt->stats());
      calls.fetch_add(1, std::memory_order_relaxed);
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  });
  const auto t0 = std::chrono::steady_clock::now();
  size_t b = 0;
  for (auto _ : state) {
    r.rt->access_handles(r.handles.data() + b * k, r.attention.data() + b * k, k);
    r.rt->step();
    b = (b + 1) % kBatches;
  }
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  stop = true;
  poller.join();
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations() * k));
  state.counters["stats_per_s"] = static_cast<double>(calls.load()) / std::max(secs, 1e-9);
}
BENCHMARK(BM_AccessHandlesWhileStats)->Arg(1 << 10)->Arg(1 << 20)->ArgName("resident")->UseRealTime();


// One stats() call at 1K and 1M resident blocks, with the placement measured or not (the last
// measure reported). Time per call, lower is better.
void BM_Stats(benchmark::State &state) {
  cxlt_bench::pin_to_bench_cpu();
  Resident &r = resident(static_cast<size_t>(state.range(0)), false);
  const bool measure = state.range(1) != 0;
  for (auto _ : state) benchmark::DoNotOptimize(r.rt->stats(measure));
}
BENCHMARK(BM_Stats)->ArgsProduct({{1 << 10, 1 << 20}, {0, 1}})->ArgNames({"resident", "measure"})->Unit(benchmark::kMillisecond);

// An engine thread's accesses beside the mover: each step's accesses change keep values, so
// the mover's passes find the tiers out of order and reconcile them (a scan of every state
// under the mutex; docs/runtime.md, "Placement quality"), and the engine's step waits for the
// scans. Time per batch (wall). Counters: worst_us, p999_us and p99_us, the slowest batch and
// the 99.9th and 99th percentiles of the batches' times in microseconds (lower is better; the
// 99.9th needs a run of some seconds to mean much), and moves, the
// promotions and demotions so far. Registered last: its runtime, kept for the next run, goes
// on running its mover, which would share the CPUs with later cases.
// With fresh:1 each batch is drawn anew (random blocks, random attention; the drawing is
// outside the times), so that the accesses keep putting blocks out of order and the mover
// scans at every pass it may; with fresh:0 the same 256 batches come round again, and once
// the order has settled for them the mover scans every 10 ms.
void BM_AccessHandlesTiered(benchmark::State &state) {
  cxlt_bench::pin_to_bench_cpu();
  const size_t n = static_cast<size_t>(state.range(0));
  const bool fresh = state.range(1) != 0;
  Resident &r = resident(n, false, Shape::tiered);
  const size_t k = r.batch;
  size_t b = 0;
  std::vector<uint32_t> took;  // each batch's time, us
  took.reserve(size_t{1} << 20);
  std::vector<uint64_t> drawn(fresh ? k : 0);
  std::vector<float> drawn_attention(fresh ? k : 0);
  std::mt19937_64 rng(7);
  std::uniform_real_distribution<float> att(0.0f, 1.0f);
  std::vector<uint64_t> all;  // the handles of the 256 batches (about every resident block), for the draws
  if (fresh)
    for (size_t i = 0; i < kBatches * k; ++i) all.push_back(r.handles[i]);
  for (auto _ : state) {
    const uint64_t *handles = r.handles.data() + b * k;
    const float *attention = r.attention.data() + b * k;
    if (fresh) {
      state.PauseTiming();
      for (size_t i = 0; i < k; ++i) {
        drawn[i] = all[rng() % all.size()];
        drawn_attention[i] = att(rng);
      }
      handles = drawn.data();
      attention = drawn_attention.data();
      state.ResumeTiming();
    }
    const auto t0 = std::chrono::steady_clock::now();
    r.rt->access_handles(handles, attention, k);
    r.rt->step();
    const auto us = std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - t0).count();
    if (took.size() < took.capacity()) took.push_back(static_cast<uint32_t>(us));
    b = (b + 1) % kBatches;
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations() * k));
  std::sort(took.begin(), took.end());
  state.counters["worst_us"] = took.empty() ? 0.0 : static_cast<double>(took.back());
  // Nearest rank: the smallest time at or above which 1 % of the batches lie.
  state.counters["p99_us"] = took.empty() ? 0.0 : static_cast<double>(took[(took.size() * 99 + 99) / 100 - 1]);
  state.counters["p999_us"] = took.empty() ? 0.0 : static_cast<double>(took[(took.size() * 999 + 999) / 1000 - 1]);
  const cxlt_stats_t s = r.rt->stats(false);
  state.counters["moves"] = static_cast<double>(s.promotions + s.demotions);
}
BENCHMARK(BM_AccessHandlesTiered)->ArgsProduct({{1 << 10, 1 << 20}, {0, 1}})->ArgNames({"resident", "fresh"})->UseRealTime();

CXLT_BENCH_RATIO("access by handle vs unordered_map update, 1M resident, random", "BM_AccessHandles/resident:1048576/runs:0",
                 "BM_AccessHashMap/resident:1048576/runs:0", 8);
CXLT_BENCH_RATIO("one random line a block, nothing else, vs unordered_map update, 1M resident, random",
                 "BM_TouchLines/resident:1048576/lines:1/checked:0", "BM_AccessHashMap/resident:1048576/runs:0", 0);
CXLT_BENCH_RATIO("access by handle while another thread polls stats() vs alone, 1M resident, random",
                 "BM_AccessHandlesWhileStats/resident:1048576/real_time", "BM_AccessHandles/resident:1048576/runs:0", 0);
CXLT_BENCH_RATIO("access by handle beside the mover (two tiers, asynchronous) vs one synchronous tier, 1M resident, random",
                 "BM_AccessHandlesTiered/resident:1048576/fresh:0/real_time", "BM_AccessHandles/resident:1048576/runs:0", 0);
CXLT_BENCH_RATIO("access by handle vs its one random line, checked in a pass before, nothing else, 1M resident, random",
                 "BM_AccessHandles/resident:1048576/runs:0", "BM_TouchLines/resident:1048576/lines:1/checked:1", 0);
CXLT_BENCH_RATIO("one random line a block, checked in a pass before, vs unordered_map update, 1M resident, random",
                 "BM_TouchLines/resident:1048576/lines:1/checked:1", "BM_AccessHashMap/resident:1048576/runs:0", 0);
CXLT_BENCH_RATIO("two random lines a block, nothing else, vs unordered_map update, 1M resident, random",
                 "BM_TouchLines/resident:1048576/lines:2/checked:0", "BM_AccessHashMap/resident:1048576/runs:0", 0);
CXLT_BENCH_RATIO("access by handle, one admission a step, vs unordered_map update, 1M resident, random",
                 "BM_AccessHandlesThenAdmit/resident:1048576/runs:0", "BM_AccessHashMap/resident:1048576/runs:0", 8);
CXLT_BENCH_RATIO("access by handle, one admission a step, vs unordered_map update, 1K resident, random",
                 "BM_AccessHandlesThenAdmit/resident:1024/runs:0", "BM_AccessHashMap/resident:1024/runs:0", 0);
CXLT_BENCH_RATIO("access by handle vs unordered_map update, 1K resident, random", "BM_AccessHandles/resident:1024/runs:0",
                 "BM_AccessHashMap/resident:1024/runs:0", 0);
CXLT_BENCH_RATIO("access by handle vs unordered_map update, 64K resident, random", "BM_AccessHandles/resident:65536/runs:0",
                 "BM_AccessHashMap/resident:65536/runs:0", 0);
CXLT_BENCH_RATIO("two threads vs one, by handle, 1M resident, random (total rate)",
                 "BM_AccessHandlesThreads/resident:1048576/runs:0/disjoint:0/real_time/threads:2",
                 "BM_AccessHandlesThreads/resident:1048576/runs:0/disjoint:0/real_time/threads:1", 1.6);
CXLT_BENCH_RATIO("two threads vs one, the line checked and updated with nothing else, 1M resident, random (total rate)",
                 "BM_TouchLinesThreads/resident:1048576/by_checker:0/real_time/threads:2",
                 "BM_TouchLinesThreads/resident:1048576/by_checker:0/real_time/threads:1", 0);
CXLT_BENCH_RATIO("two threads vs one, by handle, 64K resident, random (total rate)",
                 "BM_AccessHandlesThreads/resident:65536/runs:0/disjoint:0/real_time/threads:2",
                 "BM_AccessHandlesThreads/resident:65536/runs:0/disjoint:0/real_time/threads:1", 0);
CXLT_BENCH_RATIO("two threads vs one, by handle, 1M resident, random, each thread its own half of the blocks (total rate)",
                 "BM_AccessHandlesThreads/resident:1048576/runs:0/disjoint:1/real_time/threads:2",
                 "BM_AccessHandlesThreads/resident:1048576/runs:0/disjoint:0/real_time/threads:1", 0);
CXLT_BENCH_RATIO("two threads vs one, by handle, 64K resident, random, each thread its own half of the blocks (total rate)",
                 "BM_AccessHandlesThreads/resident:65536/runs:0/disjoint:1/real_time/threads:2",
                 "BM_AccessHandlesThreads/resident:65536/runs:0/disjoint:0/real_time/threads:1", 0);
CXLT_BENCH_RATIO("two threads vs one, the line checked and updated by the thread that checked it, 1M resident, random (total rate)",
                 "BM_TouchLinesThreads/resident:1048576/by_checker:1/real_time/threads:2",
                 "BM_TouchLinesThreads/resident:1048576/by_checker:1/real_time/threads:1", 0);
CXLT_BENCH_RATIO("two threads vs one, by handle, 1K resident, random (total rate)",
                 "BM_AccessHandlesThreads/resident:1024/runs:0/disjoint:0/real_time/threads:2",
                 "BM_AccessHandlesThreads/resident:1024/runs:0/disjoint:0/real_time/threads:1", 1.6);
CXLT_BENCH_RATIO("two threads vs one, by handle, 1K resident, random, each thread its own half of the blocks (total rate)",
                 "BM_AccessHandlesThreads/resident:1024/runs:0/disjoint:1/real_time/threads:2",
                 "BM_AccessHandlesThreads/resident:1024/runs:0/disjoint:0/real_time/threads:1", 0);
CXLT_BENCH_RATIO("two threads vs one, the line checked and updated with nothing else, 1K resident, random (total rate)",
                 "BM_TouchLinesThreads/resident:1024/by_checker:0/real_time/threads:2",
                 "BM_TouchLinesThreads/resident:1024/by_checker:0/real_time/threads:1", 0);
CXLT_BENCH_RATIO("two threads vs one, by handle in calls of 64, 1K resident, random (total rate)",
                 "BM_AccessHandlesThreadsPerSequence/resident:1024/real_time/threads:2",
                 "BM_AccessHandlesThreadsPerSequence/resident:1024/real_time/threads:1", 0);
CXLT_BENCH_RATIO("two threads vs one, by handle in calls of 64, 1M resident, random (total rate)",
                 "BM_AccessHandlesThreadsPerSequence/resident:1048576/real_time/threads:2",
                 "BM_AccessHandlesThreadsPerSequence/resident:1048576/real_time/threads:1", 0);
CXLT_BENCH_RATIO("access by handle vs unordered_map update, 1M resident, runs of 64",
                 "BM_AccessHandles/resident:1048576/runs:1", "BM_AccessHashMap/resident:1048576/runs:1", 0);
CXLT_BENCH_RATIO("access by key vs unordered_map update, 1M resident, random", "BM_AccessKeys/resident:1048576/runs:0",
                 "BM_AccessHashMap/resident:1048576/runs:0", 0);
CXLT_BENCH_RATIO("access by handle vs by key, 1M resident, random", "BM_AccessHandles/resident:1048576/runs:0",
                 "BM_AccessKeys/resident:1048576/runs:0", 0);

}  // namespace
