// SPDX-License-Identifier: Apache-2.0
// Calls in progress when close() begins, in another thread (the C++ API allows it; the C API
// waits for calls in progress first): each ends promptly, with an error that says the runtime is
// closing, or done, and none is left waiting on a block that no thread will move again.
#include "../common/thrown.hpp"
#include "remote_doubles.hpp"
#include "runtime_test_util.hpp"

#include <cxltier/error.hpp>

#include "lib/runtime/test_access.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

using namespace cxltier;
using namespace cxlt_test;

namespace {

using Clock = std::chrono::steady_clock;

std::vector<Key> seq(uint64_t id, size_t n, size_t from = 0) {
  std::vector<Key> k;
  for (size_t i = 0; i < n; ++i) k.push_back(key_from_sequence(id, from + i));
  return k;
}

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// A runtime whose only tier (4 slots, synchronous: no mover) is full, 3 blocks pinned and the
// fourth, `stuck`, held as a fault would leave it: an admission beside it waits for it.
std::unique_ptr<Runtime> full_beside_held_block(Key *stuck) {
  auto rt = Runtime::open(one_synchronous_tier(4));
  std::vector<Key> pinned = seq(1, 3);
  std::vector<Block> b(3);
  rt->admit_batch(pinned.data(), pinned.size(), true, b.data(), nullptr);
  *stuck = key_from_sequence(2, 0);
  rt->admit(*stuck);
  EXPECT_TRUE(rt->lookup(*stuck, nullptr));
  EXPECT_TRUE(RuntimeTestAccess::set_held(*rt, *stuck, true));
  return rt;
}

// Start `call` in a thread and return once that thread has taken the runtime's mutex: the test
// holds the mutex until the thread is counted waiting for it (lock_waiters), lets it go, and
// waits for the count to fall back to 0, which it does only once the thread holds it. A call
// the test makes next that takes the mutex then runs only when `call` releases it, which an
// admission beside a held block (synchronous, no other thread) does first in its wait for
// blocks in passage. *ok: both waits ended within their bound (5 s each).
std::thread start_holding_the_mutex(Runtime &rt, std::function<void()> call, bool *ok) {
  auto until = [](const std::function<bool()> &done) {
    const auto deadline = Clock::now() + std::chrono::seconds(5);
    while (!done()) {
      if (Clock::now() > deadline) return false;
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
    return true;
  };
  std::unique_lock<std::mutex> held = RuntimeTestAccess::lock_mutex(rt);
  std::thread t(std::move(call));
  *ok = until([&] { return RuntimeTestAccess::lock_waiters(rt) >= 1; });
  held.unlock();
  *ok = until([&] { return RuntimeTestAccess::lock_waiters(rt) == 0; }) && *ok;
  return t;
}

// close() while an admission waits for a block in passage (held, as a fault would leave it):
// the wait returns false once it sees the runtime stopping, and the refusal says the runtime is
// closing, not that the block stayed in passage past the wait's bound; and close() wakes the
// wait, which would otherwise end at its bound, a second later. close() is called once the
// admitting thread holds the mutex, so it takes the mutex only while that thread waits (nothing
// releases it before).
TEST(Close, AdmitWaitingForPassageIsRefused) {
  Key stuck;
  auto rt = full_beside_held_block(&stuck);
  const Key one = key_from_sequence(3, 0);
  Error refused(CXLT_OK, "");
  bool in_time = false;
  std::thread admitting = start_holding_the_mutex(*rt, [&] { refused = thrown([&] { rt->admit(one); }); }, &in_time);
  const auto t0 = Clock::now();
  rt->close();
  admitting.join();
  const double admit_s = std::chrono::duration<double>(Clock::now() - t0).count();
  EXPECT_TRUE(in_time) << "the admitting thread did not take the mutex within 5 s";
  EXPECT_EQ(refused.code(), CXLT_ERROR_OUT_OF_TIER_MEMORY);
  EXPECT_NE(std::string(refused.what()).find("every tier is full and the runtime is closing"), std::string::npos)
      << refused.what();
  EXPECT_EQ(std::string(refused.what()).find("past the wait's bound"), std::string::npos) << refused.what();
  // Woken by close(), not at the wait's bound (a second): a generous limit for a loaded host.
  EXPECT_LT(admit_s, 0.5) << "close() did not wake the admission's wait";
  // Read after close() only to check (the runtime's memory lasts until it is destroyed): the
  // refusal admitted nothing and moved nothing.
  EXPECT_FALSE(rt->lookup(one, nullptr));
  EXPECT_TRUE(rt->lookup(stuck, nullptr));
}

// The same for admit_batch: close() while it waits for a block in passage refuses the batch
// with nothing admitted, saying the runtime is closing, not counting the waits, as soon as
// close() wakes the wait.
TEST(Close, AdmitBatchWaitingForPassageIsRefused) {
  Key stuck;
  auto rt = full_beside_held_block(&stuck);
  const std::vector<Key> two = seq(4, 2);
  std::vector<Block> out(2);
  int sentinel = 0;
  for (Block &b : out) b.data = &sentinel;  // an output written would overwrite these
  bool placed[2] = {true, true};
  Error refused(CXLT_OK, "");
  bool in_time = false;
  std::thread admitting = start_holding_the_mutex(
      *rt, [&] { refused = thrown([&] { rt->admit_batch(two.data(), two.size(), false, out.data(), placed); }); }, &in_time);
  const auto t0 = Clock::now();
  rt->close();
  admitting.join();
  const double batch_s = std::chrono::duration<double>(Clock::now() - t0).count();
  EXPECT_TRUE(in_time) << "the admitting thread did not take the mutex within 5 s";
  EXPECT_EQ(refused.code(), CXLT_ERROR_OUT_OF_TIER_MEMORY);
  EXPECT_NE(std::string(refused.what()).find("admit_batch: 2 blocks need a slot and the runtime is closing: nothing admitted"),
            std::string::npos)
      << refused.what();
  EXPECT_EQ(std::string(refused.what()).find(" wait)"), std::string::npos) << refused.what();
  EXPECT_LT(batch_s, 0.5) << "close() did not wake the batch's wait";  // not the wait's bound, a second
  // Nothing admitted: no output written, and (read after close() only to check) no key resident.
  for (const Block &b : out) EXPECT_EQ(b.data, &sentinel);
  EXPECT_TRUE(placed[0] && placed[1]);
  for (const Key &k : two) EXPECT_FALSE(rt->lookup(k, nullptr));
  EXPECT_TRUE(rt->lookup(stuck, nullptr));
}

// release(forget) of a block held by another call (here, as a fault would leave it) waits for
// the hold to end; close() ends that wait with CXLT_ERROR_CLOSED, where it had waited for good.
// So does release_batch(forget).
TEST(Close, ReleaseForgetOfAHeldBlockEnds) {
  for (const bool batch : {false, true}) {
    SCOPED_TRACE(batch ? "release_batch" : "release");
    auto rt = Runtime::open(one_synchronous_tier(4));
    const Key k = key_from_sequence(1, 0);
    rt->admit(k);
    ASSERT_TRUE(RuntimeTestAccess::set_held(*rt, k, true));
    Error refused(CXLT_OK, "");
    bool in_time = false;
    std::thread releasing = start_holding_the_mutex(
        *rt,
        [&] {
          refused = thrown([&] {
            if (batch)
              rt->release_batch(&k, 1, /*forget=*/true);
            else
              rt->release(k, /*forget=*/true);
          });
        },
        &in_time);
    const auto t0 = Clock::now();
    rt->close();
    // Bounded: without the fix the call would wait for good, so the test lets the hold go after
    // 5 s rather than hang (and then fails on the time and the code).
    std::atomic<bool> joined{false};
    std::thread rescue([&] {
      const auto until = Clock::now() + std::chrono::seconds(5);
      while (!joined.load() && Clock::now() < until) std::this_thread::sleep_for(std::chrono::milliseconds(1));
      if (!joined.load()) RuntimeTestAccess::set_held(*rt, k, false);
    });
    releasing.join();
    const double s = seconds_since(t0);
    joined = true;
    rescue.join();
    EXPECT_TRUE(in_time) << "the releasing thread did not take the mutex within 5 s";
    EXPECT_EQ(refused.code(), CXLT_ERROR_CLOSED) << refused.what();
    EXPECT_NE(std::string(refused.what()).find("the runtime is closing"), std::string::npos) << refused.what();
    EXPECT_LT(s, 0.5) << "close() did not end the release's wait";
    EXPECT_TRUE(rt->lookup(k, nullptr)) << "the refused release forgot the block";  // read after close() only to check
  }
}

// move(wait=false) racing close(): a move scheduled after close() had cancelled the queued copies
// and the workers had left was queued for no one, and its block stayed moving for good (every
// later move, pin or release of it waited). Now it is cancelled as the queued ones are, and the
// block stays where it was: the engine thread's loop ends, and the block can be pinned.
TEST(Close, MoveWithoutWaitRacingCloseLeavesNoBlockMoving) {
  for (int run = 0; run < 20; ++run) {
    SCOPED_TRACE("run " + std::to_string(run));
    RuntimeConfig cfg = three_tier_config(4, 4, 0);
    cfg.tiers.resize(2);
    auto rt = Runtime::open(cfg);
    const Key k = key_from_sequence(1, 0);
    rt->admit(k);
    std::atomic<bool> closed{false}, done{false};
    std::atomic<uint64_t> moves{0}, refusals{0};
    std::thread engine([&] {
      int last = 0;  // the tier the block was last seen in; a change is a move made
      for (int i = 0; !closed.load(); ++i) {
        const cxlt_result_t r = code_of([&] { rt->move(k, i & 1, /*wait=*/false); });
        if (r != CXLT_OK) ++refusals;
        Block at{};
        if (!closed.load() && rt->lookup(k, &at) && at.tier != last) {
          last = at.tier;
          ++moves;
        }
      }
      done = true;
    });
    // Close only once the engine thread has moved the block a few times (so that its moves and
    // close() overlap), however slowly it gets the core.
    const auto started = Clock::now() + std::chrono::seconds(5);
    while (moves.load() < 4 && Clock::now() < started) std::this_thread::sleep_for(std::chrono::microseconds(100));
    EXPECT_GE(moves.load(), 4u) << "the engine thread made no moves in 5 s: nothing tested";
    rt->close();
    closed = true;
    const auto until = Clock::now() + std::chrono::seconds(5);
    while (!done.load() && Clock::now() < until) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    if (!done.load()) {  // stuck for good: leave the thread and the runtime it waits in
      ADD_FAILURE() << "a move() begun before close() returned still waits 5 s later (" << moves.load() << " moves, "
                    << refusals.load() << " refused)";
      engine.detach();
      (void)rt.release();
      return;
    }
    engine.join();
    // Read after close() only to check: the block is in no passage, so a pin takes it at once.
    Block b{};
    EXPECT_EQ(code_of([&] { b = rt->pin(k); }), CXLT_OK) << "the block was left moving";
    EXPECT_NE(b.data, nullptr);
  }
}

// Calls that wait for a block in passage when close() begins: here a victim in the middle of its
// write-out (moving) and the block whose admission wrote it out (being admitted), both held by
// the remote tier's double. Each such call, whether it began waiting before close() or comes
// after it, fails with CXLT_ERROR_CLOSED within 0.5 s of close(), where it had waited for the
// write-out however long that took.
TEST(Close, CallsWaitingForABlockInPassageFail) {
  auto rt = Runtime::open(one_synchronous_tier(4));
  auto owned = std::make_unique<HeldWriteOuts>();
  HeldWriteOuts &remote = *owned;
  RuntimeTestAccess::set_remote(*rt, std::move(owned));
  for (const Key &k : seq(1, 4)) rt->admit(k);
  const Key incoming = key_from_sequence(2, 0);
  std::thread admitting([&] { (void)code_of([&] { rt->admit(incoming); }); });
  if (!remote.gate.wait_entered(5)) {
    remote.gate.let_go();
    admitting.join();
    FAIL() << "the admission into the full tier wrote nothing out within 5 s";
  }
  const Key victim = remote.last_stored();
  struct Call {
    const char *name;
    std::function<void()> run;
  };
  const std::vector<Call> calls = {
      {"pin (moving)", [&] { rt->pin(victim); }},
      {"move (moving)", [&] { rt->move(victim, 0, true); }},
      {"admit pin (moving)", [&] { rt->admit(victim, nullptr, true); }},
      {"prefix_lookup pin (moving)", [&] { Block b{}; rt->prefix_lookup(&victim, 1, true, false, &b); }},
      {"pin (being admitted)", [&] { rt->pin(incoming); }},
      {"reference (being admitted)", [&] { (void)rt->reference(incoming, 1.0f, 0); }},
      {"admit_batch (being admitted)", [&] { Block b{}; rt->admit_batch(&incoming, 1, false, &b, nullptr); }},
  };
  std::vector<cxlt_result_t> codes(calls.size(), CXLT_OK);
  std::vector<std::string> messages(calls.size());
  std::vector<double> ended(calls.size(), 0.0);
  Clock::time_point closed_at;
  std::atomic<bool> closed{false};
  std::vector<std::thread> waiting;
  for (size_t i = 0; i < calls.size(); ++i)
    waiting.emplace_back([&, i] {
      try {
        calls[i].run();
      } catch (const Error &e) {
        codes[i] = e.code();
        messages[i] = e.what();
      }
      if (closed.load()) ended[i] = seconds_since(closed_at);
    });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));  // most are waiting by now; the rest come after close()
  closed_at = Clock::now();
  closed = true;
  rt->close();
  // Without the change these waits last until the write-out ends: let it go after 5 s.
  std::atomic<bool> joined{false};
  std::thread rescue([&] {
    const auto until = Clock::now() + std::chrono::seconds(5);
    while (!joined.load() && Clock::now() < until) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    remote.gate.let_go();
  });
  for (std::thread &t : waiting) t.join();
  joined = true;
  rescue.join();
  admitting.join();
  for (size_t i = 0; i < calls.size(); ++i) {
    SCOPED_TRACE(calls[i].name);
    EXPECT_EQ(codes[i], CXLT_ERROR_CLOSED) << messages[i];
    EXPECT_NE(messages[i].find("the runtime is closing"), std::string::npos) << messages[i];
    EXPECT_LT(ended[i], 0.5) << "close() did not end the wait";
  }
}

// A second close() in another thread while the first is still under way returns only once the
// first is done: it had returned at once, and a caller that then destroyed the runtime freed
// what the first was still using.
TEST(Close, ASecondCloseReturnsOnceTheFirstIsDone) {
  auto rt = Runtime::open(three_tier_config(4, 4, 0));
  auto owned = std::make_unique<HeldStop>();
  HeldStop &remote = *owned;
  RuntimeTestAccess::set_remote(*rt, std::move(owned));
  rt->admit(key_from_sequence(1, 0));
  std::atomic<bool> let_go{false}, second_returned{false}, second_before_stop_ended{false};
  std::thread first([&] { rt->close(); });
  if (!remote.gate.wait_entered(5)) {
    remote.gate.let_go();
    first.join();
    FAIL() << "close() did not reach the remote tier's stop() within 5 s";
  }
  std::thread second([&] {
    rt->close();
    second_before_stop_ended = !let_go.load();  // the first's stop() cannot end before let_go is set
    second_returned = true;
  });
  // However long the first takes (here until the test lets it go), the second waits for it.
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_FALSE(second_returned.load()) << "a second close() returned while the first was under way";
  let_go = true;
  remote.gate.let_go();
  first.join();
  second.join();
  EXPECT_FALSE(second_before_stop_ended.load()) << "the second close() returned before the first's stop() ended";
}

}  // namespace
