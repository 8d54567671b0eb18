// SPDX-License-Identifier: Apache-2.0
// The move protocol under racing calls: a block an engine pins while move() makes room for it
// never moves, an engine's unpin never cancels move()'s own pin, admit(pin) after waiting for a
// move finds its key again, a block another call holds or took out of its index is neither
// moved nor released under it, pin counts neither wrap nor lose an admission's pin, and a huge
// checkpoint interval never checkpoints every step.
//
// How the interleavings are made: copies into an emulated tier with pace_mib_s take
// block_bytes / pace seconds (0.6 s here), so a move is reliably in flight while another
// thread calls in; wait_idle(0) returning false tells the test a move is in flight (in a
// synchronous runtime, the drop counter: see sync_config), and a remote-tier double holds a
// fetch at a gate (remote_doubles.hpp). Nothing
// is timed: a slow machine can only make a test miss the window (it then passes without
// having proved anything, and says so), never fail a correct runtime. Scenarios that crash a
// buggy runtime (an internal assertion aborts) run in a forked child (EXPECT_EXIT), so a
// crash is a test failure, not the end of the binary.
#include "../common/temp_dir.hpp"
#include "../common/thrown.hpp"
#include "lib/runtime/test_access.hpp"
#include "remote_doubles.hpp"
#include "runtime_test_util.hpp"

#include <cxltier/error.hpp>
#include <cxltier/runtime.hpp>

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <initializer_list>
#include <memory>
#include <string>
#include <thread>

#include <sys/stat.h>

using namespace cxltier;
using cxlt_test::three_tier_config;

namespace {

// 32 KiB blocks into a tier paced at 0.05 MiB/s: 0.625 s per copy.
constexpr double kSlowMiBs = 0.05;

Key K(uint64_t i) { return key_from_sequence(4242, i); }

// Three emulated tiers; copies into tier 1 (pace1) and tier 2 (pace2) are slow. No background
// demotion (watermarks at 1.0) and no promotion, so the only moves are the ones a test makes.
RuntimeConfig quiet_config(uint32_t a, uint32_t b, uint32_t c, bool pace1, bool pace2) {
  RuntimeConfig cfg = three_tier_config(a, b, c);
  if (pace1) cfg.set("tiers.1.pace_mib_s", std::to_string(kSlowMiBs));
  if (pace2) cfg.set("tiers.2.pace_mib_s", std::to_string(kSlowMiBs));
  cfg.high_watermark = 1.0;
  cfg.low_watermark = 1.0;
  cfg.promotion = PromotionRule::never;
  cfg.migration_threads = 1;
  return cfg;
}

// Spin until some move is in flight (true). After a generous bound give up (false): `other`
// (the thread making the move) is joined, the window was missed, and the scenario proves
// nothing; the caller then passes with the note printed here.
bool wait_for_move_in_flight(Runtime &rt, std::thread &other) {
  auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (rt.wait_idle(0)) {
    if (std::chrono::steady_clock::now() > give_up) {
      other.join();
      std::fprintf(stderr, "note: the window was missed; nothing proved\n");
      return false;
    }
    std::this_thread::yield();
  }
  return true;
}

std::string where(const Block &b) {
  return "tier " + std::to_string(b.tier) + " at " + std::to_string(reinterpret_cast<uintptr_t>(b.data));
}

// Runs a scenario in a forked child: exit 0 when it returns "", 1 with the message otherwise; a
// crash (abort) is reported by EXPECT_EXIT with the child's stderr.
[[noreturn]] void child(std::string (*scenario)()) {
  std::string why;
  try {
    why = scenario();
  } catch (const std::exception &e) {
    why = std::string("unexpected exception: ") + e.what();
  }
  if (!why.empty()) std::fprintf(stderr, "%s\n", why.c_str());
  std::fflush(stderr);
  std::_Exit(why.empty() ? 0 : 1);
}

// --- A block the engine pins while move() makes room for it does not move --------------------
// The defect this catches:
// Runtime::move (access.cpp) does ++pins, make_room (which releases the lock while a demotion
// copies), --pins, and then begins the move, asserting pins == 0. An engine that pins the block
// in that window gets a pin that move() ignores: the move starts on a pinned block, and
// begin_move's assertion aborts the process (CXLT_DEBUG_LEVEL >= 1; without it the pinned
// block's bytes are freed under the engine).
std::string move_vs_pin() {
  auto rt = Runtime::open(quiet_config(2, 2, 4, /*pace1=*/true, false));
  rt->admit(K(0));
  rt->admit(K(1));
  Block k = rt->admit(K(2));
  if (k.tier != 1) return "set-up: K(2) landed in tier " + std::to_string(k.tier);
  // Tier 0 is full: move() pins K(2), demotes tier 0's victim into (slow) tier 1, then moves.
  // Once the engine pinned K(2), BUSY is the right answer.
  std::thread mover([&] {
    try {
      rt->move(K(2), 0, true);
    } catch (const Error &) {
    }
  });
  if (!wait_for_move_in_flight(*rt, mover)) return "";
  Block pinned = rt->pin(K(2));  // the engine pins it while move() is making room
  mover.join();
  Block now;
  if (!rt->lookup(K(2), &now)) return "K(2) is resident nowhere after the move";
  if (now.data != pinned.data || now.tier != pinned.tier)
    return "a pinned block moved: pinned at " + where(pinned) + ", now at " + where(now);
  rt->unpin(K(2));
  rt->wait_idle(-1);
  std::string v = rt->validate();
  return v.empty() ? "" : "validate: " + v;
}

// --- An engine's unpin of a block it never pinned fails even while move() holds its own pin ----
// The defect this catches:
// unpin() of a block the engine never pinned must be INVALID_ARGUMENT. While move() holds its
// internal pin it succeeds instead; move()'s own --pins then wraps the uint16 count to 65535
// and begin_move's assertion aborts (or the block stays pinned forever).
std::string move_vs_stray_unpin() {
  auto rt = Runtime::open(quiet_config(2, 2, 4, /*pace1=*/true, false));
  rt->admit(K(0));
  rt->admit(K(1));
  rt->admit(K(2));
  std::thread mover([&] {
    try {
      rt->move(K(2), 0, true);
    } catch (const Error &) {
    }
  });
  if (!wait_for_move_in_flight(*rt, mover)) return "";
  std::string why;
  try {
    rt->unpin(K(2));  // never pinned by us
    why = "unpin of a block the engine never pinned succeeded (it removed move()'s internal pin)";
  } catch (const Error &e) {
    if (e.code() != CXLT_ERROR_INVALID_ARGUMENT) why = std::string("unpin: unexpected error ") + e.what();
  }
  mover.join();
  rt->wait_idle(-1);
  if (!why.empty()) return why;
  std::string v = rt->validate();
  return v.empty() ? "" : "validate: " + v;
}

// --- admit(pin = true) finds its key again after waiting for a move --------------------------
// The defect this catches:
// Runtime::admit waits `while (store[id].flags & kFlagMoving)` and then pins if store[id] is
// resident, else falls through to admit it, without finding the key again, looking at
// kFlagAdmitting, or refreshing its StoreEntry& `e`. While it waited, another thread may have
// released the block and let the store reuse its id for another key, begun re-admitting it
// (kFlagAdmitting, lock released: both threads then place it), or grown the store's entry
// array. The thread that finished the move holds the CPU and usually wins the lock, so the
// windows below are hit in most runs.

// 2b: the block is released and the store, full, forgets its state and gives its NodeId to a
// new key; admit(K, pin) then pins and returns the new key's block as K's.
std::string admit_pin_vs_forget_and_reuse() {
  RuntimeConfig cfg = quiet_config(2, 2, 2, false, true);
  cfg.store_capacity = 6;  // exactly the slots: a full store forgets at once
  auto rt = Runtime::open(cfg);
  rt->admit(K(0));
  for (uint64_t i = 1; i <= 5; ++i) rt->admit(K(i));  // every tier full, the store full
  for (uint64_t i = 1; i <= 5; ++i) {                  // the fillers score above K(0)
    float a = 1.0f;
    Key k = K(i);
    rt->access(&k, &a, 1);
  }
  const Key k2 = K(100);
  std::thread mover([&] {
    try {
      rt->move(K(0), 2, true);  // drops a filler from tier 2 (no copy), then copies K(0) (slow)
      rt->release(K(0), /*forget=*/true);  // at once
      rt->admit(k2);                       // the store forgets K(0) and reuses its id
    } catch (const Error &e) {
      // The admit pinned it first (before the move, when wait_for_move_in_flight took a mover
      // pass for the move: the window missed, nothing proved; or after it): fine.
      if (e.code() != CXLT_ERROR_BUSY) throw;
    }
  });
  if (!wait_for_move_in_flight(*rt, mover)) return "";
  bool placed = false;
  Block b = rt->admit(K(0), &placed, /*pin=*/true);
  mover.join();
  rt->wait_idle(-1);
  Block mine, other;
  bool have_mine = rt->lookup(K(0), &mine);
  bool have_other = rt->lookup(k2, &other);
  if (have_other && other.data == b.data)
    return "admit(K(0), pin) returned (and pinned) the block of another key, " + k2.hex() + ", at " + where(b);
  if (!have_mine) return "admit(K(0), pin) returned but K(0) is resident nowhere";
  if (mine.data != b.data) return "admit(K(0), pin) returned " + where(b) + " but K(0) is at " + where(mine);
  std::string v = rt->validate();
  return v.empty() ? "" : "validate: " + v;
}

// 2c: store.capacity = 0 (unbounded): the store's entry vector grows, and admit(pin) keeps a
// StoreEntry& across the wait. When the block was released meanwhile and one admission grew
// the vector, the fall-through writes last_access, tick and kFlagAdmitting into the freed old
// array (heap use after free; AddressSanitizer reports it). Seen without sanitizers: the
// re-admission does not record its step as the block's last access.
std::string admit_pin_vs_store_growth() {
  RuntimeConfig cfg = quiet_config(2, 2, 2, false, true);
  cfg.store_capacity = 0;
  auto rt = Runtime::open(cfg);
  // Fill the store to exactly 1024 states (what an unbounded store reserves at first), so the
  // next new key reallocates its entry array.
  for (uint64_t i = 1; i < 1024; ++i) {
    rt->admit(K(i));
    rt->release(K(i), /*forget=*/true);
  }
  rt->admit(K(0));  // the 1024th state, in tier 0
  std::thread mover([&] {
    try {
      rt->move(K(0), 2, true);             // slow: the admit below waits for it
      rt->step();                          // so that "now" differs from K(0)'s last access
      rt->release(K(0), /*forget=*/true);  // K(0) resident nowhere: the admit falls through
      rt->admit(K(5000));                  // the 1025th state: the entry array moves
    } catch (const Error &e) {
      if (e.code() != CXLT_ERROR_BUSY) throw;  // the admit pinned it first: fine
    }
  });
  if (!wait_for_move_in_flight(*rt, mover)) return "";
  bool placed = false;
  rt->admit(K(0), &placed, /*pin=*/true);
  mover.join();
  rt->wait_idle(-1);
  if (placed) {  // re-admitted after the release: the admission is its last reference
    cxlt_policy_state_t st{};
    if (!rt->policy_state(K(0), &st)) return "K(0) has no state after its admission";
    if (st.last_access_step != rt->current_step())
      return "re-admission at step " + std::to_string(rt->current_step()) + " left last_access_step at " +
             std::to_string(st.last_access_step) + " (written through a dangling StoreEntry&)";
  }
  rt->unpin(K(0));
  std::string v = rt->validate();
  return v.empty() ? "" : "validate: " + v;
}

// --- Racing calls that take another call's block out of the victim search ---------------------
// Synchronous runtimes (copies in the calling thread, the lock released meanwhile), copies into
// tier 2 paced (0.625 s each, queued on one link), three tiers of 4 blocks filled in order:
// K(0..3) in tier 0, K(4..7) in tier 1, K(8..11) in tier 2. Each drop (a tier-2 victim leaving
// the tiers, under the lock) comes right before the copy into tier 2 that its room is for:
// stats().drops rising tells the test that a call is in that copy, the lock released.
RuntimeConfig sync_config(PromotionRule promotion) {
  RuntimeConfig cfg = quiet_config(4, 4, 4, false, /*pace2=*/true);
  cfg.synchronous = true;
  cfg.promotion = promotion;
  return cfg;
}

// Poll until `ready` holds (true), for at most `seconds` (false).
template <class Pred>
bool poll_until(Pred ready, double seconds = 5.0) {
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (!ready()) {
    if (std::chrono::steady_clock::now() > give_up) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return true;
}

uint64_t drops(Runtime &rt) { return rt.stats(false).drops; }

std::string fill_twelve(Runtime &rt) {
  for (uint64_t i = 0; i < 12; ++i) rt.admit(K(i));
  for (uint64_t i = 0; i < 12; ++i) {
    Block b;
    if (!rt.lookup(K(i), &b) || b.tier != static_cast<int>(i / 4))
      return "set-up: K(" + std::to_string(i) + ") is not in tier " + std::to_string(i / 4);
  }
  return "";
}

void hot(Runtime &rt, std::initializer_list<Key> keys) {
  for (const Key &k : keys) {
    const float a = 0.9f;
    rt.access(&k, &a, 1);
  }
}

// --- A synchronous promotion re-checks the faster tier's victim after making room ----------------
// The defect this catches:
// promote_sync (migration.cpp) picks the faster tier's victim v, makes room for it one tier
// down (make_room: the lock released while a demotion copies), and then moved v if it was still
// unpinned and not moving. Meanwhile admit_batch's make_room_for_batch may have picked v too
// (kFlagHeld | kFlagUnindexed: out of its tier's index); move_now(v) then erases it from an
// index it is not in, and LrfuIndex::erase's assertion aborts the process.
std::string promote_vs_batch_room() {
  auto rt = Runtime::open(sync_config(PromotionRule::always));
  if (std::string e = fill_twelve(*rt); !e.empty()) return e;
  hot(*rt, {K(1), K(2), K(3)});  // K(0) is tier 0's victim
  // P: K(4) (tier 1) goes up: tier 0's victim K(0) is to go down into tier 1, whose victim goes
  // down into tier 2 (a drop there first, then the slow copy).
  std::thread p([&] {
    try {
      const Key k = K(4);
      rt->access(&k, nullptr, 1);
    } catch (const Error &) {
    }
  });
  if (!poll_until([&] { return drops(*rt) >= 1; })) {
    p.join();
    return "P's promotion made no room: " + std::to_string(drops(*rt)) + " drops";
  }
  // D: a burst of one while P copies: its room's victim in tier 0 is K(0) too (held and out of
  // the index), and it releases the lock for its own copy (queued behind P's); P takes the lock
  // back and goes on with K(0).
  std::thread d([&] {
    try {
      const Key k = K(100);
      Block b;
      rt->admit_batch(&k, 1, false, &b, nullptr);
    } catch (const Error &) {
    }
  });
  p.join();
  d.join();
  Block b4;
  if (!rt->lookup(K(4), &b4)) return "K(4) is resident nowhere";
  // K(4) promoted: D's room came after P's promotion (the window was missed).
  if (b4.tier == 0) std::fprintf(stderr, "note: the window was missed; nothing proved\n");
  std::string v = rt->validate();
  return v.empty() ? "" : "validate: " + v;
}

// --- move() waits for a block another call holds --------------------------------------------------
// The defect this catches:
// move() waited for a moving, admitting or unindexed block but not for a held one (kFlagHeld:
// admit_batch keeps its resident blocks so while it makes room). Its own hold (a FlagGuard of
// kFlagHeld) then shared the flag with the batch's: the batch's end cleared it while move() was
// still making room, a second burst picked the block as its victim (kFlagHeld |
// kFlagUnindexed), move()'s guard cleared the Held half, and move() went on to move a block that
// is out of its index: LrfuIndex::erase's assertion aborts the process.
std::string move_vs_held_by_batch() {
  auto rt = Runtime::open(sync_config(PromotionRule::never));
  if (std::string e = fill_twelve(*rt); !e.empty()) return e;
  hot(*rt, {K(1), K(2), K(3)});  // K(0) is tier 0's coldest block
  const Key n = K(100), n2 = K(101);
  std::atomic<bool> c_done{false}, b_early{false};
  // C: K(0) resident (kept: held) and N (room: a drop, then a slow copy into tier 2).
  std::thread c([&] {
    try {
      const Key keys[2] = {K(0), n};
      Block out[2];
      rt->admit_batch(keys, 2, false, out, nullptr);
    } catch (const Error &) {
    }
    c_done = true;
  });
  if (!poll_until([&] { return drops(*rt) >= 1; })) {
    c.join();
    return "C's burst made no room: " + std::to_string(drops(*rt)) + " drops";
  }
  // B: moves K(0) into (full) tier 1 while C holds it. Fixed, it waits for C; before, it made
  // room at once (another drop and a copy queued behind C's).
  std::thread b([&] {
    b_early = !c_done;
    try {
      rt->move(K(0), 1, true);
    } catch (const Error &) {
    }
  });
  c.join();
  hot(*rt, {n});  // K(0) stays tier 0's coldest
  // D: a burst whose room's tier-0 victim is K(0), if nothing holds it now.
  std::thread d([&] {
    try {
      Block out;
      rt->admit_batch(&n2, 1, false, &out, nullptr);
    } catch (const Error &) {
    }
  });
  b.join();
  d.join();
  if (!b_early) std::fprintf(stderr, "note: the window was missed; nothing proved\n");
  std::string v = rt->validate();
  return v.empty() ? "" : "validate: " + v;
}

// --- release_batch(forget) waits for a block out of its index -------------------------------------
// The defect this catches:
// release_batch(forget) waited for a moving, admitting or held block, but not for one only out
// of its tier's index (kFlagUnindexed without kFlagHeld: what move()'s guard left before it
// waited for held blocks, see above), as release(forget) does: it unplaced the block, erasing
// it from an index it is not in, and LrfuIndex::erase's assertion aborts the process. The test
// makes that state by hand: a burst picks K(0) as its room's victim (held and unindexed) and
// copies, and the hold is cleared (RuntimeTestAccess::set_held, as a stray clear would).
std::string release_batch_vs_unindexed() {
  auto rt = Runtime::open(sync_config(PromotionRule::never));
  if (std::string e = fill_twelve(*rt); !e.empty()) return e;
  hot(*rt, {K(1), K(2), K(3)});  // K(0) is tier 0's victim
  std::atomic<bool> d_done{false};
  std::thread d([&] {
    try {
      const Key k = K(100);
      Block b;
      rt->admit_batch(&k, 1, false, &b, nullptr);
    } catch (const Error &) {
    }
    d_done = true;
  });
  if (!poll_until([&] { return drops(*rt) >= 1; })) {
    d.join();
    return "the burst made no room: " + std::to_string(drops(*rt)) + " drops";
  }
  // The burst copies tier 1's victim into tier 2; K(0), its tier-0 victim, waits for that slot.
  if (!RuntimeTestAccess::set_held(*rt, K(0), false)) {
    d.join();
    return "K(0) is resident nowhere";
  }
  const bool early = !d_done;
  std::string why;
  try {
    const Key k = K(0);
    rt->release_batch(&k, 1, /*forget=*/true);
  } catch (const Error &e) {
    why = std::string("release_batch(forget): ") + e.what();
  }
  d.join();
  if (!early) std::fprintf(stderr, "note: the window was missed; nothing proved\n");
  if (!why.empty()) return why;
  Block b;
  if (rt->lookup(K(0), &b)) return "K(0) is still resident (" + where(b) + ") after release_batch(forget)";
  std::string v = rt->validate();
  return v.empty() ? "" : "validate: " + v;
}

// --- admit_batch never wraps a pin count an engine filled while it made room ---------------------
// The defect this catches:
// admit_batch checks each resident block's pin count (room for one more pin per entry) before
// it makes room, with the lock released meanwhile; an engine's pin() then may take the last
// count (65535), and the batch's ++pins wrapped the uint16 to 0: the engine's 65535 pins were
// gone (the next unpin said "not pinned") and the block could be moved or dropped under it.
// Now the batch refuses (INVALID_ARGUMENT) and admits nothing.
std::string batch_pin_vs_last_pin() {
  auto rt = Runtime::open(sync_config(PromotionRule::never));
  if (std::string e = fill_twelve(*rt); !e.empty()) return e;
  for (int i = 0; i < 65534; ++i) rt->pin(K(0));
  const Key n = K(100);
  cxlt_result_t batch = CXLT_OK;
  std::string batch_what;
  std::thread x([&] {
    try {
      const Key keys[2] = {K(0), n};
      Block out[2];
      rt->admit_batch(keys, 2, /*pin=*/true, out, nullptr);
    } catch (const Error &e) {
      batch = e.code();
      batch_what = e.what();
    }
  });
  if (!poll_until([&] { return drops(*rt) >= 1; })) {
    x.join();
    return "the burst made no room: " + std::to_string(drops(*rt)) + " drops";
  }
  bool window = true;
  try {
    rt->pin(K(0));  // the 65535th pin, while the burst copies
  } catch (const Error &e) {
    if (e.code() != CXLT_ERROR_INVALID_ARGUMENT) throw;
    window = false;  // the burst pinned it first
  }
  x.join();
  if (!window) {
    std::fprintf(stderr, "note: the window was missed; nothing proved\n");
    return "";
  }
  if (batch != CXLT_ERROR_INVALID_ARGUMENT) {
    std::string what = batch == CXLT_OK ? "it succeeded" : batch_what;
    try {
      rt->unpin(K(0));
    } catch (const Error &e) {
      what += std::string(", and the engine's pins are gone (unpin: ") + e.what() + ")";
    }
    return "admit_batch of a block pinned 65535 times meanwhile did not refuse: " + what;
  }
  Block nb;
  if (rt->lookup(n, &nb)) return "a refused admit_batch admitted " + n.hex();
  // Exactly the engine's 65535 pins.
  for (int i = 0; i < 65535; ++i) {
    try {
      rt->unpin(K(0));
    } catch (const Error &e) {
      return "the engine's unpin #" + std::to_string(i + 1) + " of 65535 failed: " + e.what();
    }
  }
  try {
    rt->unpin(K(0));
    return "K(0) was pinned more than the engine's 65535 times";
  } catch (const Error &e) {
    if (e.code() != CXLT_ERROR_INVALID_ARGUMENT) throw;
  }
  std::string v = rt->validate();
  return v.empty() ? "" : "validate: " + v;
}

// --- An engine's unpin never takes the pin of an admission's remote fetch -------------------------
// The defect this catches:
// An admission of a block resident nowhere, with the remote tier on, places the block, pins it
// and releases the lock while the remote tier's fetch fills its slot (fetch_remote). unpin() of
// that block (which the engine never pinned) succeeded meanwhile, taking the admission's pin;
// the admission's own --pins then wrapped the count to 65535: the block stayed pinned for good
// (release(forget) said BUSY, pinned 65535 times). Now unpin waits for the admission and then
// refuses (INVALID_ARGUMENT, not pinned). unpin_batch the same.
std::string unpin_vs_remote_fetch_by(bool batch) {
  auto rt = Runtime::open(sync_config(PromotionRule::never));
  auto remote = std::make_unique<cxlt_test::HeldFetch>();
  cxlt_test::HeldFetch &held = *remote;
  RuntimeTestAccess::set_remote(*rt, std::move(remote));
  const Key k = K(0);
  std::thread x([&] {
    try {
      rt->admit(k);
    } catch (const Error &) {
    }
  });
  if (!held.gate.wait_entered(5.0)) {
    held.gate.let_go();
    x.join();
    return "the admission never fetched from the remote tier";
  }
  // The fetch is held: the gate goes 50 ms from now, or as soon as the unpin returns.
  std::atomic<bool> unpinned{false}, let_go{false};
  std::thread l([&] {
    poll_until([&] { return unpinned.load(); }, 0.05);
    let_go = true;
    held.gate.let_go();
  });
  const bool early = !let_go;
  std::string why;
  try {
    if (batch)
      rt->unpin_batch(&k, 1);  // never pinned by the engine
    else
      rt->unpin(k);
    why = std::string(batch ? "unpin_batch" : "unpin") + " of a block the engine never pinned succeeded during its admission's remote fetch";
  } catch (const Error &e) {
    if (e.code() != CXLT_ERROR_INVALID_ARGUMENT) why = std::string("unpin: unexpected error ") + e.what();
  }
  unpinned = true;
  l.join();
  x.join();
  if (!early) std::fprintf(stderr, "note: the window was missed; nothing proved\n");
  try {
    rt->release(k, /*forget=*/true);  // no pin left: the admission's own is gone too
  } catch (const Error &e) {
    why += (why.empty() ? "" : "; ") + std::string("release(forget) after the admission: ") + e.what();
  }
  if (!why.empty()) return why;
  std::string v = rt->validate();
  return v.empty() ? "" : "validate: " + v;
}

std::string unpin_vs_remote_fetch() { return unpin_vs_remote_fetch_by(false); }
std::string unpin_batch_vs_remote_fetch() { return unpin_vs_remote_fetch_by(true); }

// --- admit_batch(pin = false) never takes a pin it no longer holds --------------------------------
// The defect this catches:
// admit_batch pins each resident block of the batch while it places the others (the lock
// released during a remote fetch), and takes those pins off at the end when pin is false. An
// engine's stray unpin of such a block meanwhile succeeds (the block is not being admitted
// itself: it takes the batch's pin); the batch's final --pins then wrapped the count to 65535,
// pinning the block for good (release(forget) said BUSY). Now the batch leaves a zero count.
std::string batch_unpin_vs_stray_unpin() {
  auto rt = Runtime::open(sync_config(PromotionRule::never));
  rt->admit(K(0));  // resident, unpinned; every tier has room
  auto remote = std::make_unique<cxlt_test::HeldFetch>();
  cxlt_test::HeldFetch &held = *remote;
  RuntimeTestAccess::set_remote(*rt, std::move(remote));
  const Key n = K(100);
  std::thread x([&] {
    try {
      const Key keys[2] = {K(0), n};
      Block out[2];
      rt->admit_batch(keys, 2, /*pin=*/false, out, nullptr);
    } catch (const Error &) {
    }
  });
  if (!held.gate.wait_entered(5.0)) {
    held.gate.let_go();
    x.join();
    return "the burst never fetched from the remote tier";
  }
  // N's fetch is held; K(0) carries the batch's pin.
  bool stray = true;
  try {
    rt->unpin(K(0));  // never pinned by the engine
  } catch (const Error &e) {
    if (e.code() != CXLT_ERROR_INVALID_ARGUMENT) {
      held.gate.let_go();
      x.join();
      return std::string("unpin: unexpected error ") + e.what();
    }
    stray = false;  // refused: fine, nothing for the batch to get wrong
  }
  held.gate.let_go();
  x.join();
  if (!stray) std::fprintf(stderr, "note: the stray unpin was refused; nothing proved\n");
  try {
    rt->release(K(0), /*forget=*/true);  // no pin left
  } catch (const Error &e) {
    return std::string("release(forget) of K(0) after the batch: ") + e.what();
  }
  std::string v = rt->validate();
  return v.empty() ? "" : "validate: " + v;
}

// The same when the batch fails after the stray unpin and rolls back: its rollback's --pins had
// wrapped K(0)'s count to 65535 too. Here the batch is {K(0), N, K(1)}: K(1) was pinned 65534
// times, and the engine pins it once more while N's fetch is held, so the batch refuses at K(1)
// (65535 pins) and rolls back.
std::string batch_rollback_vs_stray_unpin() {
  auto rt = Runtime::open(sync_config(PromotionRule::never));
  rt->admit(K(0));  // resident, unpinned; every tier has room
  rt->admit(K(1));
  for (int i = 0; i < 65534; ++i) rt->pin(K(1));
  auto remote = std::make_unique<cxlt_test::HeldFetch>();
  cxlt_test::HeldFetch &held = *remote;
  RuntimeTestAccess::set_remote(*rt, std::move(remote));
  const Key n = K(100);
  cxlt_result_t batch = CXLT_OK;
  std::thread x([&] {
    const Key keys[3] = {K(0), n, K(1)};
    Block out[3];
    batch = cxlt_test::code_of([&] { rt->admit_batch(keys, 3, /*pin=*/false, out, nullptr); });
  });
  if (!held.gate.wait_entered(5.0)) {
    held.gate.let_go();
    x.join();
    return "the burst never fetched from the remote tier";
  }
  // N's fetch is held; K(0) carries the batch's pin.
  const cxlt_result_t stray = cxlt_test::code_of([&] { rt->unpin(K(0)); });  // never pinned by the engine
  const cxlt_result_t filled = cxlt_test::code_of([&] { rt->pin(K(1)); });    // 65535
  held.gate.let_go();
  x.join();
  if (stray != CXLT_OK || filled != CXLT_OK || batch != CXLT_ERROR_INVALID_ARGUMENT) {
    std::fprintf(stderr, "note: the window was missed (unpin %d, pin %d, batch %d); nothing proved\n", stray, filled, batch);
  }
  std::string why;
  if (const cxlt_result_t r = cxlt_test::code_of([&] { rt->release(K(0), /*forget=*/true); }); r != CXLT_OK)
    why = "release(forget) of K(0) after the rolled-back batch failed (" + std::to_string(r) + "): its pin count wrapped";
  if (rt->lookup(n, nullptr)) why += (why.empty() ? "" : "; ") + std::string("N stayed resident after the batch refused");
  for (int i = 0; i < 65535; ++i) rt->unpin(K(1));
  if (!why.empty()) return why;
  std::string v = rt->validate();
  return v.empty() ? "" : "validate: " + v;
}

// --- store.checkpoint_every_steps near 2^64 does not wrap the step test --------------------------
// The defect this catches:
// Runtime::step (access.cpp) checkpoints when `now >= checkpoint_at_step + every`. After a
// restart from a checkpoint (checkpoint_at_step = the saved step, > 0) a large `every` (the
// config accepts up to 2^64-1, meaning "practically never") wraps the sum below `now`, and every
// single step writes and fsyncs the whole store. `now - checkpoint_at_step >= every` cannot wrap.
ino_t inode_of(const std::string &path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 ? st.st_ino : 0;
}

}  // namespace

TEST(MoveProtocol, MoveMustNotMoveABlockPinnedWhileItMadeRoom) {
  EXPECT_EXIT(child(move_vs_pin), ::testing::ExitedWithCode(0), "");
}

TEST(MoveProtocol, UnpinOfAnUnpinnedBlockFailsEvenDuringMove) {
  EXPECT_EXIT(child(move_vs_stray_unpin), ::testing::ExitedWithCode(0), "");
}

TEST(MoveProtocol, AdmitPinNeverReturnsAnotherKeysBlock) {
  EXPECT_EXIT(child(admit_pin_vs_forget_and_reuse), ::testing::ExitedWithCode(0), "");
}

TEST(MoveProtocol, AdmitPinKeepsNoStoreReferenceAcrossAWait) {
  EXPECT_EXIT(child(admit_pin_vs_store_growth), ::testing::ExitedWithCode(0), "");
}

TEST(MoveProtocol, SyncPromotionRechecksItsVictimAfterMakingRoom) {
  EXPECT_EXIT(child(promote_vs_batch_room), ::testing::ExitedWithCode(0), "");
}

TEST(MoveProtocol, MoveWaitsForABlockAnotherCallHolds) {
  EXPECT_EXIT(child(move_vs_held_by_batch), ::testing::ExitedWithCode(0), "");
}

TEST(MoveProtocol, ReleaseBatchForgetWaitsForABlockOutOfItsIndex) {
  EXPECT_EXIT(child(release_batch_vs_unindexed), ::testing::ExitedWithCode(0), "");
}

TEST(MoveProtocol, AdmitBatchRefusesAPinCountFilledWhileItMadeRoom) {
  EXPECT_EXIT(child(batch_pin_vs_last_pin), ::testing::ExitedWithCode(0), "");
}

TEST(MoveProtocol, UnpinNeverTakesTheRemoteFetchsPin) {
  EXPECT_EXIT(child(unpin_vs_remote_fetch), ::testing::ExitedWithCode(0), "");
}

TEST(MoveProtocol, UnpinBatchNeverTakesTheRemoteFetchsPin) {
  EXPECT_EXIT(child(unpin_batch_vs_remote_fetch), ::testing::ExitedWithCode(0), "");
}

TEST(MoveProtocol, AdmitBatchRollbackLeavesAStrayUnpinsZero) {
  EXPECT_EXIT(child(batch_rollback_vs_stray_unpin), ::testing::ExitedWithCode(0), "");
}

TEST(MoveProtocol, AdmitBatchWithoutPinLeavesAStrayUnpinsZero) {
  EXPECT_EXIT(child(batch_unpin_vs_stray_unpin), ::testing::ExitedWithCode(0), "");
}

TEST(CheckpointInterval, HugeIntervalNeverCheckpointsEveryStep) {
  const cxlt_test::TempDir tmp("move-protocol-ckpt");
  const std::string dir = tmp.path().string();
  RuntimeConfig cfg = three_tier_config(2, 2, 2);
  cfg.synchronous = true;
  cfg.store_path = dir + "/store.ckpt";
  {
    auto rt = Runtime::open(cfg);
    rt->admit(K(0));
    for (int i = 0; i < 5; ++i) rt->step();
  }  // closing writes the checkpoint at step 5
  cfg.checkpoint_every_steps = UINT64_MAX;
  auto rt = Runtime::open(cfg);
  ASSERT_EQ(rt->current_step(), 5u);
  const ino_t before = inode_of(cfg.store_path);
  ASSERT_NE(before, 0u);
  rt->step();  // 1 step of 2^64-1
  EXPECT_EQ(inode_of(cfg.store_path), before) << "one step rewrote the checkpoint although checkpoint_every_steps = 2^64-1";
  rt.reset();
}
