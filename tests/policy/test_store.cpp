// SPDX-License-Identifier: Apache-2.0
// The score store: lookups, bounded forgetting in the documented order, checkpoints that
// round-trip, refuse every kind of damage without changing the store, and survive a writer
// killed at any moment.
#include "lib/store/score_store.hpp"

#include <cxltier/error.hpp>

#include "../common/files.hpp"
#include "../common/temp_dir.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <filesystem>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <fstream>
#include <random>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <unordered_map>
#include <thread>
#include <atomic>

using namespace cxltier;

namespace {

Key k(uint64_t i) { return key_from_sequence(i, i * 3); }

}  // namespace

TEST(ScoreStore, InsertFindEraseGrow) {
  ScoreStore s(StoreOptions{0, PolicyKind::lrfu, {}});
  std::unordered_map<uint64_t, NodeId> ids;
  for (uint64_t i = 0; i < 100000; ++i) ids[i] = s.insert(k(i), nullptr);
  EXPECT_EQ(s.size(), 100000u);
  for (uint64_t i = 0; i < 100000; ++i) ASSERT_EQ(s.find(k(i)), ids[i]);
  EXPECT_EQ(s.find(k(100000)), kNoNode);
  for (uint64_t i = 0; i < 100000; i += 3) s.erase(ids[i]);
  for (uint64_t i = 0; i < 100000; ++i) ASSERT_EQ(s.find(k(i)) == kNoNode, i % 3 == 0) << i;
  EXPECT_EQ(s.validate(), "");
  // Reused ids get a new generation, so old handles can be told apart.
  uint32_t old_gen = s[ids[0]].res.generation();
  NodeId again = s.insert(k(999999), nullptr);
  EXPECT_EQ(again, ids[99999 - 99999 % 3]);  // last freed id is reused first
  EXPECT_NE(s[again].res.generation(), old_gen);
}

// The runtime's LRFU indexes read scores where the entries are: on_entries_moved must name
// the entries' address at once, after every growth that moved them, and after a checkpoint swap.
TEST(ScoreStore, EntriesMovedNamesWhereTheEntriesAre) {
  ScoreStore s(StoreOptions{0, PolicyKind::lrfu, {}});
  const StoreEntry *told = reinterpret_cast<const StoreEntry *>(&s);  // anything but the answer
  size_t calls = 0;
  s.on_entries_moved([&](const StoreEntry *first) {
    told = first;
    ++calls;
  });
  EXPECT_EQ(calls, 1u);  // at once (the address of the room reserved, before any entry)
  for (uint64_t i = 0; i < 100000; ++i) {
    s.insert(k(i), nullptr);
    ASSERT_EQ(told, &s[0]) << "after insert " << i;
  }
  EXPECT_GE(calls, 2u);   // the entries left their first block at least once
  EXPECT_LT(calls, 64u);  // once per growth that moved them, not per insert
  LoadedCheckpoint cp;
  for (uint64_t i = 0; i < 1000; ++i) cp.states.emplace_back(k(i + 500000), PolicyState{0.5, i, 1, i});
  s.replace_with(cp);
  ASSERT_EQ(s.size(), 1000u);
  EXPECT_EQ(told, &s[0]);
  const size_t before = calls;
  for (uint64_t i = 0; i < 100000; ++i) {  // the listener survived the swap
    s.insert(k(i), nullptr);
    ASSERT_EQ(told, &s[0]) << "after the swap, insert " << i;
  }
  EXPECT_GT(calls, before);
}

// fixed_addresses: the entries never move, bounded store or unbounded, and handle_resident,
// read without a lock, says resident exactly for an issued id whose place word holds the
// handle's generation and a slot.
TEST(ScoreStore, FixedAddressesAndTheHandleCheck) {
  for (uint64_t capacity : {uint64_t{0}, uint64_t{5000}}) {
    StoreOptions opt{capacity, PolicyKind::lrfu, {}};
    opt.fixed_addresses = true;
    ScoreStore s(opt);
    size_t calls = 0;
    const StoreEntry *told = nullptr;
    s.on_entries_moved([&](const StoreEntry *first) {
      told = first;
      ++calls;
    });
    const NodeId first = s.insert(k(0), nullptr);
    const StoreEntry *const at = &s[first];
    for (uint64_t i = 1; i < 300000; ++i) {
      NodeId id = s.insert(k(i), nullptr);
      ASSERT_EQ(&s[0], at) << capacity << ": moved at insert " << i;
      (void)id;
    }
    EXPECT_EQ(calls, 1u) << capacity << ": told once, never moved";
    EXPECT_EQ(told, at);
    if (capacity) EXPECT_GE(s.room(), capacity);
    else EXPECT_GE(s.room(), size_t{1} << 20);
    const NodeId id = s.find(k(299999));
    ASSERT_NE(id, kNoNode);
    const uint64_t gen = s[id].res.generation();
    const uint64_t h = (gen << 32) | id;
    EXPECT_FALSE(s.handle_resident(h)) << "no slot: resident nowhere";
    s[id].res.set_slot(17);
    EXPECT_TRUE(s.handle_resident(h));
    EXPECT_FALSE(s.handle_resident(((gen + 1) << 32) | id)) << "another generation";
    EXPECT_FALSE(s.handle_resident((gen << 32) | (s.id_limit() + 3))) << "an id never issued";
    EXPECT_FALSE(s.handle_resident((gen << 32) | 0xffffffffu));
    s[id].res.set_slot(0xffffffffu);
    EXPECT_FALSE(s.handle_resident(h));
    s.erase(id);
    s[id].res.set_slot(17);  // the runtime never does this; the generation alone refuses it
    EXPECT_FALSE(s.handle_resident(h)) << "erased: its generation moved on";
    EXPECT_EQ(s[id].res.generation(), gen + 1);
    EXPECT_EQ(s[id].res.slot(), 17u);
  }
}

// Engine threads check handles while the runtime's thread grows the store and changes places:
// a reader without a lock sees every place word whole and never reads past the published ids.
// Block a is resident throughout and must be seen so every time; b moves between two slots
// (resident throughout too); c is made resident and not, and read either way (its answer may
// be either: it is there for ThreadSanitizer, which checks its reads and writes); d is made
// resident nowhere and erased, then its id is issued again to a new key made resident: once
// the reader has seen the erase, d's old handle must never pass again. The probe of ids at the
// growing end (generation 0) fails if the reader reads an entry before it is written: a page not
// yet written reads as slot 0, generation 0. (Under ThreadSanitizer, this also checks that the
// place word's writers and the check do not race.)
TEST(ScoreStore, TheHandleCheckReadsWhileTheStoreGrows) {
  StoreOptions opt{0, PolicyKind::lrfu, {}};
  opt.fixed_addresses = true;
  ScoreStore s(opt);
  const NodeId a = s.insert(k(0), nullptr), b = s.insert(k(1), nullptr), c = s.insert(k(2), nullptr),
               d = s.insert(k(3), nullptr);
  s[a].res.set_slot(1);
  s[b].res.set_slot(2);
  s[d].res.set_slot(4);
  auto handle = [&](NodeId id) { return (uint64_t{s[id].res.generation()} << 32) | id; };
  const uint64_t ha = handle(a), hb = handle(b), hc = handle(c), hd = handle(d);
  std::atomic<bool> done{false}, d_erased{false};
  std::atomic<uint64_t> misses{0}, reads{0}, stale_d{0};
  std::thread reader([&] {
    uint64_t far = 0;
    while (!done.load(std::memory_order_acquire)) {
      if (!s.handle_resident(ha)) misses.fetch_add(1);
      if (!s.handle_resident(hb)) misses.fetch_add(1);
      (void)s.handle_resident(hc);
      const bool erased = d_erased.load(std::memory_order_acquire);
      if (erased && s.handle_resident(hd)) stale_d.fetch_add(1);
      if (s.handle_resident(uint64_t{far++ % 400000})) misses.fetch_add(1);
      reads.fetch_add(1, std::memory_order_relaxed);
    }
  });
  for (uint64_t i = 4; i < 300000; ++i) {
    s.insert(k(i), nullptr);
    s[b].res.set_slot(i % 2 ? 2 : 3);
    s[c].res.set_slot(i % 3 ? 0xffffffffu : 5);
    if (i == 150000) {
      s[d].res.set_slot(0xffffffffu);
      s.erase(d);
      d_erased.store(true, std::memory_order_release);
      const NodeId again = s.insert(k(1u << 30), nullptr);  // the freed id, issued again
      EXPECT_EQ(again, d);
      s[again].res.set_slot(6);
      EXPECT_TRUE(s.handle_resident(handle(again)));
    }
  }
  // Keep going until the reader has read for a while, however the threads were scheduled.
  for (uint64_t i = 0; reads.load() < 100000 && i < 200000000; ++i) s[c].res.set_slot(i % 3 ? 0xffffffffu : 5);
  done.store(true, std::memory_order_release);
  reader.join();
  EXPECT_EQ(misses.load(), 0u);
  EXPECT_EQ(stale_d.load(), 0u);
  EXPECT_FALSE(s.handle_resident(hd));
  EXPECT_GE(reads.load(), 1u);
}

// current(id, generation), which the access path uses instead of reading in_use_, gives the
// state exactly when the id still holds the key it was handed out with, in use, under that
// generation: every (id, generation, key) ever handed out is checked after random inserts,
// erases, forgets (a bounded store that fills) and swaps in a checkpoint, which may shrink the
// id range before it grows again.
TEST(ScoreStore, CurrentNamesOnlyTheStateItsGenerationWasHandedOutWith) {
  for (uint64_t capacity : {uint64_t{0}, uint64_t{300}}) {
    ScoreStore s(StoreOptions{capacity, PolicyKind::lru, {}});
    std::mt19937_64 rng(17 + capacity);
    struct Issued {
      NodeId id;
      uint32_t generation;
      Key key;
    };
    std::vector<Issued> issued;
    std::vector<NodeId> live;
    uint64_t next_key = 0;
    size_t checked_current = 0, checked_stale = 0, swaps = 0;
    for (int op = 0; op < 30000; ++op) {
      const unsigned what = static_cast<unsigned>(rng() % 1000);
      if (what < 700 || live.empty()) {
        NodeId forgotten = kNoNode;
        const NodeId id = s.insert(k(next_key++), &forgotten);
        if (forgotten != kNoNode) live.erase(std::find(live.begin(), live.end(), forgotten));
        live.push_back(id);
        issued.push_back(Issued{id, s[id].res.generation(), s[id].key});
      } else if (what < 999) {
        const size_t at = rng() % live.size();
        s.erase(live[at]);
        live[at] = live.back();
        live.pop_back();
      } else {
        // A checkpoint of a few of the states swapped in: the id range shrinks, then grows
        // again past where it was.
        ++swaps;
        LoadedCheckpoint cp;
        for (size_t i = 0; i < live.size() && i < 20; ++i) cp.states.emplace_back(s[live[i]].key, s[live[i]].st);
        s.replace_with(cp);
        live.clear();
        s.for_each([&](NodeId id, const StoreEntry &e) {
          live.push_back(id);
          issued.push_back(Issued{id, e.res.generation(), e.key});
        });
      }
      if (op % 97 != 0) continue;
      for (const Issued &h : issued) {
        const bool now = s.valid(h.id) && s[h.id].res.generation() == h.generation && s[h.id].key == h.key;
        const StoreEntry *e = s.current(h.id, h.generation);
        ASSERT_EQ(e != nullptr, now) << "id " << h.id << " generation " << h.generation << " at op " << op;
        if (e) {
          ASSERT_EQ(e, &s[h.id]);
        }
        ++(now ? checked_current : checked_stale);
      }
    }
    EXPECT_GT(checked_current, 1000u);
    EXPECT_GT(checked_stale, 1000u);
    EXPECT_GT(swaps, 10u);
    if (capacity) {
      EXPECT_GT(s.forgotten_total(), 100u) << "the bounded store must fill and forget";
    }
    EXPECT_EQ(s.validate(), "");
  }
}

TEST(ScoreStore, ForgetsLowestScoreNonResidentFirst) {
  ScoreStore s(StoreOptions{4, PolicyKind::lrfu, {}});
  NodeId a = s.insert(k(1), nullptr), b = s.insert(k(2), nullptr), c = s.insert(k(3), nullptr),
         d = s.insert(k(4), nullptr);
  auto set = [&](NodeId id, double score, uint64_t t, bool resident) {
    s[id].st.score = score;
    s[id].st.last_access = t;
    s.set_resident(id, true);  // re-key: leave and re-enter the forget order
    s[id].res.tier = resident ? 0 : -1;
    if (!resident) s.set_resident(id, false);
  };
  set(a, 0.30, 5, false);
  set(b, 0.10, 9, true);   // lowest score but resident: never forgotten
  set(c, 0.20, 7, false);
  set(d, 0.20, 3, false);  // ties with c on score, older: forgotten before c
  NodeId forgotten = kNoNode;
  NodeId e = s.insert(k(5), &forgotten);
  EXPECT_EQ(forgotten, d);
  EXPECT_EQ(e, d);
  EXPECT_EQ(s.find(k(4)), kNoNode);
  set(e, 0.9, 10, true);
  s.insert(k(6), &forgotten);
  EXPECT_EQ(forgotten, c);
  EXPECT_EQ(s.forgotten_total(), 2u);
  EXPECT_EQ(s.validate(), "");
  // Full of resident states: a clear error, nothing changed.
  ScoreStore full(StoreOptions{2, PolicyKind::lrfu, {}});
  for (int i = 0; i < 2; ++i) {
    NodeId id = full.insert(k(100 + i), nullptr);
    full[id].res.tier = 0;
    full.set_resident(id, true);
  }
  try {
    full.insert(k(200), nullptr);
    FAIL() << "insert into a store full of resident states succeeded";
  } catch (const Error &err) {
    EXPECT_NE(std::string(err.what()).find("store.capacity"), std::string::npos);
  }
  EXPECT_EQ(full.size(), 2u);
}

TEST(ScoreStore, ForgetOrderLfuAndDecay) {
  ScoreStore lfu(StoreOptions{2, PolicyKind::lfu, {}});
  NodeId a = lfu.insert(k(1), nullptr), b = lfu.insert(k(2), nullptr);
  lfu.set_resident(a, true); lfu[a].st.accesses = 9; lfu.set_resident(a, false);
  lfu.set_resident(b, true); lfu[b].st.accesses = 2; lfu.set_resident(b, false);
  NodeId f = kNoNode;
  lfu.insert(k(3), &f);
  EXPECT_EQ(f, b);
  // Decay mode: 0.5 accessed at step 0 is lower now than 0.3 accessed at step 20 (alpha 0.05).
  LrfuParams dp;
  dp.mode = ScoreMode::decay;
  ScoreStore dec(StoreOptions{2, PolicyKind::lrfu, dp});
  NodeId x = dec.insert(k(1), nullptr), y = dec.insert(k(2), nullptr);
  dec.set_resident(x, true); dec[x].st = PolicyState{0.5, 0, 1, 1}; dec.set_resident(x, false);
  dec.set_resident(y, true); dec[y].st = PolicyState{0.3, 20, 1, 2}; dec.set_resident(y, false);
  dec.insert(k(3), &f);
  EXPECT_EQ(f, x);  // 0.5 * 0.95^20 = 0.179 < 0.3
}

// The forget heap against a full scan: random inserts into a full store, states re-keyed,
// made resident and not, changed in place and restated, erased, with scores, steps and counts
// drawn from a few values each so that most comparisons tie down to the key (and scores some
// trillionths apart: one float, as the heap keeps them, but different doubles). Every state
// forgotten must be the one a scan of the non-resident states puts first in the documented
// order.
TEST(ScoreStore, ForgetOrderMatchesAFullScanUnderTies) {
  struct Kind {
    PolicyKind by;
    ScoreMode mode;
  };
  const Kind kinds[] = {{PolicyKind::lrfu, ScoreMode::touch}, {PolicyKind::lrfu, ScoreMode::decay},
                        {PolicyKind::lfu, ScoreMode::touch}, {PolicyKind::lru, ScoreMode::touch}};
  for (const Kind &kind : kinds) {
    LrfuParams params;
    params.mode = kind.mode;
    constexpr uint64_t kCapacity = 48;
    ScoreStore s(StoreOptions{kCapacity, kind.by, params});
    std::mt19937_64 rng(static_cast<uint64_t>(kind.by) * 10 + static_cast<uint64_t>(kind.mode));
    // What the order compares, as the header documents it.
    auto value = [&](const PolicyState &st) {
      switch (kind.by) {
        case PolicyKind::lrfu:
          if (kind.mode == ScoreMode::decay)
            return st.score > 0 ? std::log(st.score) - static_cast<double>(st.last_access) * std::log1p(-params.alpha)
                                : -std::numeric_limits<double>::infinity();
          return st.score;
        case PolicyKind::lfu: return static_cast<double>(st.accesses);
        default: return static_cast<double>(st.tick);
      }
    };
    auto first = [&]() {
      NodeId best = kNoNode;
      s.for_each([&](NodeId id, const StoreEntry &e) {
        if (e.res.tier >= 0) return;
        if (best == kNoNode) {
          best = id;
          return;
        }
        const StoreEntry &b = s[best];
        const double va = value(e.st), vb = value(b.st);
        if (va != vb ? va < vb : e.st.last_access != b.st.last_access ? e.st.last_access < b.st.last_access : e.key < b.key)
          best = id;
      });
      return best;
    };
    std::vector<NodeId> ids;
    uint64_t next_key = 1, forgets = 0, restates = 0;
    for (int round = 0; round < 20000; ++round) {
      const unsigned op = static_cast<unsigned>(rng() % 10);
      if (op < 4 || ids.empty()) {  // insert; into a full store, one state is forgotten
        const NodeId expect = s.size() >= kCapacity ? first() : kNoNode;
        if (s.size() >= kCapacity && expect == kNoNode) continue;  // full of resident states
        NodeId forgotten = kNoNode;
        // Keys from a small space too: many share their high word.
        const NodeId id = s.insert(Key{rng() % 3, next_key++}, &forgotten);
        ASSERT_EQ(forgotten, expect) << "round " << round;
        if (forgotten != kNoNode) {
          ++forgets;
          std::erase(ids, forgotten);
        }
        ids.push_back(id);
      } else {
        const NodeId id = ids[rng() % ids.size()];
        StoreEntry &e = s[id];
        if (op < 8) {  // a new state, resident or not (re-keyed: out of the order, then back)
          s.set_resident(id, true);
          e.st.score = static_cast<double>(rng() % 4) / 4.0 + static_cast<double>(rng() % 3) * 1e-12;
          e.st.last_access = rng() % 3;
          e.st.accesses = rng() % 3;
          e.st.tick = rng() % 5;
          e.res.tier = rng() % 3 == 0 ? 0 : -1;
          if (e.res.tier < 0) s.set_resident(id, false);
        } else if (op == 8 && e.res.tier < 0) {  // erase a non-resident state
          s.erase(id);
          std::erase(ids, id);
        } else if (e.res.tier < 0) {  // a new state in place, in the order: restate moves it
          e.st.score = static_cast<double>(rng() % 4) / 4.0 + static_cast<double>(rng() % 3) * 1e-12;
          e.st.last_access = rng() % 3;
          e.st.accesses = rng() % 3;
          e.st.tick = rng() % 5;
          s.restate(id);
          ++restates;
        }
      }
      if (round % 512 == 0) {
        ASSERT_EQ(s.validate(), "") << "round " << round;
      }
    }
    EXPECT_GT(forgets, 2000u);
    EXPECT_GT(restates, 500u);
    EXPECT_EQ(s.validate(), "");
  }
}

TEST(ScoreStore, CheckpointRoundTrip) {
  const cxlt_test::TempDir tmp("store");
  const std::string dir = tmp.path().string(), path = dir + "/scores.cxlt";
  ScoreStore s(StoreOptions{0, PolicyKind::lrfu, {}});
  std::mt19937_64 rng(3);
  for (uint64_t i = 0; i < 10000; ++i) {
    NodeId id = s.insert(k(i), nullptr);
    s[id].st = PolicyState{static_cast<double>(rng() % 1000) / 1000.0, rng() % 5000, rng() % 50, i};
  }
  CheckpointMeta meta{4242, 9999, 0.05, 0.001, ScoreMode::touch};
  s.save(path, meta);
  struct stat st {};
  ASSERT_EQ(stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u) << "checkpoints are owner-only";
  LoadedCheckpoint cp = ScoreStore::load(path);
  EXPECT_EQ(cp.meta.current_step, 4242u);
  EXPECT_EQ(cp.meta.current_tick, 9999u);
  ASSERT_EQ(cp.states.size(), 10000u);
  ScoreStore t(StoreOptions{0, PolicyKind::lrfu, {}});
  t.replace_with(cp);
  s.for_each([&](NodeId, const StoreEntry &e) {
    NodeId id = t.find(e.key);
    ASSERT_NE(id, kNoNode);
    EXPECT_EQ(t[id].st.score, e.st.score);
    EXPECT_EQ(t[id].st.last_access, e.st.last_access);
    EXPECT_EQ(t[id].st.accesses, e.st.accesses);
    EXPECT_EQ(t[id].res.tier, -1);
  });
  EXPECT_EQ(t.validate(), "");
  // A bounded store smaller than the checkpoint refuses it whole.
  ScoreStore small(StoreOptions{100, PolicyKind::lrfu, {}});
  NodeId keep = small.insert(k(777777), nullptr);
  EXPECT_THROW(small.replace_with(cp), Error);
  EXPECT_EQ(small.find(k(777777)), keep);
}

TEST(ScoreStore, DamagedFilesAreRefusedAndNothingIsLoaded) {
  const cxlt_test::TempDir tmp("store");
  const std::string dir = tmp.path().string(), path = dir + "/scores.cxlt";
  ScoreStore s(StoreOptions{0, PolicyKind::lrfu, {}});
  for (uint64_t i = 0; i < 5000; ++i) {
    NodeId id = s.insert(k(i), nullptr);
    s[id].st.score = 0.25;
  }
  s.save(path, CheckpointMeta{});
  const std::string good = cxlt_test::read_file(path);
  auto expect_refused = [&](const std::string &bytes, cxlt_result_t code, const char *what) {
    std::string p = dir + "/bad.cxlt";
    cxlt_test::write_file(p, bytes);
    try {
      (void)ScoreStore::load(p);
      ADD_FAILURE() << what << ": accepted";
    } catch (const Error &e) {
      EXPECT_EQ(e.code(), code) << what << ": " << e.what();
      EXPECT_NE(std::string(e.what()).find(p), std::string::npos) << "message names the file: " << e.what();
    }
  };
  // Truncated at many lengths (including inside the header and the footer).
  for (size_t len : {size_t(0), size_t(4), size_t(63), size_t(64), size_t(100), good.size() / 2, good.size() - 33,
                     good.size() - 1})
    expect_refused(good.substr(0, len), CXLT_ERROR_CORRUPT, "truncated");
  // One flipped bit anywhere.
  std::mt19937_64 rng(5);
  for (int i = 0; i < 200; ++i) {
    std::string bad = good;
    size_t at = rng() % bad.size();
    bad[at] = static_cast<char>(bad[at] ^ (1 << (rng() % 8)));
    expect_refused(bad, CXLT_ERROR_CORRUPT, "bit flip");
  }
  expect_refused(good + "x", CXLT_ERROR_CORRUPT, "trailing byte");
  expect_refused(std::string("PK\x03\x04 this is a zip file, not ours"), CXLT_ERROR_CORRUPT, "foreign");
  std::string newer = good;
  newer[8] = 2;
  expect_refused(newer, CXLT_ERROR_CORRUPT, "newer version");
  // Missing file and a planted symbolic link.
  EXPECT_THROW((void)ScoreStore::load(dir + "/missing.cxlt"), Error);
  std::string link = dir + "/link.cxlt";
  ASSERT_EQ(symlink(path.c_str(), link.c_str()), 0);
  try {
    (void)ScoreStore::load(link);
    ADD_FAILURE() << "loaded through a symbolic link";
  } catch (const Error &e) {
    EXPECT_NE(std::string(e.what()).find("symbolic link"), std::string::npos);
  }
  EXPECT_THROW(s.save(link, CheckpointMeta{}), Error);
  EXPECT_EQ(cxlt_test::read_file(path), good) << "the link target was not written";
}

// A child process writes checkpoints in a loop (each one self-consistent: every state's
// accesses equals the generation it was written in); the parent kills it with SIGKILL at
// random moments and then reopens: the file must always load, whole, as one generation.
TEST(ScoreStore, SurvivesKillDuringCheckpoint) {
  const cxlt_test::TempDir tmp("store");
  const std::string dir = tmp.path().string(), path = dir + "/scores.cxlt";
  {
    ScoreStore s(StoreOptions{0, PolicyKind::lrfu, {}});
    for (uint64_t i = 0; i < 3000; ++i) s[s.insert(k(i), nullptr)].st.accesses = 0;
    s.save(path, CheckpointMeta{0, 0, 0.05, 0.001, ScoreMode::touch});
  }
  std::mt19937_64 rng(42);
  int kills = 0;
  uint64_t last_gen = 0;
  // Kill 1-41 ms after the fork, plus a wait that doubles while no checkpoint has completed yet
  // (a loaded or instrumented host may need longer than that for the child's first one).
  useconds_t wait_for_first = 0;
  for (int round = 0; round < 60; ++round) {
    pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      LoadedCheckpoint cp = ScoreStore::load(path);
      ScoreStore s(StoreOptions{0, PolicyKind::lrfu, {}});
      s.replace_with(cp);
      uint64_t gen = cp.meta.current_step;
      for (;;) {
        ++gen;
        std::vector<NodeId> ids;
        s.for_each([&](NodeId id, const StoreEntry &) { ids.push_back(id); });
        for (NodeId id : ids) s[id].st.accesses = gen;
        NodeId extra = s.insert(k(100000 + gen), nullptr);  // the size changes too
        s[extra].st.accesses = gen;
        s.save(path, CheckpointMeta{gen, gen, 0.05, 0.001, ScoreMode::touch});
      }
    }
    usleep(static_cast<useconds_t>(1000 + rng() % 40000) + wait_for_first);
    kill(pid, SIGKILL);
    int status = 0;
    waitpid(pid, &status, 0);
    ++kills;
    LoadedCheckpoint cp;
    ASSERT_NO_THROW(cp = ScoreStore::load(path)) << "round " << round;
    uint64_t gen = cp.meta.current_step;
    EXPECT_GE(gen, last_gen);
    last_gen = gen;
    wait_for_first = gen > 0 ? 0 : std::min<useconds_t>(2000000, wait_for_first ? 2 * wait_for_first : 20000);
    EXPECT_EQ(cp.states.size(), 3000u + gen);
    for (const auto &[key, st] : cp.states) ASSERT_EQ(st.accesses, gen) << "a state from another generation";
  }
  EXPECT_EQ(kills, 60);
  EXPECT_GT(last_gen, 0u) << "the writer never completed a checkpoint";
  // Temporary files of dead writers are cleaned up at the next load.
  (void)ScoreStore::load(path);
  int temps = 0;
  for (const auto &e : std::filesystem::directory_iterator(tmp.path()))
    if (e.path().filename().string().find("tmp") != std::string::npos) ++temps;
  EXPECT_EQ(temps, 0);
}

// The runtime's LRFU indexes keep each id's stamp in its entry (lrfu_id_records.hpp): a heap may
// still hold an entry made before the id was erased or forgotten, so the stamp must outlive the
// key, whatever the new key's state, while generation and state start afresh.
TEST(ScoreStore, PolicyStampOutlivesTheKey) {
  ScoreStore s(StoreOptions{4, PolicyKind::lrfu, {}});
  NodeId ids[4];
  for (uint64_t i = 0; i < 4; ++i) {
    ids[i] = s.insert(k(i), nullptr);
    EXPECT_EQ(s[ids[i]].res.policy_stamp, 0u);  // a fresh entry's is zero
    s[ids[i]].res.policy_stamp = 100 + static_cast<uint32_t>(i);
    s[ids[i]].st = PolicyState{0.1 * static_cast<double>(i + 1), i + 1, 1, i + 1};
    s.restate(ids[i]);
  }
  // Erased, then reused for another key.
  const uint32_t gen = s[ids[2]].res.generation();
  s.erase(ids[2]);
  const NodeId again = s.insert(k(10), nullptr);
  ASSERT_EQ(again, ids[2]);
  EXPECT_EQ(s[again].res.policy_stamp, 102u);
  EXPECT_NE(s[again].res.generation(), gen);
  EXPECT_EQ(s[again].st.score, 0.0);
  // Forgotten (the store is full), and the id reused.
  NodeId forgotten = kNoNode;
  const NodeId reused = s.insert(k(11), &forgotten);
  ASSERT_NE(forgotten, kNoNode);
  EXPECT_EQ(reused, forgotten);
  EXPECT_EQ(s[reused].res.policy_stamp, 100u + static_cast<uint32_t>(std::find(ids, ids + 4, reused) - ids));
  EXPECT_EQ(s[reused].st.tick, 0u);
  EXPECT_EQ(s.validate(), "");
}
