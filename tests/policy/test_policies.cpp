// SPDX-License-Identifier: Apache-2.0
// Every policy behind the EvictionPolicy contract against a tiny, independent, obviously
// correct reference written here (lists, maps and full scans), on randomized reference
// streams: the same victims, in the same order, and the same hit counts.
#include "lib/policy/eviction.hpp"
#include "lib/store/score_store.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <deque>
#include <list>
#include <map>
#include <random>
#include <set>
#include <tuple>
#include <unordered_map>
#include <vector>

using namespace cxltier;

namespace {

// A reference stream with skew, scans and a moving hot set, so that policies differ.
std::vector<uint64_t> make_stream(uint64_t seed, size_t n, uint64_t universe) {
  std::mt19937_64 rng(seed);
  std::vector<uint64_t> s;
  s.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    uint64_t phase = (i / 2000) * 37;
    double u = static_cast<double>(rng() >> 11) / 9007199254740992.0;
    uint64_t r = static_cast<uint64_t>(std::pow(u, 3.0) * static_cast<double>(universe));
    if (rng() % 5 == 0) r = rng() % universe;
    s.push_back((r + phase) % universe);
  }
  return s;
}

std::vector<uint64_t> next_uses(const std::vector<uint64_t> &s) {
  std::vector<uint64_t> nu(s.size());
  std::unordered_map<uint64_t, uint64_t> last;
  for (size_t i = s.size(); i-- > 0;) {
    auto it = last.find(s[i]);
    nu[i] = it == last.end() ? UINT64_MAX : it->second;
    last[s[i]] = i;
  }
  return nu;
}

// The library side: store + policy, driven the way a single-tier replay drives them. The
// decode step advances every `refs_per_step` references.
struct LibCache {
  PolicyKind kind;
  std::unique_ptr<EvictionPolicy> policy;
  ScoreStore store{StoreOptions{0, PolicyKind::lrfu, {}}};
  size_t capacity;
  bool persist;
  LrfuParams lrfu;
  uint64_t tick = 0;
  std::vector<uint64_t> evictions;
  size_t reserved = 0;
  uint64_t hits = 0;

  LibCache(PolicyKind k, size_t cap, bool persist_state = true, LrfuParams p = {})
      : kind(k), capacity(cap), persist(persist_state), lrfu(p) {
    PolicyConfig cfg;
    cfg.kind = k;
    cfg.capacity_blocks = cap;
    cfg.lrfu = p;
    policy = make_policy(cfg);
  }
  void ref(uint64_t block, uint64_t step, uint64_t next_use, float attention = 1.0f) {
    Key key{0, block};
    NodeId id = store.find(key);
    if (id == kNoNode) id = store.insert(key, nullptr);
    if (store.id_limit() > reserved) {
      reserved = store.id_limit() * 2;
      policy->reserve_ids(reserved);
    }
    StoreEntry &e = store[id];
    ++tick;
    bool hit = e.res.tier >= 0;
    if (!hit && !persist) e.st = PolicyState{};
    e.st.score = lrfu_access(e.st.score, step - std::min(step, e.st.last_access), attention, lrfu);
    e.st.last_access = step;
    ++e.st.accesses;
    e.st.tick = tick;
    policy->set_next_use(id, next_use);
    if (hit) {
      ++hits;
      policy->access(id, e.st);
      return;
    }
    policy->before_admit(id, key);
    if (kind == PolicyKind::opt) {  // admit first, then evict (possibly the incoming block)
      policy->insert(id, key, e.st);
      e.res.tier = 0;
      if (policy->size() > capacity) evict(step);
    } else {
      if (policy->size() >= capacity) evict(step);
      policy->insert(id, key, e.st);
      e.res.tier = 0;
    }
  }
  void evict(uint64_t step) {
    NodeId v = policy->victim(step, Eligible::all());
    ASSERT_NE(v, kNoNode);
    policy->erase(v, EraseReason::evicted);
    store[v].res.tier = -1;
    evictions.push_back(store[v].key.lo);
  }
};

// --- The references ---------------------------------------------------------------------
struct RefLru {
  size_t cap;
  std::list<uint64_t> order;  // front = LRU
  std::unordered_map<uint64_t, std::list<uint64_t>::iterator> where;
  std::vector<uint64_t> evictions;
  uint64_t hits = 0;
  void ref(uint64_t b) {
    auto it = where.find(b);
    if (it != where.end()) {
      ++hits;
      order.erase(it->second);
    } else if (order.size() == cap) {
      evictions.push_back(order.front());
      where.erase(order.front());
      order.pop_front();
    }
    order.push_back(b);
    where[b] = std::prev(order.end());
  }
};

struct RefFifo {
  size_t cap;
  std::deque<uint64_t> q;
  std::set<uint64_t> in;
  std::vector<uint64_t> evictions;
  uint64_t hits = 0;
  void ref(uint64_t b) {
    if (in.count(b)) { ++hits; return; }
    if (q.size() == cap) {
      evictions.push_back(q.front());
      in.erase(q.front());
      q.pop_front();
    }
    q.push_back(b);
    in.insert(b);
  }
};

// LFU by full scan: fewest accesses, ties by least recent reference. Counts persist (or not).
struct RefLfu {
  size_t cap;
  bool persist;
  std::map<uint64_t, std::pair<uint64_t, uint64_t>> state;  // block -> (count, last tick)
  std::set<uint64_t> in;
  std::vector<uint64_t> evictions;
  uint64_t hits = 0, tick = 0;
  void ref(uint64_t b) {
    ++tick;
    if (in.count(b)) {
      ++hits;
    } else {
      if (!persist) state[b] = {0, 0};
      if (in.size() == cap) {
        uint64_t v = 0;
        bool first = true;
        for (uint64_t r : in)
          if (first || state[r] < state[v]) { v = r; first = false; }
        evictions.push_back(v);
        in.erase(v);
      }
      in.insert(b);
    }
    state[b].first += 1;
    state[b].second = tick;
  }
};

// Belady with the incoming block admitted first: evict the farthest next use (never: first).
struct RefOpt {
  size_t cap;
  std::map<uint64_t, uint64_t> next;  // resident block -> next use
  std::vector<uint64_t> evictions;
  uint64_t hits = 0;
  void ref(uint64_t b, uint64_t nu) {
    if (next.count(b)) { ++hits; next[b] = nu; return; }
    next[b] = nu;
    if (next.size() > cap) {
      uint64_t v = 0, far = 0;
      bool first = true;
      for (auto &[r, n] : next)
        if (first || n > far) { v = r; far = n; first = false; }
      evictions.push_back(v);
      next.erase(v);
    }
  }
};

// ARC, transcribed from Fig. 4 of Megiddo and Modha (FAST 2003).
struct RefArc {
  double c, p = 0;
  std::list<uint64_t> T1, T2, B1, B2;  // front = LRU
  std::vector<uint64_t> evictions;
  uint64_t hits = 0;
  static bool has(const std::list<uint64_t> &l, uint64_t x) { return std::find(l.begin(), l.end(), x) != l.end(); }
  void replace(bool x_in_b2) {
    double t1 = static_cast<double>(T1.size());
    if (!T1.empty() && (t1 > p || (x_in_b2 && t1 == p))) {
      uint64_t v = T1.front(); T1.pop_front(); B1.push_back(v); evictions.push_back(v);
    } else {
      uint64_t v = T2.front(); T2.pop_front(); B2.push_back(v); evictions.push_back(v);
    }
  }
  void ref(uint64_t x) {
    if (has(T1, x) || has(T2, x)) {  // Case I
      ++hits;
      T1.remove(x); T2.remove(x); T2.push_back(x);
      return;
    }
    double b1 = static_cast<double>(B1.size()), b2 = static_cast<double>(B2.size());
    if (has(B1, x)) {  // Case II
      p = std::min(c, p + (b1 >= b2 ? 1.0 : b2 / b1));
      replace(false);
      B1.remove(x); T2.push_back(x);
      return;
    }
    if (has(B2, x)) {  // Case III
      p = std::max(0.0, p - (b2 >= b1 ? 1.0 : b1 / b2));
      replace(true);
      B2.remove(x); T2.push_back(x);
      return;
    }
    double t1 = static_cast<double>(T1.size()), t2 = static_cast<double>(T2.size());
    if (t1 + b1 == c) {  // Case IV-A
      if (t1 < c) { B1.pop_front(); replace(false); }
      else { evictions.push_back(T1.front()); T1.pop_front(); }
    } else if (t1 + t2 + b1 + b2 >= c) {  // Case IV-B
      if (t1 + t2 + b1 + b2 == 2 * c) B2.pop_front();
      replace(false);
    }
    T1.push_back(x);
  }
};

// LRFU by full scan over a map (the same priority function, the same tie-break: recency order).
struct RefLrfu {
  size_t cap;
  LrfuParams p;
  bool persist;
  std::map<uint64_t, PolicyState> state;
  std::set<uint64_t> in;
  std::vector<uint64_t> evictions;
  uint64_t hits = 0;
  void ref(uint64_t b, uint64_t step) {
    PolicyState &s = state[b];
    bool hit = in.count(b) != 0;
    if (!hit && !persist) s = PolicyState{};
    s.score = lrfu_access(s.score, step - std::min(step, s.last_access), 1.0, p);
    s.last_access = step;
    if (hit) { ++hits; return; }
    if (in.size() == cap) {
      uint64_t v = 0;
      double vp = -1;
      bool first = true;
      for (uint64_t r : in) {
        const PolicyState &rs = state[r];
        double pr = lrfu_priority(rs.score, step - rs.last_access, p);
        const PolicyState &vs = state[v];
        bool better = first || pr > vp ||
                      (pr == vp && (p.beta == 0 && p.mode == ScoreMode::touch
                                        ? std::make_tuple(rs.score, rs.last_access, r) < std::make_tuple(vs.score, vs.last_access, v)
                                        : std::make_tuple(rs.last_access, rs.score, r) < std::make_tuple(vs.last_access, vs.score, v)));
        if (better) { v = r; vp = pr; first = false; }
      }
      evictions.push_back(v);
      in.erase(v);
    }
    in.insert(b);
  }
};

}  // namespace

class PolicyVsReference : public ::testing::TestWithParam<size_t> {};

TEST_P(PolicyVsReference, LruFifoLfuOptArc) {
  const size_t cap = GetParam();
  for (uint64_t seed : {1u, 2u, 3u}) {
    auto s = make_stream(seed, 20000, cap * 6);
    auto nu = next_uses(s);
    LibCache lru(PolicyKind::lru, cap), fifo(PolicyKind::fifo, cap), lfu(PolicyKind::lfu, cap),
        lfu_np(PolicyKind::lfu, cap, false), opt(PolicyKind::opt, cap), arc(PolicyKind::arc, cap);
    RefLru rlru{cap, {}, {}, {}};
    RefFifo rfifo{cap, {}, {}, {}};
    RefLfu rlfu{cap, true, {}, {}, {}};
    RefLfu rlfu_np{cap, false, {}, {}, {}};
    RefOpt ropt{cap, {}, {}};
    RefArc rarc{static_cast<double>(cap)};
    for (size_t i = 0; i < s.size(); ++i) {
      uint64_t step = i / 7;
      lru.ref(s[i], step, nu[i]); rlru.ref(s[i]);
      fifo.ref(s[i], step, nu[i]); rfifo.ref(s[i]);
      lfu.ref(s[i], step, nu[i]); rlfu.ref(s[i]);
      lfu_np.ref(s[i], step, nu[i]); rlfu_np.ref(s[i]);
      opt.ref(s[i], step, nu[i]); ropt.ref(s[i], nu[i]);
      arc.ref(s[i], step, nu[i]); rarc.ref(s[i]);
    }
    EXPECT_EQ(lru.hits, rlru.hits);
    EXPECT_EQ(lru.evictions, rlru.evictions) << "lru victims differ";
    EXPECT_EQ(fifo.hits, rfifo.hits);
    EXPECT_EQ(fifo.evictions, rfifo.evictions);
    EXPECT_EQ(lfu.hits, rlfu.hits);
    EXPECT_EQ(lfu.evictions, rlfu.evictions);
    EXPECT_EQ(lfu_np.hits, rlfu_np.hits);
    EXPECT_EQ(lfu_np.evictions, rlfu_np.evictions);
    EXPECT_EQ(opt.hits, ropt.hits);
    EXPECT_EQ(arc.hits, rarc.hits);
    EXPECT_EQ(arc.evictions, rarc.evictions) << "arc victims differ";
    // OPT bounds every other policy on the same stream.
    for (uint64_t h : {lru.hits, fifo.hits, lfu.hits, lfu_np.hits, arc.hits}) EXPECT_LE(h, opt.hits);
    for (auto *c : {&lru, &fifo, &lfu, &opt, &arc}) EXPECT_EQ(c->policy->validate(), "") << c->policy->name();
    if (cap > 1) {
      EXPECT_FALSE(lfu.hits == lfu_np.hits && lfu.evictions == lfu_np.evictions)
          << "keeping LFU counts across evictions should change something on this stream";
    }
  }
}

TEST_P(PolicyVsReference, LrfuEveryMode) {
  const size_t cap = GetParam();
  const LrfuParams params[] = {
      {0.05, 0.001, ScoreMode::touch}, {0.05, 0.0, ScoreMode::touch}, {0.3, 0.05, ScoreMode::decay},
      {0.05, 0.0, ScoreMode::decay},   {1.0, 0.01, ScoreMode::touch},
  };
  for (const LrfuParams &p : params) {
    for (bool persist : {true, false}) {
      auto s = make_stream(11, 12000, cap * 5);
      LibCache lib(PolicyKind::lrfu, cap, persist, p);
      RefLrfu ref{cap, p, persist, {}, {}, {}};
      for (size_t i = 0; i < s.size(); ++i) {
        uint64_t step = i / 5;
        lib.ref(s[i], step, 0);
        ref.ref(s[i], step);
      }
      EXPECT_EQ(lib.hits, ref.hits) << "alpha " << p.alpha << " beta " << p.beta << " persist " << persist;
      EXPECT_EQ(lib.evictions, ref.evictions);
      EXPECT_EQ(lib.policy->validate(), "");
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Capacities, PolicyVsReference, ::testing::Values(1, 2, 7, 64, 300));

TEST(Policies, PinnedBlocksAreNeverVictims) {
  for (PolicyKind k : {PolicyKind::lrfu, PolicyKind::lru, PolicyKind::fifo, PolicyKind::lfu, PolicyKind::arc, PolicyKind::opt}) {
    PolicyConfig cfg;
    cfg.kind = k;
    cfg.capacity_blocks = 64;
    auto pol = make_policy(cfg);
    pol->reserve_ids(64);
    std::vector<uint8_t> pinned(64, 0);
    for (NodeId i = 0; i < 64; ++i) {
      PolicyState st;
      st.score = 0.01 * (i % 10);
      st.last_access = i;
      st.tick = i;
      st.accesses = 1 + i % 3;
      pol->set_next_use(i, 1000 - i);
      pol->before_admit(i, Key{0, i});
      pol->insert(i, Key{0, i}, st);
      pinned[i] = (i % 3 == 0);
    }
    Eligible el{[](const void *ctx, NodeId id) noexcept { return !static_cast<const uint8_t *>(ctx)[id]; }, pinned.data()};
    std::set<NodeId> seen;
    for (int n = 0; n < 42; ++n) {
      NodeId v = pol->victim(100, el);
      ASSERT_NE(v, kNoNode) << policy_kind_name(k);
      EXPECT_FALSE(pinned[v]) << policy_kind_name(k);
      EXPECT_TRUE(seen.insert(v).second);
      pol->erase(v, EraseReason::evicted);
    }
    EXPECT_EQ(pol->victim(100, el), kNoNode) << policy_kind_name(k) << ": only pinned blocks remain";
    EXPECT_EQ(pol->size(), 22u);
  }
}

// OPT keeps the incoming block out when its next use is farther than the victim's (or neither
// is used again); the victim is the eligible resident block used farthest ahead.
TEST(Policies, OptBypassesTheIncomingBlockUsedFarthestAhead) {
  PolicyConfig cfg;
  cfg.kind = PolicyKind::opt;
  cfg.capacity_blocks = 2;
  auto pol = make_policy(cfg);
  pol->reserve_ids(8);
  PolicyState st;
  for (NodeId i = 0; i < 2; ++i) {
    st.tick = i + 1;
    pol->set_next_use(i, 10 * (i + 1));  // block 0 next at 10, block 1 at 20: block 1 is the victim
    pol->insert(i, Key{0, i}, st);
  }
  ASSERT_EQ(pol->victim(0, Eligible::all()), 1u);
  const NodeId in = 2;
  pol->set_next_use(in, 30);
  EXPECT_TRUE(pol->bypass(in, 0, Eligible::all()));
  pol->set_next_use(in, 15);
  EXPECT_FALSE(pol->bypass(in, 0, Eligible::all()));
  pol->set_next_use(in, 20);  // a tie: the resident block goes
  EXPECT_FALSE(pol->bypass(in, 0, Eligible::all()));
  // Only block 0 eligible: its next use (10) is nearer than 15.
  Eligible only0{[](const void *, NodeId id) noexcept { return id == 0; }, nullptr};
  pol->set_next_use(in, 15);
  EXPECT_TRUE(pol->bypass(in, 0, only0));
  Eligible none{[](const void *, NodeId) noexcept { return false; }, nullptr};
  EXPECT_FALSE(pol->bypass(in, 0, none)) << "no victim: the block is admitted (make_room decides)";
  // Neither used again: the incoming block goes.
  pol->set_next_use(1, UINT64_MAX);
  st.tick = 3;
  pol->access(1, st);
  pol->set_next_use(in, UINT64_MAX);
  EXPECT_TRUE(pol->bypass(in, 0, Eligible::all()));
  // The other policies never bypass.
  for (PolicyKind k : {PolicyKind::lrfu, PolicyKind::lru, PolicyKind::fifo, PolicyKind::lfu, PolicyKind::arc}) {
    cfg.kind = k;
    auto other = make_policy(cfg);
    other->reserve_ids(8);
    other->insert(0, Key{0, 0}, st);
    EXPECT_FALSE(other->bypass(in, 0, Eligible::all())) << policy_kind_name(k);
  }
}

TEST(Policies, Names) {
  EXPECT_EQ(parse_policy_kind("LRFU"), PolicyKind::lrfu);
  EXPECT_EQ(parse_policy_kind("arc"), PolicyKind::arc);
  EXPECT_FALSE(parse_policy_kind("lirs").has_value());
  EXPECT_STREQ(policy_kind_name(PolicyKind::opt), "opt");
}

// LRU, FIFO and LFU keep entries pushed in key order in a queue and the others in a heap. A
// block placed with an old recency (as a demotion does), ties in the key, pinned blocks and
// erasures exercise both orders and the merged walk. Every victim must be the least eligible
// live block by the policy's key, ties by id, as a full scan finds it.
TEST(Policies, QueuedAndHeapedEntriesGiveTheBruteForceVictim) {
  struct Live {
    uint64_t tick, accesses, arrival;
  };
  for (PolicyKind k : {PolicyKind::lru, PolicyKind::fifo, PolicyKind::lfu}) {
    for (uint64_t seed : {1u, 2u, 3u, 4u}) {
      std::mt19937_64 rng(seed * 7919 + static_cast<uint64_t>(k));
      constexpr NodeId kIds = 512;
      PolicyConfig cfg;
      cfg.kind = k;
      cfg.capacity_blocks = kIds;
      auto pol = make_policy(cfg);
      pol->reserve_ids(kIds);
      std::map<NodeId, Live> live;
      std::vector<uint8_t> pinned(kIds, 0);
      Eligible el{[](const void *ctx, NodeId id) noexcept { return !static_cast<const uint8_t *>(ctx)[id]; }, pinned.data()};
      uint64_t now = 1000, arrivals = 0;
      // Ticks from a narrow band make ties common; old ticks reach the heap.
      auto next_tick = [&]() -> uint64_t {
        switch (rng() % 4) {
          case 0: return now - rng() % 1000;  // an old recency
          case 1: return now;                 // a tie with the newest
          default: return ++now;
        }
      };
      size_t checked = 0;
      for (int op = 0; op < 40000; ++op) {
        const NodeId id = static_cast<NodeId>(rng() % kIds);
        const unsigned r = static_cast<unsigned>(rng() % 10);
        auto it = live.find(id);
        if (it == live.end() && r < 6) {
          Live l{next_tick(), 1 + rng() % 4, ++arrivals};
          PolicyState st;
          st.tick = l.tick;
          st.accesses = l.accesses;
          pol->insert(id, Key{0, id}, st);
          live[id] = l;
        } else if (it != live.end() && r < 6) {
          it->second.tick = next_tick();
          it->second.accesses += 1;
          PolicyState st;
          st.tick = it->second.tick;
          st.accesses = it->second.accesses;
          pol->access(id, st);
        } else if (it != live.end() && r < 7) {
          pol->erase(id, EraseReason::evicted);
          live.erase(it);
        } else if (r < 8) {
          pinned[id] = static_cast<uint8_t>(rng() % 3 == 0);
        } else {
          // Brute force: the least eligible live block by the policy's key, ties by id.
          NodeId want = kNoNode;
          std::tuple<uint64_t, uint64_t, NodeId> best{};
          for (const auto &[n, l] : live) {
            if (pinned[n]) continue;
            std::tuple<uint64_t, uint64_t, NodeId> key =
                k == PolicyKind::lru ? std::make_tuple(l.tick, uint64_t{0}, n)
                : k == PolicyKind::fifo ? std::make_tuple(l.arrival, uint64_t{0}, n)
                                        : std::make_tuple(l.accesses, l.tick, n);
            if (want == kNoNode || key < best) {
              want = n;
              best = key;
            }
          }
          ASSERT_EQ(pol->victim(now, el), want) << policy_kind_name(k) << " seed " << seed << " op " << op;
          ++checked;
          if (want != kNoNode && rng() % 2 == 0) {
            pol->erase(want, EraseReason::evicted);
            live.erase(want);
          }
        }
      }
      EXPECT_GT(checked, 3000u);
      EXPECT_EQ(pol->size(), live.size());
      EXPECT_EQ(pol->validate(), "") << policy_kind_name(k);
    }
  }
}
