// SPDX-License-Identifier: Apache-2.0
// The move protocol under racing calls: a block an engine pins while move() makes room for it
// never moves, an engine's unpin never cancels move()'s own pin, admit(pin) after waiting for a
// move finds its key again, and a huge checkpoint interval never checkpoints every step.
//
// How the interleavings are made: copies into an emulated tier with pace_mib_s take
// block_bytes / pace seconds (0.6 s here), so a move is reliably in flight while another
// thread calls in; wait_idle(0) returning false tells the test a move is in flight. Nothing
// is timed: a slow machine can only make a test miss the window (it then passes without
// having proved anything, and says so), never fail a correct runtime. Scenarios that crash a
// buggy runtime (an internal assertion aborts) run in a forked child (EXPECT_EXIT), so a
// crash is a test failure, not the end of the binary.
#include "../common/temp_dir.hpp"
#include "runtime_test_util.hpp"

#include <cxltier/error.hpp>
#include <cxltier/runtime.hpp>

#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
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
