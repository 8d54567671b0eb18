// SPDX-License-Identifier: Apache-2.0
// The pool's hot path never touches the heap: this file replaces the global operator new for
// the whole test_tiers binary with a counting one, and checks that allocate/free (and address)
// make no call to it, while growing by an extent may.
#include "lib/memory/backend.hpp"
#include "lib/memory/pool.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <new>
#include <vector>

namespace {
std::atomic<uint64_t> g_heap_allocations{0};
}

void *operator new(std::size_t n) {
  g_heap_allocations.fetch_add(1, std::memory_order_relaxed);
  if (void *p = std::malloc(n ? n : 1)) return p;
  throw std::bad_alloc();
}
void *operator new[](std::size_t n) {
  g_heap_allocations.fetch_add(1, std::memory_order_relaxed);
  if (void *p = std::malloc(n ? n : 1)) return p;
  throw std::bad_alloc();
}
void *operator new(std::size_t n, const std::nothrow_t &) noexcept {
  g_heap_allocations.fetch_add(1, std::memory_order_relaxed);
  return std::malloc(n ? n : 1);
}
void *operator new[](std::size_t n, const std::nothrow_t &) noexcept {
  g_heap_allocations.fetch_add(1, std::memory_order_relaxed);
  return std::malloc(n ? n : 1);
}
// These are the replacement pair of the operator new above, so free() is the matching call;
// GCC cannot see that through the replacement and warns.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
void operator delete(void *p) noexcept { std::free(p); }
void operator delete[](void *p) noexcept { std::free(p); }
void operator delete(void *p, std::size_t) noexcept { std::free(p); }
void operator delete[](void *p, std::size_t) noexcept { std::free(p); }
#pragma GCC diagnostic pop

using namespace cxltier;

TEST(PoolHotPath, AllocateAndFreeNeverTouchTheHeap) {
#if CXLT_DEBUG_LEVEL >= 3
  GTEST_SKIP() << "debug_level 3 runs the whole-pool validator (which allocates) after every operation";
#endif
  TierBackend b("emulated", TierBackendParams{});
  BlockPool pool(b, {"hot", 64 * 1024, 256 * 64 * 1024, 32, false});
  std::vector<SlotId> slots(256);
  for (auto &s : slots) ASSERT_EQ(pool.allocate(&s), CXLT_OK);  // grows: may allocate
  for (SlotId s : slots) ASSERT_EQ(pool.free(s), CXLT_OK);
  const uint64_t before = g_heap_allocations.load();
  uintptr_t sink = 0;
  for (int round = 0; round < 100; ++round) {
    for (auto &s : slots) {
      ASSERT_EQ(pool.allocate(&s), CXLT_OK);
      sink += reinterpret_cast<uintptr_t>(pool.address(s));
    }
    for (SlotId s : slots) ASSERT_EQ(pool.free(s), CXLT_OK);
  }
  SlotId full;
  for (auto &s : slots) ASSERT_EQ(pool.allocate(&s), CXLT_OK);
  ASSERT_EQ(pool.allocate(&full), CXLT_ERROR_OUT_OF_TIER_MEMORY);  // "tier full" formats nothing
  const uint64_t after = g_heap_allocations.load();
  EXPECT_EQ(after - before, 0u) << "heap allocations on the pool's hot path";
  EXPECT_NE(sink, 0u);
}

TEST(PoolHotPath, GrowingIsWhereTheHeapIsUsed) {
  // The counter works: growing (metadata, extent table) shows up in it.
  TierBackend b("null", TierBackendParams{});
  BlockPool pool(b, {"grow", 4096, 1000 * 4096, 10, false});
  const uint64_t before = g_heap_allocations.load();
  SlotId s;
  ASSERT_EQ(pool.allocate(&s), CXLT_OK);
  EXPECT_GT(g_heap_allocations.load(), before);
}
