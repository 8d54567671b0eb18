// SPDX-License-Identifier: Apache-2.0
// The replay (the runtime's own admission, eviction index and score store on null tiers)
// against a tiny independent cache simulator written here: LRU as a list and a map, FIFO as a
// queue and a set, Belady's OPT (the incoming block admitted first) as an ordered set of next
// uses and, at small capacities, as a full scan. The traces are read independently too
// (nlohmann::json, zlib). Hit counts must be equal, exactly, on every shared trace and a
// generated attention trace, at several capacities.
#include "../common/temp_dir.hpp"
#include "replay_test_util.hpp"

#include <cxltier/tools/replay.hpp>
#include <cxltier/tools/trace.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <deque>
#include <limits>
#include <list>
#include <map>
#include <set>
#include <string>
#include <unistd.h>
#include <unordered_map>
#include <unordered_set>
#include <vector>

using namespace cxltier;

namespace {

constexpr uint64_t kNever = std::numeric_limits<uint64_t>::max();

// --- The independent simulator ---------------------------------------------------------------

uint64_t lru_hits(const std::vector<uint64_t> &s, size_t cap) {
  std::list<uint64_t> order;  // front: most recent
  std::unordered_map<uint64_t, std::list<uint64_t>::iterator> where;
  uint64_t hits = 0;
  for (uint64_t id : s) {
    auto it = where.find(id);
    if (it != where.end()) {
      ++hits;
      order.erase(it->second);
    } else if (order.size() == cap) {
      where.erase(order.back());
      order.pop_back();
    }
    order.push_front(id);
    where[id] = order.begin();
  }
  return hits;
}

uint64_t fifo_hits(const std::vector<uint64_t> &s, size_t cap) {
  std::deque<uint64_t> queue;
  std::unordered_set<uint64_t> in;
  uint64_t hits = 0;
  for (uint64_t id : s) {
    if (in.count(id)) {
      ++hits;
      continue;
    }
    if (queue.size() == cap) {
      in.erase(queue.front());
      queue.pop_front();
    }
    queue.push_back(id);
    in.insert(id);
  }
  return hits;
}

std::vector<uint64_t> next_uses(const std::vector<uint64_t> &s) {
  std::vector<uint64_t> next(s.size(), kNever);
  std::unordered_map<uint64_t, uint64_t> seen;  // id -> the next reference after the cursor
  for (size_t i = s.size(); i-- > 0;) {
    auto it = seen.find(s[i]);
    if (it != seen.end()) next[i] = it->second;
    seen[s[i]] = i;
  }
  return next;
}

// Belady with the incoming block admitted first: on a miss with the cache full, the block
// (the incoming one included) whose next reference is farthest leaves.
uint64_t opt_hits(const std::vector<uint64_t> &s, size_t cap) {
  const std::vector<uint64_t> next = next_uses(s);
  std::set<std::pair<uint64_t, uint64_t>> by_next;  // (next use, id)
  std::unordered_map<uint64_t, uint64_t> next_of;
  uint64_t hits = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    const uint64_t id = s[i];
    auto it = next_of.find(id);
    if (it != next_of.end()) {
      ++hits;
      by_next.erase({it->second, id});
      it->second = next[i];
      by_next.insert({next[i], id});
      continue;
    }
    if (next_of.size() == cap) {
      auto far = std::prev(by_next.end());
      if (next[i] >= far->first) continue;  // the incoming block is the farthest: not kept
      next_of.erase(far->second);
      by_next.erase(far);
    }
    next_of[id] = next[i];
    by_next.insert({next[i], id});
  }
  return hits;
}

// The same decision by a full scan of the resident blocks (small capacities only).
uint64_t opt_hits_scan(const std::vector<uint64_t> &s, size_t cap) {
  const std::vector<uint64_t> next = next_uses(s);
  std::vector<std::pair<uint64_t, uint64_t>> resident;  // (id, next use)
  uint64_t hits = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    bool hit = false;
    for (auto &r : resident)
      if (r.first == s[i]) {
        r.second = next[i];
        hit = true;
      }
    if (hit) {
      ++hits;
      continue;
    }
    if (resident.size() < cap) {
      resident.push_back({s[i], next[i]});
      continue;
    }
    size_t far = 0;
    for (size_t k = 1; k < resident.size(); ++k)
      if (resident[k].second > resident[far].second) far = k;
    if (next[i] >= resident[far].second) continue;
    resident[far] = {s[i], next[i]};
  }
  return hits;
}

// --- The cases ---------------------------------------------------------------------------------

struct Case {
  std::string file;  // under tests/data/traces, or "generated"
};

// Written once per process into a directory removed at exit.
std::string generated_trace() {
  static const cxlt_test::TempDir dir("replay-ref");
  static std::string path = [] {
    std::string p = dir / "generated.jsonl";
    trace::SyntheticParams sp;
    sp.steps = 300;
    sp.sequences = 48;
    sp.max_active = 8;
    sp.arrival_rate = 0.25;
    sp.prompt_tokens_max = 1024;
    sp.decode_tokens_max = 256;
    trace::write_attention_trace(p, sp);
    return p;
  }();
  return path;
}

std::string path_of(const Case &c) { return c.file == "generated" ? generated_trace() : cxlt_test::trace_dir() + c.file; }

std::vector<uint64_t> capacities_for(uint64_t unique) {
  std::vector<uint64_t> caps{1, 2, 16, 100, 1000, 6553, std::max<uint64_t>(1, unique / 20),
                             std::max<uint64_t>(1, unique / 10), unique / 2 + 1, unique};
  std::sort(caps.begin(), caps.end());
  caps.erase(std::unique(caps.begin(), caps.end()), caps.end());
  return caps;
}

replay::Result replay_with(const std::string &path, PolicyKind kind, uint64_t cap, const replay::Prepass *pp = nullptr) {
  replay::Options o;
  o.trace = path;
  o.policy = replay::PolicyChoice{kind, true};
  o.capacity_blocks = cap;
  o.next_use = pp;
  return replay::run(o);
}

class ReferenceSimulator : public ::testing::TestWithParam<Case> {};

TEST_P(ReferenceSimulator, LruFifoOptHitsAreEqualExactly) {
  const std::string path = path_of(GetParam());
  uint64_t requests = 0;
  const std::vector<uint64_t> stream = cxlt_test::reference_stream(path, &requests);
  ASSERT_FALSE(stream.empty()) << path;
  const uint64_t unique = std::unordered_set<uint64_t>(stream.begin(), stream.end()).size();
  const replay::Prepass pp = replay::prepass(path, {}, true);
  ASSERT_EQ(pp.references, stream.size());
  ASSERT_EQ(pp.unique_blocks, unique);
  ASSERT_EQ(pp.requests, requests);
  for (uint64_t cap : capacities_for(unique)) {
    SCOPED_TRACE(path + " at " + std::to_string(cap) + " blocks");
    const uint64_t lru = lru_hits(stream, cap), fifo = fifo_hits(stream, cap), opt = opt_hits(stream, cap);
    replay::Result rl = replay_with(path, PolicyKind::lru, cap);
    replay::Result rf = replay_with(path, PolicyKind::fifo, cap);
    replay::Result ro = replay_with(path, PolicyKind::opt, cap, &pp);
    EXPECT_EQ(rl.hits, lru) << "lru";
    EXPECT_EQ(rf.hits, fifo) << "fifo";
    EXPECT_EQ(ro.hits, opt) << "opt";
    EXPECT_EQ(rl.references, stream.size());
    EXPECT_EQ(rl.unique_blocks, unique);
    EXPECT_EQ(rl.requests, requests);
    EXPECT_LE(lru, opt);
    EXPECT_LE(fifo, opt);
    if (cap <= 1000 && stream.size() <= 25000) {
      EXPECT_EQ(opt_hits_scan(stream, cap), opt) << "the two references disagree";
    }
    if (cap >= unique) {
      // Room for every block: only the first reference of each misses, whatever the policy.
      EXPECT_EQ(rl.hits, stream.size() - unique);
      EXPECT_EQ(ro.hits, stream.size() - unique);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Shared, ReferenceSimulator,
                         ::testing::Values(Case{"mooncake__synthetic_trace.jsonl"},
                                           Case{"dynamo__mooncake_trace_1000.jsonl"},
                                           Case{"dynamo__pi_request_trace.jsonl.gz"}, Case{"attention_small.jsonl"},
                                           Case{"generated"}),
                         [](const auto &tp) {
                           std::string n = tp.param.file;
                           n = n.substr(0, n.find('.'));
                           for (char &ch : n)
                             if (ch == '-') ch = '_';
                           return n;
                         });

// The simulator itself on a stream small enough to check by hand.
TEST(ReferenceSimulatorSelf, HandCheckedStream) {
  // a b c a d b a c, capacity 2.
  const std::vector<uint64_t> s{1, 2, 3, 1, 4, 2, 1, 3};
  EXPECT_EQ(lru_hits(s, 2), 0u);
  EXPECT_EQ(fifo_hits(s, 2), 0u);
  // OPT: 1 2 | 3: farthest among {1 (next 3), 2 (next 5), 3 (next 7)} is 3 itself: bypassed;
  // 1 hit; 4 (never): bypassed; 2 hit; 1 hit; 3 miss. 3 hits.
  EXPECT_EQ(opt_hits(s, 2), 3u);
  EXPECT_EQ(opt_hits_scan(s, 2), 3u);
  EXPECT_EQ(lru_hits(s, 3), 2u);  // 1 hit at index 3; 1 hit at index 6
  EXPECT_EQ(fifo_hits(s, 3), 3u);  // 1 hits; 4 evicts 1; 2 hits; 1 evicts 2; 3 hits
}

}  // namespace
