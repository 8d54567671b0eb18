// SPDX-License-Identifier: Apache-2.0
// The faulty decorator fails exactly where its plan says and nowhere else: allocation after N
// successes (for a count, or for ever), copies with a seeded probability reproducibly, torn
// destinations on injected copy failures, and exact counts with several threads at once.
#include "lib/memory/backend.hpp"
#include "tiers/faulty/faulty.hpp"
#include "tiers_test_util.hpp"

#include <cxltier/error.hpp>

#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

using namespace cxltier;
using namespace cxltier::test;

namespace {

constexpr size_t kMiB = size_t{1} << 20;

TierBackendParams faulty_params(const std::string &inner = "emulated") {
  TierBackendParams p;
  p.set_option(CXLT_OPTION_INNER_BACKEND, inner);
  return p;
}

// The backend's own FaultControl, armed with `plan`.
std::shared_ptr<FaultControl> armed(const TierBackend &b, const FaultPlan &plan = {}) {
  std::shared_ptr<FaultControl> f = fault_control(b);
  if (f) f->arm(plan);
  return f;
}

}  // namespace

TEST(Faulty, AllocFailsAfterNSuccessesForEver) {
  TierBackend b("faulty", faulty_params());
  auto f = armed(b, FaultPlan{.alloc_successes = 3});
  ASSERT_NE(f, nullptr);
  std::vector<TierExtent> got;
  for (int i = 0; i < 3; ++i) got.push_back(b.alloc_extent(kMiB));
  for (int i = 0; i < 4; ++i) {
    TierExtent e;
    EXPECT_EQ(b.try_alloc_extent(kMiB, &e), CXLT_ERROR_BACKEND);
    EXPECT_NE(backend_last_error().find("injected alloc_extent failure"), std::string::npos);
  }
  EXPECT_EQ(b.capacity().allocated_bytes, 3 * kMiB);  // the failures allocated nothing
  FaultCounts c = f->counts();
  EXPECT_EQ(c.allocs_passed, 3u);
  EXPECT_EQ(c.allocs_failed, 4u);
  for (auto &e : got) b.free_extent(e);  // frees are never failed
  EXPECT_EQ(b.capacity().allocated_bytes, 0u);
}

TEST(Faulty, AllocFailsForACountThenRecovers) {
  TierBackend b("faulty", faulty_params("null"));
  auto f = armed(b, FaultPlan{.alloc_successes = 1, .alloc_failures = 2});
  ASSERT_NE(f, nullptr);
  std::vector<cxlt_result_t> results;
  for (int i = 0; i < 5; ++i) {
    TierExtent e;
    results.push_back(b.try_alloc_extent(kMiB, &e));
    if (results.back() == CXLT_OK) b.free_extent(e);
  }
  EXPECT_EQ(results, (std::vector<cxlt_result_t>{CXLT_OK, CXLT_ERROR_BACKEND, CXLT_ERROR_BACKEND, CXLT_OK, CXLT_OK}));
}

TEST(Faulty, NothingFailsUnlessArmed) {
  TierBackend b("faulty", faulty_params());
  auto f = armed(b);
  ASSERT_NE(f, nullptr);
  TierExtent e = b.alloc_extent(2 * kMiB);
  std::vector<unsigned char> src(kMiB, 0xab);
  for (int i = 0; i < 200; ++i) {
    cxlt_result_t r = b.ops().ext_copy_in(b.state(), e.base, src.data(), src.size(), nullptr);
    EXPECT_EQ(r, CXLT_ERROR_NOT_SUPPORTED);  // passed through to emulated: "use your own kernel"
  }
  EXPECT_EQ(f->counts().copies_failed, 0u);
  EXPECT_EQ(f->counts().copies_passed, 200u);
  b.free_extent(e);
  // The same FaultControl through the contract's ext_control; other backends have none.
  EXPECT_TRUE(b.control() == std::static_pointer_cast<void>(f));
  EXPECT_NE(b.describe().find("FaultControl"), std::string::npos) << b.describe();
  TierBackend plain("emulated", TierBackendParams{});
  EXPECT_EQ(fault_control(plain), nullptr);
  EXPECT_TRUE(plain.control() == nullptr);
}

TEST(Faulty, CopyFailuresFollowTheSeedAndTheProbability) {
  auto run = [](uint64_t seed, double prob) {
    TierBackend b("faulty", faulty_params("null"));
    auto f = armed(b, FaultPlan{.copy_failure_probability = prob, .seed = seed});
    EXPECT_NE(f, nullptr);
    std::vector<bool> fails;
    for (int i = 0; i < 2000; ++i) {
      fails.push_back(b.ops().ext_copy_out(b.state(), nullptr, nullptr, 64, nullptr) == CXLT_ERROR_BACKEND);
    }
    return fails;
  };
  auto a = run(7, 0.1), a2 = run(7, 0.1), other = run(8, 0.1);
  EXPECT_EQ(a, a2);      // same seed, same failures
  EXPECT_NE(a, other);   // another seed, another sequence
  long n = std::count(a.begin(), a.end(), true);
  EXPECT_GT(n, 120);     // 200 expected; the bounds are > 5 sigma away for this fixed sequence
  EXPECT_LT(n, 280);
  auto none = run(7, 0.0), all = run(7, 1.0);
  EXPECT_EQ(std::count(none.begin(), none.end(), true), 0);
  EXPECT_EQ(std::count(all.begin(), all.end(), true), 2000);
}

TEST(Faulty, InjectedCopyFailureTearsTheDestination) {
  TierBackend b("faulty", faulty_params());
  auto f = armed(b, FaultPlan{.copy_failure_probability = 1.0});
  ASSERT_NE(f, nullptr);
  TierExtent e = b.alloc_extent(kMiB);
  std::memset(e.base, 0, kMiB);
  std::vector<unsigned char> src(kMiB, 0xcd);
  EXPECT_EQ(b.ops().ext_copy_in(b.state(), e.base, src.data(), kMiB, nullptr), CXLT_ERROR_BACKEND);
  EXPECT_NE(backend_last_error().find("injected copy failure"), std::string::npos);
  auto *d = static_cast<unsigned char *>(e.base);
  EXPECT_EQ(d[0], 0xcd);             // half written...
  EXPECT_EQ(d[kMiB - 1], 0);         // ...half not: a torn block
  f->arm(FaultPlan{.copy_failure_probability = 1.0, .tear_failed_copies = false});
  std::memset(e.base, 0, kMiB);
  EXPECT_EQ(b.ops().ext_copy_in(b.state(), e.base, src.data(), kMiB, nullptr), CXLT_ERROR_BACKEND);
  EXPECT_EQ(d[0], 0);
  b.free_extent(e);
}

TEST(Faulty, CountsAreExactUnderThreads) {
  TierBackend b("faulty", faulty_params("null"));
  auto f = armed(b, FaultPlan{.alloc_successes = 50, .copy_failure_probability = 0.25, .seed = 3});
  ASSERT_NE(f, nullptr);
  constexpr int kThreads = 4, kCalls = 40;
  std::atomic<int> alloc_ok{0}, alloc_failed{0}, copy_failed{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < kCalls; ++i) {
        TierExtent e;
        if (b.try_alloc_extent(4096, &e) == CXLT_OK) {
          ++alloc_ok;
          b.try_free_extent(e);
        } else {
          ++alloc_failed;
        }
        if (b.ops().ext_copy_in(b.state(), nullptr, nullptr, 64, nullptr) == CXLT_ERROR_BACKEND) ++copy_failed;
      }
    });
  }
  for (auto &th : threads) th.join();
  EXPECT_EQ(alloc_ok.load(), 50);  // exactly N successes, whichever threads got them
  EXPECT_EQ(alloc_failed.load(), kThreads * kCalls - 50);
  FaultCounts c = f->counts();
  EXPECT_EQ(c.copies_failed, static_cast<uint64_t>(copy_failed.load()));
  EXPECT_EQ(c.copies_failed + c.copies_passed, uint64_t{kThreads * kCalls});
  // The set of failing draws is the seed's, whatever the interleaving: replay it on one thread.
  f->arm(FaultPlan{.copy_failure_probability = 0.25, .seed = 3});
  int replay = 0;
  for (int i = 0; i < kThreads * kCalls; ++i) replay += f->next_copy_fails();
  EXPECT_EQ(replay, copy_failed.load());
}

TEST(Faulty, RefusesToWrapItselfOrNothing) {
  TierBackendParams p = faulty_params("faulty");
  EXPECT_THROW(TierBackend("faulty", p), Error);
  p.set_option(CXLT_OPTION_INNER_BACKEND, "cuda");
  try {
    TierBackend b("faulty", p);
    FAIL() << "wrapped a backend this build lacks";
  } catch (const Error &e) {
    EXPECT_EQ(e.code(), CXLT_ERROR_NOT_SUPPORTED);
    EXPECT_NE(std::string(e.what()).find("not available"), std::string::npos) << e.what();
  }
  // The inner backend's own initialisation errors come through, prefixed.
  p.set_option(CXLT_OPTION_INNER_BACKEND, "numa");
  p.numa_nodes = {4000};
  try {
    TierBackend b("faulty", p);
    FAIL() << "wrapped numa on node 4000";
  } catch (const Error &e) {
    EXPECT_NE(std::string(e.what()).find("faulty backend over 'numa'"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("4000"), std::string::npos) << e.what();
  }
}
