// SPDX-License-Identifier: Apache-2.0
// Room for a burst of admissions (one prefill's blocks, admit_batch in batch.cpp). Placing the
// blocks one by one makes room one block at a time: each cascade (a drop from the last tier, a
// demotion into it, a demotion into the tier above it, ...) copies its blocks in the admitting
// thread, one after the other. Here the same victims are chosen first, for the whole burst, and
// each tier level's demotions go to the migration workers together as one batch of copies:
//
//  1. [mu held] Plan. The blocks are walked in the batch's order with a count of free slots
//     per tier, deciding as place() would: a free slot in the fastest tier; else that tier's
//     victim goes down when it keeps less than the block will (its keep value as admitted);
//     else the fastest tier with a free slot; else room is needed (a cascade from the fastest
//     tier). A cascade picks each level's victim, bottom level first, as make_room does. Every
//     block picked is held (kFlagHeld: no other victim search, mover or release takes it) and
//     out of its tier's policy index (kFlagUnindexed: later searches do not walk past it; an
//     access meanwhile updates its state only, as for a moving block), and the batch's resident
//     blocks are held, so that none is picked.
//  2. Drops (the victims of the last tier, and of a tier whose lower tiers had no victim), each
//     written out first when the remote tier is on (the lock released meanwhile, as make_room).
//  3. Per level, from the slowest pair up: each victim still where it was picked (the lock was
//     released since) gets a slot one tier down and begins its move (the migration protocol,
//     migration.cpp); the moves are queued to the workers at once and waited for, the lock
//     released meanwhile. The level above then finds the slots this level freed.
//     A runtime without workers (synchronous) copies them in this thread.
//  4. Every hold is undone (also on an exception), every victim that did not move back in its
//     tier's index, and waiters woken.
// The admissions that follow (place()) find the slots freed. A victim that changed meanwhile,
// a slot another thread took or a copy that failed only leaves less room: place() makes the
// rest one block at a time, with the errors the single-block path gives. A failed copy is a
// migration failure (the block stays where it was), an allocation the backend could not
// supply too (allocate_for_move): the room was the runtime's choice here, not yet a need.
#include "lib/runtime/runtime_impl.hpp"

#include "lib/core/assert.hpp"

#include <algorithm>
#include <vector>

namespace cxltier {

namespace {

// Per-thread scratch: keeps its capacity, so a steady stream of bursts does not allocate.
struct RoomScratch {
  std::vector<std::vector<NodeId>> demote;  // per tier: victims going one tier down
  std::vector<NodeId> drop;                 // victims leaving the tiers
  std::vector<NodeId> kept;                 // the batch's resident blocks, held meanwhile
  struct Moving {
    NodeId id;
    uint32_t generation;
  };
  std::vector<Moving> wave;
};
thread_local RoomScratch t_room;

}  // namespace

double Runtime::Impl::keep_value_as_admitted(NodeId id) const noexcept {
  if (id == kNoNode) return keep_value_of(PolicyState{}, kNoNode, tick + 1);
  PolicyState st = (*store)[id].st;
  if (st.tick != 0 && !cfg.persist) st = PolicyState{};  // restore_or_reset
  st.last_access = now;
  return keep_value_of(st, id, tick + 1);
}

void Runtime::Impl::make_room_for_batch(std::unique_lock<std::mutex> &lk, const Key *keys, size_t n) {
  const int last = last_tier();
  if (last == 0 || n == 0) return;
  RoomScratch &s = t_room;
  s.demote.resize(tiers.size());
  for (auto &v : s.demote) v.clear();
  s.drop.clear();
  s.kept.clear();
  uint64_t free_slots[CXLT_MAX_TIERS] = {};
  for (int t = 0; t <= last; ++t) free_slots[t] = tiers[t].pool->slots_free();

  // Step 4, whatever happens from here on: a block still held by this call (its list entry
  // not yet kNoNode) is let go, and a picked victim goes back into its tier's index.
  const auto unhold = [this](NodeId &id) {
    if (id == kNoNode) return;
    StoreEntry &e = (*store)[id];
    if (e.res.flags & kFlagUnindexed) tiers[e.res.tier].policy->insert(id, e.key, e.st);
    e.res.flags = static_cast<uint8_t>(e.res.flags & ~(kFlagHeld | kFlagUnindexed));
    id = kNoNode;
  };
  struct Undo {
    RoomScratch &s;
    decltype(unhold) &let_go;
    CountedCv &cv;
    ~Undo() {
      for (NodeId &id : s.kept) let_go(id);
      for (NodeId &id : s.drop) let_go(id);
      for (auto &v : s.demote)
        for (NodeId &id : v) let_go(id);
      cv.notify_all();
    }
  } undo{s, unhold, moved_cv};

  // Step 1. The batch's resident blocks first: held (not pinned: the engine's pin count stays
  // its own), so none of them is picked. One held already is no victim either.
  for (size_t i = 0; i < n; ++i) {
    const NodeId id = store->find(keys[i]);
    if (id == kNoNode) continue;
    StoreEntry &e = (*store)[id];
    if (e.res.tier >= 0 && (e.res.flags & kFlagHeld) == 0) {
      e.res.flags |= kFlagHeld;
      s.kept.push_back(id);
    }
  }
  // A picked victim leaves its tier's index until it moves or is let go: held blocks left in
  // the index would be walked past by every later victim search (quadratic in the burst).
  const auto pick = [&](int t) -> NodeId {
    const NodeId v = tiers[t].policy->victim(now, eligible());
    if (v != kNoNode) {
      tiers[t].policy->erase(v, EraseReason::moved);
      (*store)[v].res.flags |= kFlagHeld | kFlagUnindexed;
    }
    return v;
  };
  // One more free slot in tier t (counted in free_slots[t]), as make_room(t) makes it: room
  // one tier down first (the cascade), then t's victim goes there, or leaves the tiers when
  // no slot below could be had. False when t has no victim.
  const auto cascade = [&](auto &self, int t) -> bool {
    if (t < last && free_slots[t + 1] == 0) self(self, t + 1);
    const NodeId v = pick(t);
    if (v == kNoNode) return false;
    if (t < last && free_slots[t + 1] > 0) {
      --free_slots[t + 1];
      s.demote[t].push_back(v);
    } else {
      s.drop.push_back(v);
    }
    ++free_slots[t];
    return true;
  };
  for (size_t i = 0; i < n; ++i) {
    const NodeId known = store->find(keys[i]);
    if (known != kNoNode && (*store)[known].res.tier >= 0) continue;  // resident: needs no slot
    if (free_slots[0] > 0) {
      --free_slots[0];
      continue;
    }
    const NodeId v = tiers[0].policy->victim(now, eligible());
    if (v != kNoNode && keep_value(v) + kPlacementHysteresis < keep_value_as_admitted(known) && cascade(cascade, 0)) {
      --free_slots[0];
      continue;
    }
    int t = 1;
    while (t <= last && free_slots[t] == 0) ++t;
    if (t <= last) {
      --free_slots[t];
      continue;
    }
    // place()'s order: a cascade from the fastest tier, then the next; then the fastest tier
    // with a free slot (a cascade that found no victim in its own tier may have freed one below).
    bool room = false;
    for (int c = 0; c <= last && !room; ++c) room = cascade(cascade, c);
    t = 0;
    while (t <= last && free_slots[t] == 0) ++t;
    if (t > last) break;  // every block pinned or moving: place() reports it
    --free_slots[t];
  }
  // A key given twice in the batch was counted twice: harmless (a little more room is made).

  // Step 2.
  for (NodeId &slot : s.drop) {
    const NodeId v = slot;
    unhold(slot);
    StoreEntry &e = (*store)[v];
    if (e.res.tier >= 0 && e.res.pins == 0 && (e.res.flags & (kFlagMoving | kFlagAdmitting)) == 0) policy_drop(lk, v, /*wait=*/true);
  }
  // Step 3.
  std::string err;
  for (int t = last - 1; t >= 0; --t) {
    s.wave.clear();
    for (NodeId &slot : s.demote[t]) {
      const NodeId v = slot;
      unhold(slot);
      StoreEntry &e = (*store)[v];
      if (e.res.tier != t || e.res.pins != 0 || (e.res.flags & (kFlagMoving | kFlagAdmitting)) != 0) continue;
      SlotId d = kInvalidSlot;
      if (allocate_for_move(t + 1, &d) != CXLT_OK) continue;
      if (stopping || workers.empty()) {  // `workers` is cleared without mu once `stopping` is set
        move_now(lk, v, t + 1, d, &err);  // counted in migration_failures when it fails
        continue;
      }
      s.wave.push_back({v, e.res.generation()});
      schedule_move(v, t + 1, d);
    }
    if (s.wave.empty()) continue;
    moved_cv.wait(lk, [&] {
      for (const RoomScratch::Moving &w : s.wave) {
        const StoreEntry &e = (*store)[w.id];
        if (e.res.generation() == w.generation && (e.res.flags & kFlagMoving)) return false;
      }
      return true;
    });
  }
}

}  // namespace cxltier
