// SPDX-License-Identifier: Apache-2.0
// Load and soak: one long-lived runtime under many threads and a mixed
// workload (owners admit, write, pin and verify their blocks, access batches, move, release;
// readers look up other threads' blocks, read policy states, stats and tier info; the decode
// clock advances and checkpoints are written), in phases. After each phase the invariants
// must hold, and after the warm-up phases the resident memory must stay flat: the runtime's
// memory is bounded by its budgets and its store capacity, and nothing else may grow.
//
// Bounded by default (about a minute on two cores; less under sanitizers). CXLT_SOAK_SECONDS=N
// runs phases until N seconds have passed instead (a longer soak on request);
// CXLT_RELIABILITY_SCALE scales the work of each phase.
#include "reliability_util.hpp"

#include "../common/temp_dir.hpp"
#include "../runtime/runtime_test_util.hpp"

#include <cxltier/error.hpp>
#include <cxltier/runtime.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <map>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

using namespace cxltier;
using cxlt_test::check_block;
using cxlt_test::fill_block;

namespace {

constexpr int kOwners = 8;
constexpr int kReaders = 2;
constexpr uint64_t kKeysPerOwner = 600;  // 4800 keys for a store of 2048 states: it must forget

struct Totals {
  std::atomic<uint64_t> ops{0}, verified{0}, torn{0}, full{0}, unexpected{0}, reads{0};
};

// An owner's blocks and what it last wrote in each; it lives across phases.
struct OwnerState {
  std::map<uint64_t, uint64_t> expected;
  uint64_t version = 1;
};

void owner_phase(Runtime &rt, int thread, uint64_t seed, uint64_t ops, OwnerState &os, Totals &tot,
                 std::string *problem, std::mutex *mu) {
  std::mt19937_64 rng(seed);
  auto report = [&](const std::string &what) {
    ++tot.unexpected;
    std::lock_guard g(*mu);
    if (problem->empty()) *problem = "owner " + std::to_string(thread) + ": " + what;
  };
  std::vector<Key> batch;
  std::vector<float> att;
  for (uint64_t op = 0; op < ops; ++op) {
    // Skewed key choice: a hot few and a long cold tail, as a decode batch's blocks are.
    const uint64_t i = rng() % 4 == 0 ? rng() % kKeysPerOwner : rng() % 48;
    const Key k = key_from_sequence(9000 + thread, i);
    const int what = static_cast<int>(rng() % 100);
    try {
      if (what < 30) {
        bool placed = false;
        Block b = rt.admit(k, &placed, true);
        auto it = os.expected.find(i);
        if (!placed && it != os.expected.end()) {
          uint64_t v = 0;
          if (check_block(b.data, b.bytes, k, &v) && v == it->second) ++tot.verified; else ++tot.torn;
        }
        fill_block(b.data, b.bytes, k, ++os.version);
        os.expected[i] = os.version;
        rt.unpin(k);
      } else if (what < 60) {  // an attention batch over recently used keys of ours
        batch.clear();
        att.clear();
        for (int j = 0; j < 8; ++j) {
          Key kj = key_from_sequence(9000 + thread, rng() % 48);
          if (rt.lookup(kj, nullptr)) {
            batch.push_back(kj);
            att.push_back(static_cast<float>(rng() % 1001) / 1000.0f);
          }
        }
        try {
          rt.access(batch.data(), att.data(), batch.size());
        } catch (const Error &e) {
          if (e.code() != CXLT_ERROR_NOT_FOUND) throw;  // one was dropped between lookup and access
        }
      } else if (what < 80) {
        Block b = rt.pin(k);
        auto it = os.expected.find(i);
        if (it != os.expected.end()) {
          uint64_t v = 0;
          if (check_block(b.data, b.bytes, k, &v) && v == it->second) ++tot.verified; else ++tot.torn;
        }
        rt.unpin(k);
      } else if (what < 86) {
        rt.move(k, static_cast<int>(rng() % 3), false);
      } else if (what < 96) {
        bool forget = rng() % 3 == 0;
        rt.release(k, forget);
        if (forget) os.expected.erase(i);
      } else {
        rt.step();
      }
    } catch (const Error &e) {
      switch (e.code()) {
        case CXLT_ERROR_NOT_FOUND: os.expected.erase(i); break;
        case CXLT_ERROR_INVALID_ARGUMENT:
        case CXLT_ERROR_BUSY: break;
        case CXLT_ERROR_OUT_OF_TIER_MEMORY: ++tot.full; break;
        default: report(e.what());
      }
    }
    ++tot.ops;
    if (op % 256 == 255) {
      std::string v = rt.validate();
      if (!v.empty()) report(v);
    }
  }
}

void reader_phase(Runtime &rt, uint64_t seed, const std::atomic<bool> &stop, Totals &tot) {
  std::mt19937_64 rng(seed);
  while (!stop) {
    const Key k = key_from_sequence(9000 + rng() % kOwners, rng() % 48);
    Block b;
    (void)rt.lookup(k, &b);
    cxlt_policy_state_t st;
    (void)rt.policy_state(k, &st);
    if (rng() % 64 == 0) (void)rt.stats_json();
    for (size_t t = 0; t < rt.tier_count(); ++t) {
      cxlt_tier_info_t info = rt.tier_info(t);
      if (info.used_bytes > info.budget_bytes) ++tot.unexpected;
    }
    ++tot.reads;
  }
}

}  // namespace

TEST(Soak, ManyThreadsMixedWorkloadHoldsInvariantsAndFlatMemory) {
  const cxlt_test::TempDir tmp("soak");
  const std::string dir = tmp.path().string();
  RuntimeConfig cfg = cxlt_test::three_tier_config(64, 128, 256);
  cfg.migration_threads = 3;
  cfg.verify_copies = true;
  cfg.store_capacity = 2048;  // smaller than the key space: the bounded store forgets
  cfg.store_path = dir + "/soak.store";
  cfg.checkpoint_every_steps = 200;
  const char *secs_env = std::getenv("CXLT_SOAK_SECONDS");
  const double soak_seconds = secs_env ? std::strtod(secs_env, nullptr) : 0.0;
  const uint64_t phases = soak_seconds > 0 ? UINT64_MAX : 10;
  const uint64_t ops = cxlt_rel::scaled(4000, 5);
  constexpr uint64_t kWarmup = 2;

  auto rt = Runtime::open(cfg);
  Totals tot;
  std::string problem;
  std::mutex mu;
  std::vector<OwnerState> owners(kOwners);
  std::vector<uint64_t> rss;
  const auto t0 = std::chrono::steady_clock::now();
  for (uint64_t phase = 0; phase < phases; ++phase) {
    std::atomic<bool> stop{false};
    std::vector<std::thread> readers, threads;
    for (int r = 0; r < kReaders; ++r) readers.emplace_back([&, r] { reader_phase(*rt, 7 * phase + r, stop, tot); });
    for (int t = 0; t < kOwners; ++t)
      threads.emplace_back([&, t] { owner_phase(*rt, t, 1000 * phase + t, ops, owners[t], tot, &problem, &mu); });
    for (auto &th : threads) th.join();
    stop = true;
    for (auto &th : readers) th.join();
    ASSERT_TRUE(rt->wait_idle(60000)) << "moves still in flight 60 s after phase " << phase;
    ASSERT_EQ(rt->validate(), "") << "after phase " << phase;
    rss.push_back(cxlt_rel::rss_bytes());
    const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (soak_seconds > 0 && elapsed >= soak_seconds && phase > kWarmup) break;
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  cxlt_stats_t s = rt->stats();
  rt.reset();  // close: the final checkpoint
  EXPECT_EQ(tot.unexpected.load(), 0u) << problem;
  EXPECT_EQ(tot.torn.load(), 0u) << "a block's bytes changed without its owner writing them";
  EXPECT_GT(tot.verified.load(), 1000u);
  EXPECT_GT(s.demotions, 100u);
  EXPECT_GT(s.drops, 100u);
  EXPECT_GT(s.store_forgotten, 0u) << "the key space should overflow the bounded store";
  EXPECT_EQ(s.migration_failures, 0u);
  EXPECT_TRUE(std::filesystem::exists(cfg.store_path));
  EXPECT_TRUE(cxlt_rel::no_leaks_now());

  // Flat memory: after the warm-up (pools at their budgets, the store full, the allocator's
  // arenas sized) no later phase may add more than the tolerance. The tiers hold 14 MiB; a
  // leak of one block (32 KiB) per thousand operations would add over 10 MiB over the phases.
  // Under sanitizers the allocators keep freed memory in quarantine by design, so the bound is
  // only a sanity check there (LeakSanitizer checks leaks in ASan builds).
  const uint64_t tolerance = cxlt_rel::kSanitized ? 512ull << 20 : 8ull << 20;
  ASSERT_GT(rss.size(), kWarmup);
  const uint64_t warm = rss[kWarmup];
  const uint64_t peak = *std::max_element(rss.begin() + kWarmup, rss.end());
  EXPECT_LE(peak, warm + tolerance) << "RSS after warm-up " << cxlt_rel::mib(warm) << ", later at most "
                                    << cxlt_rel::mib(peak);
  std::string series;
  for (uint64_t r : rss) series += (series.empty() ? "" : " ") + cxlt_rel::mib(r);
  std::printf("soak: %d owner + %d reader threads, %zu phases, %.1f s, %llu operations (%.0f per second), %llu reads\n"
              "verified %llu blocks, torn 0; demotions %llu, promotions %llu, drops %llu, states forgotten %llu, "
              "full-tier errors %llu\nRSS per phase: %s (after warm-up %s, peak %s, tolerance %s)\n",
              kOwners, kReaders, rss.size(), seconds, (unsigned long long)tot.ops.load(),
              static_cast<double>(tot.ops.load()) / seconds, (unsigned long long)tot.reads.load(),
              (unsigned long long)tot.verified.load(), (unsigned long long)s.demotions,
              (unsigned long long)s.promotions, (unsigned long long)s.drops, (unsigned long long)s.store_forgotten,
              (unsigned long long)tot.full.load(), series.c_str(), cxlt_rel::mib(warm).c_str(),
              cxlt_rel::mib(peak).c_str(), cxlt_rel::mib(tolerance).c_str());
}
