// SPDX-License-Identifier: Apache-2.0
// BlockPool over every backend, one battery for all (backend x pool shape): every slot
// allocated and freed, bytes that survive churn, the exact budget, grow failure (injected with
// the faulty decorator) leaving the pool unchanged, bad frees detected, reservation up front.
// The pool is documented as not thread-safe (the runtime locks), so there is no threaded test.
#include "lib/memory/backend.hpp"
#include "lib/memory/pool.hpp"
#include "tiers_test_util.hpp"

#include <cxltier/error.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <set>
#include <string>
#include <tuple>
#include <vector>

using namespace cxltier;
using namespace cxltier::test;

namespace {

struct PoolShape {
  std::string label;
  uint64_t block_bytes;
  uint64_t budget_bytes;
  uint32_t blocks_per_extent;
};

// Budgets that are not a multiple of the block (the remainder must never become a slot) and
// extents that do not divide the slot count (the last extent is short).
std::vector<PoolShape> shapes() {
  return {
      {"b64k_x100_e16", 64 * 1024, 100 * 64 * 1024 + 65535, 16},
      {"b5m_x6_e2", 5ull << 20, 6 * (5ull << 20) + 4096, 2},
      {"b4k_x37_e1", 4096, 37 * 4096 + 1, 1},
  };
}

void PrintTo(const PoolShape &s, std::ostream *os) { *os << s.label; }

using Param = std::tuple<BackendCase, PoolShape>;

class PoolTest : public ::testing::TestWithParam<Param> {
protected:
  const BackendCase &bcase() const { return std::get<0>(GetParam()); }
  const PoolShape &shape() const { return std::get<1>(GetParam()); }
  BlockPoolConfig config(bool reserve_all = false) const {
    BlockPoolConfig c;
    c.name = bcase().label;
    c.block_bytes = shape().block_bytes;
    c.budget_bytes = shape().budget_bytes;
    c.blocks_per_extent = shape().blocks_per_extent;
    c.reserve_all = reserve_all;
    return c;
  }
  uint32_t expected_slots() const { return static_cast<uint32_t>(shape().budget_bytes / shape().block_bytes); }
};

struct Snapshot {
  uint32_t mapped, used;
  size_t extents;
  uint64_t bytes_mapped;
  bool operator==(const Snapshot &) const = default;
};
Snapshot snap(const BlockPool &p) { return {p.slots_mapped(), p.slots_used(), p.extent_count(), p.bytes_mapped()}; }

}  // namespace

TEST_P(PoolTest, AllocateEverySlotThenFreeAll) {
  TierBackend b(bcase().backend, bcase().params);
  BlockPool pool(b, config());
  const uint32_t n = expected_slots();
  ASSERT_EQ(pool.max_slots(), n);
  EXPECT_EQ(pool.slots_mapped(), 0u);  // lazy: nothing until the first allocate
  std::vector<SlotId> slots;
  std::set<SlotId> distinct;
  for (uint32_t i = 0; i < n; ++i) {
    SlotId s = kInvalidSlot;
    ASSERT_EQ(pool.allocate(&s), CXLT_OK) << "slot " << i << ": " << backend_last_error();
    ASSERT_TRUE(pool.is_allocated(s));
    slots.push_back(s);
    distinct.insert(s);
  }
  EXPECT_EQ(distinct.size(), n);
  EXPECT_TRUE(pool.full());
  SlotId extra = 12345;
  EXPECT_EQ(pool.allocate(&extra), CXLT_ERROR_OUT_OF_TIER_MEMORY);
  EXPECT_EQ(extra, 12345u);  // untouched on failure
  std::string why;
  EXPECT_TRUE(pool.is_valid(&why)) << why;
  // Addresses: distinct, non-overlapping, inside an extent (host) or null (null backend).
  if (bcase().has_bytes) {
    std::vector<char *> addrs;
    for (SlotId s : slots) addrs.push_back(static_cast<char *>(pool.address(s)));
    std::sort(addrs.begin(), addrs.end());
    for (size_t i = 1; i < addrs.size(); ++i) ASSERT_GE(addrs[i] - addrs[i - 1], static_cast<ptrdiff_t>(shape().block_bytes));
  } else {
    for (SlotId s : slots) EXPECT_EQ(pool.address(s), nullptr);
  }
  for (SlotId s : slots) ASSERT_EQ(pool.free(s), CXLT_OK);
  EXPECT_EQ(pool.slots_used(), 0u);
  EXPECT_TRUE(pool.is_valid(&why)) << why;
  // Freed slots are reused, without growing.
  Snapshot before = snap(pool);
  SlotId s;
  ASSERT_EQ(pool.allocate(&s), CXLT_OK);
  EXPECT_EQ(snap(pool).extents, before.extents);
}

TEST_P(PoolTest, BytesWrittenToEverySlotSurviveChurn) {
  TierBackend b(bcase().backend, bcase().params);
  BlockPool pool(b, config());
  const uint32_t n = expected_slots();
  const size_t bytes = shape().block_bytes;
  std::vector<SlotId> slots(n);
  for (uint32_t i = 0; i < n; ++i) ASSERT_EQ(pool.allocate(&slots[i]), CXLT_OK);
  if (!bcase().has_bytes) {
    for (SlotId s : slots) EXPECT_EQ(pool.address(s), nullptr);
    return;  // null: no bytes to keep (NullBackend.HasNoBytes covers the rest)
  }
  for (SlotId s : slots) fill_pattern(pool.address(s), bytes, s);
  // Free every other slot, reallocate them and overwrite with new tags: neighbours must hold.
  std::mt19937 rng(42);
  std::vector<SlotId> kept, churned;
  for (uint32_t i = 0; i < n; ++i) (i % 2 ? churned : kept).push_back(slots[i]);
  std::shuffle(churned.begin(), churned.end(), rng);
  for (SlotId s : churned) ASSERT_EQ(pool.free(s), CXLT_OK);
  for (size_t i = 0; i < churned.size(); ++i) {
    SlotId s;
    ASSERT_EQ(pool.allocate(&s), CXLT_OK);
    fill_pattern(pool.address(s), bytes, 1000000 + s);
    churned[i] = s;
  }
  for (SlotId s : kept) ASSERT_EQ(check_pattern(pool.address(s), bytes, s), SIZE_MAX) << "slot " << s;
  for (SlotId s : churned) ASSERT_EQ(check_pattern(pool.address(s), bytes, 1000000 + s), SIZE_MAX) << "slot " << s;
  std::string why;
  EXPECT_TRUE(pool.is_valid(&why)) << why;
}

TEST_P(PoolTest, BudgetIsExact) {
  TierBackend b(bcase().backend, bcase().params);
  BlockPool pool(b, config(/*reserve_all=*/true));
  const uint32_t n = expected_slots();
  EXPECT_EQ(pool.max_slots(), n);
  EXPECT_EQ(pool.slots_mapped(), n);
  EXPECT_EQ(pool.bytes_mapped(), uint64_t{n} * shape().block_bytes);  // never the remainder
  EXPECT_LE(pool.bytes_mapped(), shape().budget_bytes);
  EXPECT_EQ(b.capacity().allocated_bytes, pool.bytes_mapped());
  EXPECT_EQ(pool.extent_count(), (n + shape().blocks_per_extent - 1) / shape().blocks_per_extent);
  EXPECT_EQ(pool.grow(), CXLT_ERROR_OUT_OF_TIER_MEMORY);
  for (uint32_t i = 0; i < n; ++i) {
    SlotId s;
    ASSERT_EQ(pool.allocate(&s), CXLT_OK);
  }
  SlotId s;
  EXPECT_EQ(pool.allocate(&s), CXLT_ERROR_OUT_OF_TIER_MEMORY);
  EXPECT_EQ(pool.bytes_used(), uint64_t{n} * shape().block_bytes);
  // Page kinds recorded per extent.
  BlockPool::PageCounts pc = pool.page_counts();
  EXPECT_EQ(pc.hugetlb + pc.thp + pc.small + pc.none, pool.extent_count());
  EXPECT_EQ(pc.none > 0, !bcase().has_bytes);
}

TEST_P(PoolTest, GrowFailureLeavesThePoolUnchanged) {
  // The faulty decorator over this case's backend: 2 extents succeed, then allocation fails.
  BackendCase c = bcase();
  TierBackendParams p = c.params;
  if (c.backend != "faulty") p.set_option(CXLT_OPTION_INNER_BACKEND, c.backend);
  TierBackend b("faulty", p);
  std::shared_ptr<FaultControl> faults = fault_control(b);
  ASSERT_NE(faults, nullptr);
  BlockPool pool(b, config());
  const uint32_t per = shape().blocks_per_extent;
  if (expected_slots() <= 2 * per) GTEST_SKIP() << "budget fits in two extents: nothing left to fail";
  faults->arm(FaultPlan{.alloc_successes = 2});
  std::vector<SlotId> held;
  for (uint32_t i = 0; i < 2 * per; ++i) {
    SlotId s;
    ASSERT_EQ(pool.allocate(&s), CXLT_OK);
    held.push_back(s);
  }
  if (c.has_bytes) fill_pattern(pool.address(held[0]), shape().block_bytes, 77);
  Snapshot before = snap(pool);
  SlotId s = 999;
  backend_set_error("");
  EXPECT_EQ(pool.allocate(&s), CXLT_ERROR_BACKEND);
  EXPECT_EQ(s, 999u);
  const std::string msg = backend_last_error();
  EXPECT_NE(msg.find("injected"), std::string::npos) << msg;
  EXPECT_NE(msg.find(c.label), std::string::npos) << msg;  // names the pool
  EXPECT_EQ(snap(pool), before);
  std::string why;
  EXPECT_TRUE(pool.is_valid(&why)) << why;
  EXPECT_EQ(pool.grow(), CXLT_ERROR_BACKEND);  // still failing, still unchanged
  EXPECT_EQ(snap(pool), before);
  EXPECT_EQ(faults->counts().allocs_failed, 2u);
  // Frees and reuse keep working while growth fails.
  ASSERT_EQ(pool.free(held[1]), CXLT_OK);
  ASSERT_EQ(pool.allocate(&s), CXLT_OK);
  EXPECT_EQ(s, held[1]);
  if (c.has_bytes) {
    EXPECT_EQ(check_pattern(pool.address(held[0]), shape().block_bytes, 77), SIZE_MAX);
  }
  // Once the backend recovers, growth resumes.
  faults->disarm();
  ASSERT_EQ(pool.allocate(&s), CXLT_OK);
  EXPECT_EQ(pool.extent_count(), before.extents + 1);
  EXPECT_TRUE(pool.is_valid(&why)) << why;
}

TEST_P(PoolTest, ReservationFailureLeavesNothingAllocated) {
  BackendCase c = bcase();
  TierBackendParams p = c.params;
  if (c.backend != "faulty") p.set_option(CXLT_OPTION_INNER_BACKEND, c.backend);
  TierBackend b("faulty", p);
  std::shared_ptr<FaultControl> faults = fault_control(b);
  ASSERT_NE(faults, nullptr);
  faults->arm(FaultPlan{.alloc_successes = 1});
  if (expected_slots() <= shape().blocks_per_extent) GTEST_SKIP() << "one extent holds the budget";
  try {
    BlockPool pool(b, config(/*reserve_all=*/true));
    FAIL() << "reservation succeeded although the second extent failed";
  } catch (const Error &e) {
    EXPECT_EQ(e.code(), CXLT_ERROR_BACKEND);
    EXPECT_NE(std::string(e.what()).find("reserving"), std::string::npos) << e.what();
  }
  EXPECT_EQ(b.capacity().allocated_bytes, 0u);
}

TEST_P(PoolTest, BadFreesAreDetectedAndChangeNothing) {
  TierBackend b(bcase().backend, bcase().params);
  BlockPool pool(b, config());
  SlotId a, c;
  ASSERT_EQ(pool.allocate(&a), CXLT_OK);
  ASSERT_EQ(pool.allocate(&c), CXLT_OK);
  ASSERT_EQ(pool.free(c), CXLT_OK);
  Snapshot before = snap(pool);
  // A slot never handed out.
  EXPECT_EQ(pool.free(pool.slots_mapped() + 5), CXLT_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(backend_last_error().find("never handed out"), std::string::npos) << backend_last_error();
  EXPECT_EQ(pool.free(kInvalidSlot), CXLT_ERROR_INVALID_ARGUMENT);
  // A double free.
  EXPECT_EQ(pool.free(c), CXLT_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(backend_last_error().find("not allocated"), std::string::npos) << backend_last_error();
  EXPECT_EQ(snap(pool), before);
  std::string why;
  EXPECT_TRUE(pool.is_valid(&why)) << why;
  // The double free did not put c on the free stack twice: two allocations give two slots.
  SlotId x, y;
  ASSERT_EQ(pool.allocate(&x), CXLT_OK);
  if (pool.slots_free() > 0) {
    ASSERT_EQ(pool.allocate(&y), CXLT_OK);
    EXPECT_NE(x, y);
  }
  EXPECT_TRUE(pool.is_allocated(a));
}

TEST_P(PoolTest, DestroyingThePoolReturnsEveryExtent) {
  TierBackend b(bcase().backend, bcase().params);
  {
    BlockPool pool(b, config());
    SlotId s;
    for (int i = 0; i < 3; ++i) ASSERT_EQ(pool.allocate(&s), CXLT_OK);
    EXPECT_GT(b.capacity().allocated_bytes, 0u);
  }
  EXPECT_EQ(b.capacity().allocated_bytes, 0u);
}

INSTANTIATE_TEST_SUITE_P(
    BackendsTimesShapes, PoolTest, ::testing::Combine(::testing::ValuesIn(backend_cases()), ::testing::ValuesIn(shapes())),
    [](const ::testing::TestParamInfo<Param> &pinfo) {
      return std::get<0>(pinfo.param).label + "_" + std::get<1>(pinfo.param).label;
    });

// --- Configuration errors -------------------------------------------------------------------

TEST(PoolConfig, BadFieldsAreNamed) {
  TierBackend b("null", TierBackendParams{});
  auto expect_error = [&](BlockPoolConfig c, const std::string &needle) {
    try {
      BlockPool pool(b, c);
      FAIL() << "accepted a pool with bad " << needle;
    } catch (const Error &e) {
      EXPECT_EQ(e.code(), CXLT_ERROR_INVALID_ARGUMENT);
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  expect_error({"t", 0, 1 << 20, 4, false}, "block_bytes");
  expect_error({"t", 1 << 20, (1 << 20) - 1, 4, false}, "budget_bytes");
  expect_error({"t", 1 << 20, 1 << 30, 0, false}, "blocks_per_extent");
  expect_error({"t", 1, 1ull << 40, 4, false}, "slots");
}

TEST(PoolConfig, SlotToAddressIsExtentTableLookup) {
  TierBackend b("emulated", TierBackendParams{});
  BlockPool pool(b, {"t", 4096, 10 * 4096, 3, true});  // extents of 3, 3, 3, 1 slots
  ASSERT_EQ(pool.extent_count(), 4u);
  for (SlotId s = 0; s < 10; ++s) {
    TierExtent e = pool.extent(s / 3);
    EXPECT_EQ(pool.address(s), static_cast<char *>(e.base) + (s % 3) * 4096) << s;
  }
  EXPECT_EQ(pool.extent(3).bytes, 4096u);  // the short last extent
  EXPECT_EQ(pool.extent(99).base, nullptr);
}
