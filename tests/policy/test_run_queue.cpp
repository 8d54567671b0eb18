// SPDX-License-Identifier: Apache-2.0
// The LRFU index's run queue against a brute-force model: a plain list of the entries it took,
// sorted on demand. Random pushes (steps repeating, rising, and some going back), pops from the
// front and full walks in the order a victim search reads it.
#include "lib/policy/run_queue.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <set>
#include <vector>

using namespace cxltier;

namespace {

struct E {
  uint64_t t;
  double s;
  uint64_t key;
  bool operator==(const E &o) const { return t == o.t && s == o.s && key == o.key; }
};
struct Less {
  bool operator()(const E &a, const E &b) const noexcept {
    if (a.t != b.t) return a.t < b.t;
    if (a.s != b.s) return a.s < b.s;
    return a.key < b.key;
  }
};

}  // namespace

TEST(RunQueue, MatchesASortedListThroughRandomPushesPopsAndWalks) {
  std::mt19937_64 rng(11);
  for (int round = 0; round < 200; ++round) {
    RunQueue<E, Less> q;
    std::vector<E> model;  // what q holds
    uint64_t step = 1 + rng() % 5;
    size_t refused = 0, taken = 0;
    const int ops = 200 + static_cast<int>(rng() % 2000);
    for (int op = 0; op < ops; ++op) {
      const unsigned r = static_cast<unsigned>(rng() % 100);
      if (r < 60) {
        // Mostly the current step (ties on s and key included), sometimes an earlier one.
        uint64_t t = step;
        if (r < 8 && step > 0) t = step - 1 - rng() % std::min<uint64_t>(step, 3);
        const E e{t, static_cast<double>(rng() % 4) / 4.0, rng() % 8};
        const bool before_last = !model.empty() && Less{}(e, *std::max_element(model.begin(), model.end(), Less{}));
        if (q.push(e)) {
          model.push_back(e);
          ++taken;
        } else {
          // Only an entry that comes before the last one in order may be refused.
          ASSERT_TRUE(before_last) << "round " << round << " op " << op;
          ++refused;
        }
      } else if (r < 70) {
        step += 1 + rng() % 3;
      } else if (r < 90) {
        if (q.empty()) {
          ASSERT_TRUE(model.empty());
          continue;
        }
        q.sort_front();
        const auto first = std::min_element(model.begin(), model.end(), Less{});
        ASSERT_EQ(q.front(), *first) << "round " << round << " op " << op;
        model.erase(first);
        q.pop_front();
      } else {
        // A walk from the front, sorting each step as a search reaches it.
        std::vector<E> want = model;
        std::sort(want.begin(), want.end(), Less{});
        std::vector<E> seen;
        for (size_t i = q.head(); i < q.end(); ++i) {
          if (i == q.sorted_end()) q.sort_run(i);
          seen.push_back(q[i]);
        }
        ASSERT_EQ(seen, want) << "round " << round << " op " << op;
      }
      ASSERT_EQ(q.size(), model.size());
      ASSERT_TRUE(q.is_ordered()) << "round " << round << " op " << op;
    }
    // A block newer than everything (an admission) is always taken, whatever came before.
    const uint64_t newest = step + 1;
    EXPECT_TRUE(q.push(E{newest, 0.5, 3}));
    EXPECT_TRUE(q.push(E{newest, 0.25, 1}));  // same step, unsorted yet: taken
    EXPECT_GT(taken, 0u);
    if (round == 0) std::printf("round 0: %zu taken, %zu refused\n", taken, refused);
  }
}

// Long enough that the consumed front is reclaimed (positions move down): the queue still
// matches the model, and its sorted edge moves with it.
TEST(RunQueue, ReclaimingTheConsumedFrontKeepsTheOrder) {
  std::mt19937_64 rng(12);
  RunQueue<E, Less> q;
  std::multiset<E, Less> model;
  uint64_t step = 1;
  size_t reclaims = 0;
  for (int op = 0; op < 80000; ++op) {
    // Phases of 10,000: pushes three to one, then pops three to one, so the queue grows past the
    // reclaim threshold and then drains below half of it.
    const bool filling = (op / 10000) % 2 == 0;
    if (rng() % 4 != 0 ? filling : !filling) {
      const E e{step, static_cast<double>(rng() % 4) / 4.0, rng() % 8};
      if (q.push(e)) model.insert(e);
      if (rng() % 8 == 0) ++step;
    } else if (!q.empty()) {
      const size_t head_before = q.head();
      q.sort_front();
      ASSERT_EQ(q.front(), *model.begin()) << "op " << op;
      model.erase(model.begin());
      q.pop_front();
      if (!q.empty() && q.head() < head_before) ++reclaims;
    }
    ASSERT_EQ(q.size(), model.size());
    if (op % 97 == 0) {
      ASSERT_TRUE(q.is_ordered()) << "op " << op;
    }
  }
  EXPECT_GT(reclaims, 0u);
  const std::vector<E> want(model.begin(), model.end());
  std::vector<E> seen;
  for (size_t i = q.head(); i < q.end(); ++i) {
    if (i == q.sorted_end()) q.sort_run(i);
    seen.push_back(q[i]);
  }
  EXPECT_EQ(seen, want);
}

TEST(RunQueue, IsOrderedCatchesAStepSplitAcrossTheSortedEdge) {
  RunQueue<E, Less> q;
  ASSERT_TRUE(q.push(E{5, 0.5, 1}));
  q.sort_front();  // step 5 sorted
  ASSERT_TRUE(q.push(E{5, 0.75, 2}));   // extends the sorted step at its end
  EXPECT_FALSE(q.push(E{5, 0.25, 0}));  // would go before the sorted step's last entry
  EXPECT_FALSE(q.push(E{4, 0.9, 9}));   // an earlier step
  ASSERT_TRUE(q.push(E{6, 0.1, 0}));
  EXPECT_TRUE(q.is_ordered());
  EXPECT_EQ(q.size(), 3u);
  EXPECT_EQ(q.sorted_end(), q.head() + 2);
}
