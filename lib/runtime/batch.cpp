// SPDX-License-Identifier: Apache-2.0
// The batch calls: one prefill's admissions, the longest resident prefix of a request (pinned in
// one step), and release/unpin of many blocks. Each takes the lock once, checks the whole batch,
// and applies none of it on an error: the single-block rules of admission.cpp and access.cpp,
// applied in order.
//
// admit_batch keeps every block of the batch pinned by the runtime while it places the rest
// (the lock is released while demotions copy), so that no block of the batch can be the victim
// of a later one's admission or moved away; those pins are undone before it returns. When a
// placement fails after others succeeded (another thread took the room the check counted, a
// backend failed), the blocks this call placed are freed again with their state as before.
#include "lib/runtime/runtime_impl.hpp"

#include "lib/runtime/flag_guard.hpp"

#include "lib/core/assert.hpp"

#include <cxltier/error.hpp>

#include <algorithm>
#include <string>
#include <vector>

namespace cxltier {

namespace {

// Per-thread scratch: keeps its capacity, so a steady stream of batches does not allocate.
struct BatchScratch {
  std::vector<Key> sorted;
  std::vector<NodeId> ids;
  struct Undo {
    NodeId id;
    bool fresh;  // placed by this call (else it was resident already)
    bool restored;
    bool counted_miss;  // not filled from the remote tier: its bytes are new
    PolicyState before;
  };
  std::vector<Undo> undo;
};
thread_local BatchScratch t_scratch;

// How many times admit_batch waits for blocks in passage before it refuses a batch short of room.
constexpr int kPassageRounds = 8;

// keys sorted; the first position of a key that appears twice, or n.
size_t first_repeat(const Key *keys, size_t n, std::vector<Key> &sorted, Key *dup) {
  sorted.assign(keys, keys + n);
  std::sort(sorted.begin(), sorted.end());
  auto it = std::adjacent_find(sorted.begin(), sorted.end());
  if (it == sorted.end()) return n;
  *dup = *it;
  size_t seen = 0;
  for (size_t i = 0; i < n; ++i)
    if (keys[i] == *dup && seen++ == 1) return i;
  return n;
}

[[noreturn]] void not_resident(const char *what, size_t i, const Key &k) {
  fail(CXLT_ERROR_NOT_FOUND, what, ": keys[", i, "] = ", k.hex(), " is not resident in any tier (nothing applied)");
}

}  // namespace

void Runtime::admit_batch(const Key *keys, size_t n, bool pin, Block *out, bool *placed) {
  Impl &m = *impl_;
  if (n == 0) return;
  if (keys == nullptr) fail(CXLT_ERROR_INVALID_ARGUMENT, "admit_batch: keys is NULL");
  if (out == nullptr) fail(CXLT_ERROR_INVALID_ARGUMENT, "admit_batch: blocks_out is NULL");
  BatchScratch &s = t_scratch;
  std::unique_lock lk = m.lock();
  m.drain_accesses();
  // The check, each round: first wait while another thread admits one of the keys (the lock is
  // released while it places it). Then distinct keys resident nowhere need a slot each; free
  // slots and unpinned blocks that may move (outside the batch: those are kept) must cover them.
  // When they do not, blocks in passage (wait_out_passage: a copy, another call's room or
  // admission) are waited for and the check is made again, so that a prefill beside a busy
  // mover or another prefill is not refused for room about to exist; with none, it refuses.
  uint64_t need = 0;
  for (int round = 0;; ++round) {
    while (true) {
      bool busy = false;
      for (size_t i = 0; i < n && !busy; ++i) {
        const NodeId id = m.store->find(keys[i]);
        busy = id != kNoNode && ((*m.store)[id].res.flags & kFlagAdmitting);
      }
      if (!busy) break;
      m.wait_moved(lk, "admit_batch");
    }
    s.sorted.assign(keys, keys + n);
    std::sort(s.sorted.begin(), s.sorted.end());
    uint64_t batch_movable = 0;
    need = 0;
    for (size_t i = 0, times = 1; i < s.sorted.size(); i += times) {
      const Key &k = s.sorted[i];
      for (times = 1; i + times < s.sorted.size() && s.sorted[i + times] == k; ++times) {
      }
      const NodeId id = m.store->find(k);
      if (id == kNoNode || (*m.store)[id].res.tier < 0) {
        ++need;
        continue;
      }
      const StoreEntry &e = (*m.store)[id];
      if (e.res.pins + times > 0xffff)  // each entry pins it once while the batch is placed
        fail(CXLT_ERROR_INVALID_ARGUMENT, "admit_batch: block ", k.hex(), " is pinned ", e.res.pins, " times already");
      if (e.res.pins == 0 && (e.res.flags & kFlagsInPassage) == 0) ++batch_movable;
    }
    uint64_t free_slots = 0;
    for (const TierRt &t : m.tiers) free_slots += t.pool->slots_free();
    if (need <= free_slots) break;
    uint64_t movable = 0, passage = 0;
    m.store->for_each([&](NodeId, const StoreEntry &e) {
      if (!resident_unpinned(e)) return;
      if ((e.res.flags & kFlagsInPassage) == 0) {
        ++movable;
      } else {
        ++passage;
      }
    });
    movable -= std::min(movable, batch_movable);
    if (need <= free_slots + movable) break;
    // A bound on the rounds: under a stream of other prefills the room could stay short.
    if (passage > 0 && round < kPassageRounds && m.wait_out_passage(lk)) continue;
    if (m.stopping) fail(CXLT_ERROR_OUT_OF_TIER_MEMORY, "admit_batch: ", need, " blocks need a slot and the runtime is closing: nothing admitted");
    const int waits = passage > 0 && round < kPassageRounds ? round + 1 : round;  // the last one past its bound
    fail(CXLT_ERROR_OUT_OF_TIER_MEMORY, "admit_batch: ", need, " blocks need a slot; the tiers have ", free_slots,
         " free and ", movable, " blocks that may make room (every other block is pinned",
         passage > 0 ? ", or still moving or held by another call after " : "", passage > 0 ? std::to_string(waits) : "",
         passage > 0 ? (waits == 1 ? " wait" : " waits") : "", "): nothing admitted");
  }
  // Room for the whole burst first, its demotions copied together (batch_room.cpp); then the
  // blocks take the slots freed, one by one as admit() places a block.
  if (need > m.tiers[0].pool->slots_free()) m.make_room_for_batch(lk, keys, n);
  // Apply, in order, each block pinned by this call until the end.
  s.undo.clear();
  auto rollback = [&] {
    for (size_t j = s.undo.size(); j-- > 0;) {
      const BatchScratch::Undo &u = s.undo[j];
      StoreEntry &f = (*m.store)[u.id];
      if (f.res.pins != 0) --f.res.pins;  // an engine's stray unpin while the lock was released may have taken it
      if (!u.fresh || f.res.pins != 0) continue;
      --m.tiers[f.res.tier].admissions;
      m.unplace(u.id, EraseReason::released);
      f.st = u.before;
      m.store->restate(u.id);
      if (u.restored) --m.restored;
      if (u.counted_miss) --m.misses;
      if (u.before.tick == 0 && f.res.flags == 0) m.store->erase(u.id);
    }
    s.undo.clear();
    m.moved_cv.notify_all();
  };
  try {
    for (size_t i = 0; i < n; ++i) {
      // Wait while another thread admits the block (it took it up meanwhile) or while the block
      // moves, as admit(pin) does: a move may be a write-out to the remote tier, which leaves it
      // resident nowhere, so a pin taken now would stay on no block. Pinned, it starts no move.
      NodeId id = m.find_or_insert(keys[i]);
      while ((*m.store)[id].res.flags & (kFlagAdmitting | ((*m.store)[id].res.tier >= 0 ? kFlagMoving : 0))) {
        m.wait_moved(lk, "admit_batch");
        id = m.find_or_insert(keys[i]);
      }
      StoreEntry &e = (*m.store)[id];
      if (e.res.tier >= 0) {
        // Checked before room was made; an engine's pin() may have taken the last count since.
        if (e.res.pins == 0xffff)
          fail(CXLT_ERROR_INVALID_ARGUMENT, "admit_batch: keys[", i, "] = ", keys[i].hex(), " is pinned 65535 times already (nothing admitted)");
        ++e.res.pins;
        s.undo.push_back({id, false, false, false, e.st});
        continue;
      }
      BatchScratch::Undo u{id, true, false, false, e.st};
      m.restore_or_reset(id, &u.restored);
      e.st.last_access = m.now;  // admission is a reference for recency (not for the score)
      e.st.tick = ++m.tick;
      FlagGuard admitting(m, id, kFlagAdmitting, UndoAdmission{m, id, u.before, u.restored});
      m.store->set_resident(id, true);
      m.place(lk, id);
      ++(*m.store)[id].res.pins;
      s.undo.push_back(u);  // from here on the rollback frees it
      const bool fetched = m.fetch_remote(lk, id);
      if (!fetched) {
        ++m.misses;
        s.undo.back().counted_miss = true;
      }
      admitting.done();
    }
  } catch (...) {
    rollback();
    throw;
  }
  // Every block is pinned here, and none was moving when it was pinned (the loop above waits for
  // a moving one): a pinned block starts no move, so none is moving now.
  for ([[maybe_unused]] const BatchScratch::Undo &u : s.undo) cxlt_assert_internal(((*m.store)[u.id].res.flags & kFlagMoving) == 0);
  for (size_t i = 0; i < n; ++i) {
    const NodeId id = s.undo[i].id;
    StoreEntry &e = (*m.store)[id];
    if (pin) {
      e.res.flags = static_cast<uint8_t>(e.res.flags & ~kFlagReleased);
    } else if (e.res.pins != 0) {  // an engine's stray unpin while the lock was released may have taken it
      --e.res.pins;
    }
    out[i] = m.block_of(id);
    if (placed) placed[i] = s.undo[i].counted_miss;
  }
  m.moved_cv.notify_all();
  if (!m.cfg.synchronous) m.mover_cv.notify_one();
}

size_t Runtime::prefix_lookup(const Key *keys, size_t n, bool pin, bool fetch, Block *out) {
  Impl &m = *impl_;
  if (n == 0) return 0;
  if (keys == nullptr) fail(CXLT_ERROR_INVALID_ARGUMENT, "prefix_lookup: keys is NULL");
  if (out == nullptr) fail(CXLT_ERROR_INVALID_ARGUMENT, "prefix_lookup: blocks_out is NULL");
  BatchScratch &s = t_scratch;
  std::unique_lock lk = m.lock();
  m.drain_accesses();
  size_t matched = 0;
  if (!pin) {  // one pass: each block's place is written as it is found
    while (matched < n) {
      const NodeId id = m.store->find(keys[matched]);
      if (id == kNoNode || (*m.store)[id].res.tier < 0) break;
      out[matched++] = m.block_of(id);
    }
  }
  while (pin) {
    // With a pin: the resident prefix, waiting while a block of it is being admitted or moved
    // (a pin is taken where the block lands), then all of it pinned without releasing the lock.
    s.ids.clear();
    bool busy = false;
    for (size_t i = 0; i < n; ++i) {
      const NodeId id = m.store->find(keys[i]);
      if (id == kNoNode || (*m.store)[id].res.tier < 0) break;
      const StoreEntry &e = (*m.store)[id];
      if (e.res.flags & (kFlagMoving | kFlagAdmitting)) {
        busy = true;
        break;
      }
      s.ids.push_back(id);
    }
    if (!busy) break;
    m.wait_moved(lk, "prefix_lookup");
  }
  if (pin) {
    matched = s.ids.size();
    for (size_t i = 0; i < matched; ++i) {
      StoreEntry &e = (*m.store)[s.ids[i]];
      if (e.res.pins == 0xffff) {  // (a key given twice counts twice) undo this call's pins
        for (size_t j = 0; j < i; ++j) --(*m.store)[s.ids[j]].res.pins;
        fail(CXLT_ERROR_INVALID_ARGUMENT, "prefix_lookup: keys[", i, "] = ", keys[i].hex(),
             " is pinned 65535 times already (nothing pinned)");
      }
      ++e.res.pins;
    }
    for (size_t i = 0; i < matched; ++i) {
      StoreEntry &e = (*m.store)[s.ids[i]];
      e.res.flags = static_cast<uint8_t>(e.res.flags & ~kFlagReleased);
    }
    for (size_t i = 0; i < matched; ++i) out[i] = m.block_of(s.ids[i]);
  }
  if (!fetch || !m.remote || matched == n) return matched;
  // The remote tier: each following block it holds is admitted and filled from it; the first
  // it does not hold ends the prefix (its trial slot is freed again; it counts as a miss).
  lk.unlock();
  try {
    while (matched < n) {
      const Key k = keys[matched];
      bool placed_new = false;
      bool fetched_one = false;
      {
        std::unique_lock g = m.lock();
        const NodeId id = m.store->find(k);
        if (id != kNoNode && (*m.store)[id].res.tier >= 0) break;  // admitted meanwhile by another thread: not ours
      }
      Block b = admit(k, &placed_new, /*pin=*/true);
      fetched_one = !placed_new;
      if (!fetched_one) {
        unpin(k);
        release(k, /*forget=*/true);
        break;
      }
      if (!pin) unpin(k);
      out[matched++] = b;
    }
  } catch (...) {
    // The blocks pinned so far stay as the engine sees them: undo this call's pins.
    for (size_t i = 0; i < matched && pin; ++i) unpin(keys[i]);
    throw;
  }
  return matched;
}

void Runtime::release_batch(const Key *keys, size_t n, bool forget) {
  Impl &m = *impl_;
  if (n == 0) return;
  if (keys == nullptr) fail(CXLT_ERROR_INVALID_ARGUMENT, "release_batch: keys is NULL");
  BatchScratch &s = t_scratch;
  Key dup;
  const size_t rep = first_repeat(keys, n, s.sorted, &dup);
  if (rep != n) fail(CXLT_ERROR_INVALID_ARGUMENT, "release_batch: keys[", rep, "] = ", dup.hex(), " appears twice (nothing released)");
  std::unique_lock lk = m.lock();
  m.drain_accesses();
  while (true) {
    // release(forget) waits for a block being moved, admitted or held; so does the batch.
    s.ids.clear();
    bool busy = false;
    for (size_t i = 0; i < n; ++i) {
      const NodeId id = m.store->find(keys[i]);
      if (id == kNoNode || (*m.store)[id].res.tier < 0) not_resident("release_batch", i, keys[i]);
      const StoreEntry &e = (*m.store)[id];
      if (e.res.pins != 0)
        fail(CXLT_ERROR_BUSY, "release_batch: keys[", i, "] = ", keys[i].hex(), " is pinned (", e.res.pins, " pins; nothing released)");
      if (!forget && (e.res.flags & kFlagReleased))
        fail(CXLT_ERROR_INVALID_ARGUMENT, "release_batch: keys[", i, "] = ", keys[i].hex(), " was already released (nothing released)");
      if (forget && (e.res.flags & (kFlagMoving | kFlagAdmitting | kFlagHeld | kFlagUnindexed))) busy = true;
      s.ids.push_back(id);
    }
    if (!busy) break;
    m.wait_moved(lk, "release_batch");
  }
  for (NodeId id : s.ids) {
    StoreEntry &e = (*m.store)[id];
    if (!forget) {
      e.res.flags |= kFlagReleased;
      continue;
    }
    m.unplace(id, EraseReason::released);
  }
}

void Runtime::unpin_batch(const Key *keys, size_t n) {
  Impl &m = *impl_;
  if (n == 0) return;
  if (keys == nullptr) fail(CXLT_ERROR_INVALID_ARGUMENT, "unpin_batch: keys is NULL");
  BatchScratch &s = t_scratch;
  std::unique_lock lk = m.lock();
  m.drain_accesses();
  // As unpin(): while a key's block is being admitted its pins are the admission's; wait.
  for (bool busy = true; busy;) {
    busy = false;
    for (size_t i = 0; i < n && !busy; ++i) {
      const NodeId id = m.store->find(keys[i]);
      busy = id != kNoNode && ((*m.store)[id].res.flags & kFlagAdmitting);
    }
    if (busy) m.wait_moved(lk, "unpin_batch");
  }
  s.ids.clear();
  for (size_t i = 0; i < n; ++i) {
    const NodeId id = m.store->find(keys[i]);
    if (id == kNoNode || (*m.store)[id].res.tier < 0) not_resident("unpin_batch", i, keys[i]);
    s.ids.push_back(id);
  }
  // Pins nest: a key may appear as often as it is pinned. Take them off, and put them back if
  // one runs out.
  for (size_t i = 0; i < n; ++i) {
    StoreEntry &e = (*m.store)[s.ids[i]];
    if (e.res.pins == 0) {
      for (size_t j = 0; j < i; ++j) ++(*m.store)[s.ids[j]].res.pins;
      fail(CXLT_ERROR_INVALID_ARGUMENT, "unpin_batch: keys[", i, "] = ", keys[i].hex(),
           " is not pinned (or fewer times than it appears; nothing unpinned)");
    }
    --e.res.pins;
  }
}

}  // namespace cxltier
