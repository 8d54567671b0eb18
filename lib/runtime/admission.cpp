// SPDX-License-Identifier: Apache-2.0
// Admission: finding or creating a block's state, placing it in the fastest tier with room
// (making room by cascading demotions and drops), the remote tier's fetch, and the replay's
// reference. Access, pins and moves are in access.cpp; stats and the consistency check in
// stats.cpp; opening in runtime_open.cpp; the migration protocol in migration.cpp.
#include "lib/runtime/runtime_impl.hpp"

#include "lib/runtime/flag_guard.hpp"
#include "lib/runtime/test_access.hpp"

#include "lib/core/assert.hpp"

#include <cxltier/error.hpp>

#include <algorithm>
#include <utility>
#include <vector>

namespace cxltier {

bool Runtime::Impl::eligible_fn(const void *ctx, NodeId id) noexcept {
  const Impl *self = static_cast<const Impl *>(ctx);
  const StoreEntry &e = (*self->store)[id];
  // A block being admitted is pinned by its admission meanwhile; its flag keeps it out even if
  // an engine's stray unpin took that pin.
  return e.res.pins == 0 && (e.res.flags & kFlagsInPassage) == 0;
}

// The state line eligible_fn reads (and the eviction after it): a victim's is rarely cached.
void Runtime::Impl::eligible_warm_fn(const void *ctx, NodeId id) noexcept {
  static_cast<const Impl *>(ctx)->prefetch_access(id, false);
}

void Runtime::Impl::ensure_policy_ids() {
  size_t need = store->id_limit();
  note_id_limit();
  if (need <= policy_ids) return;
  size_t n = std::max<size_t>({need, policy_ids * 2, 1024});
  // A bounded store issues no id at or past its capacity: the arrays stop there (plan_ids
  // reserved that much at open, and the open-time memory check counted that much).
  if (cfg.store_capacity != 0) n = std::min<size_t>(n, std::max<size_t>(need, cfg.store_capacity));
  for (TierRt &t : tiers) t.policy->reserve_ids(n);
  if (cfg.policy == PolicyKind::opt) opt_next.resize(n, UINT64_MAX);
  policy_ids = n;
}

NodeId Runtime::Impl::find_or_insert(const Key &key) {
  NodeId id = store->find(key);
  if (id != kNoNode) return id;
  NodeId forgotten = kNoNode;
  id = store->insert(key, &forgotten);
  if (forgotten != kNoNode)
    for (TierRt &t : tiers) t.policy->forget(forgotten);
  ensure_policy_ids();
  return id;
}


void Runtime::Impl::restore_or_reset(NodeId id, bool *restored_out) {
  StoreEntry &e = (*store)[id];
  bool seen = e.st.tick != 0;
  bool did_restore = false;
  if (seen) {
    if (cfg.persist) {
      did_restore = true;
      ++restored;
    } else {
      e.st = PolicyState{};
    }
  }
  if (restored_out) *restored_out = did_restore;
}

void Runtime::Impl::install(NodeId id, int tier, SlotId slot) {
  StoreEntry &e = (*store)[id];
  e.res.tier = static_cast<int8_t>(tier);
  e.res.set_slot(slot);
  e.res.flags = static_cast<uint8_t>(e.res.flags & ~kFlagReleased);
  store->set_resident(id, true);
  low_words.publish(id, e.res.generation(), true);
  tiers[tier].policy->insert(id, e.key, e.st);
  ++tiers[tier].admissions;
}

void Runtime::Impl::drop(NodeId id) {
  unplace(id, EraseReason::evicted);
  ++drops;
}

void Runtime::Impl::unplace(NodeId id, EraseReason why) {
  StoreEntry &e = (*store)[id];
  cxlt_assert(e.res.tier >= 0 && e.res.pins == 0 && (e.res.flags & kFlagMoving) == 0);
  TierRt &t = tiers[e.res.tier];
  t.policy->erase(id, why);
  cxlt_result_t r = t.pool->free(e.res.slot());
  cxlt_assert(r == CXLT_OK);
  (void)r;
  e.res.tier = -1;
  e.res.set_slot(kInvalidSlot);
  e.res.flags = static_cast<uint8_t>(e.res.flags & ~(kFlagReleased | kFlagPromoteQueued));
  store->set_resident(id, false);
  low_words.publish(id, e.res.generation(), false);
}

// Free one slot in `tier` by demoting its victim one tier down (making room there first when
// that tier is full), or dropping it from the last tier. Returns false when the tier has no
// block that may move (every one pinned or already moving), and, for room the runtime chose to
// make, when the demotion failed (counted in migration_failures). May release the lock while a
// demotion copies bytes.
bool Runtime::Impl::make_room(std::unique_lock<std::mutex> &lk, int tier, RoomFor why, int depth) {
  if (depth > static_cast<int>(tiers.size())) return false;
  if (tier < last_tier() && tiers[tier + 1].pool->full()) make_room(lk, tier + 1, why, depth + 1);
  NodeId v = tiers[tier].policy->victim(now, eligible());
  if (v == kNoNode) return false;
  if (tier == last_tier()) {
    policy_drop(lk, v, /*wait=*/true);  // written out first when the remote tier is on
    return true;
  }
  SlotId d = kInvalidSlot;
  cxlt_result_t r = why == RoomFor::chosen ? allocate_for_move(tier + 1, &d) : tiers[tier + 1].pool->allocate(&d);
  if (r == CXLT_ERROR_OUT_OF_TIER_MEMORY) {
    // Every tier below is full of pinned or moving blocks: the victim leaves the tiers here
    // (its policy state stays in the store; written out first when the remote tier is on).
    policy_drop(lk, v, /*wait=*/true);
    return true;
  }
  if (r != CXLT_OK) {
    if (why == RoomFor::chosen) return false;  // counted by allocate_for_move
    fail(r, "tier '", tiers[tier + 1].name, "' could not supply memory for a demotion: ", backend_last_error());
  }
  std::string err;
  if (!move_now(lk, v, tier + 1, d, &err)) {
    if (why == RoomFor::chosen) return false;  // counted by finish_move
    fail(CXLT_ERROR_BACKEND, "demoting a block from tier '", tiers[tier].name, "' to '", tiers[tier + 1].name,
         "' failed (the block stays where it was): ", err);
  }
  return true;
}

namespace {
thread_local std::vector<NodeId> t_passage;  // the blocks wait_out_passage waits for
}  // namespace

bool Runtime::Impl::wait_out_passage(std::unique_lock<std::mutex> &lk, size_t *found) {
  std::vector<NodeId> &seen = t_passage;
  seen.clear();
  store->for_each([&](NodeId id, const StoreEntry &e) {
    if (in_passage(e)) seen.push_back(id);
  });
  if (found) *found = seen.size();
  if (seen.empty()) return false;
  // An entry is looked up by id on each wake-up, as after every release of the lock.
  // A block that left its passage and entered another between two wake-ups is waited for
  // again: that only lengthens the wait by the second copy.
  auto still_in_passage = [&](NodeId id) { return in_passage((*store)[id]); };
  // A write-out to the remote tier may take up to its deadline (up to a minute, configured).
  const auto bound = cfg.remote.enabled ? kPassageWait + std::chrono::milliseconds(cfg.remote.deadline_ms) : kPassageWait;
  const bool all_left = moved_cv.wait_for(lk, bound, [&] {
    return stopping || std::none_of(seen.begin(), seen.end(), still_in_passage);
  });
  if (stopping) return false;
  // Past the bound, counting again pays only if some block has left its passage meanwhile: a
  // block whose flag a fault left set is then met alone on the next call, which refuses after
  // one more bound instead of waiting one in every round.
  return all_left || !std::all_of(seen.begin(), seen.end(), still_in_passage);
}

bool RuntimeTestAccess::set_held(Runtime &rt, const Key &key, bool held) {
  Runtime::Impl &m = *rt.impl_;
  std::lock_guard lk(m.mu);
  const NodeId id = m.store->find(key);
  if (id == kNoNode || (*m.store)[id].res.tier < 0) return false;
  uint8_t &flags = (*m.store)[id].res.flags;
  flags = static_cast<uint8_t>(held ? flags | kFlagHeld : flags & ~kFlagHeld);
  m.moved_cv.notify_all();
  return true;
}

void RuntimeTestAccess::set_remote(Runtime &rt, std::unique_ptr<RemoteTier> remote) {
  const std::lock_guard lk(rt.impl_->mu);
  rt.impl_->remote = std::move(remote);
}

// Put a non-resident block into the fastest tier with a free slot; when every tier is full,
// make room (cascading demotions, dropping from the last tier) and retry. When no block may
// move but some are only in passage (a copy, another call's room or admission), it waits for
// them and tries again, so that an admission beside a busy mover or another prefill is not
// refused for room that is about to exist.
int Runtime::Impl::place(std::unique_lock<std::mutex> &lk, NodeId id) {
  int prepared = -1;  // tier whose policy saw before_admit (ARC adapts there, once)
  // Into a full fastest tier: its victim goes down a tier (a copy in this thread, the lock
  // released) when it keeps less than the incoming block is expected to, which is the block's
  // keep value as admitted (docs/runtime.md, "Placement quality"). A demotion that fails
  // leaves the victim where it was and the admission goes on as below.
  if (last_tier() > 0 && tiers[0].pool->full()) {
    tiers[0].policy->before_admit(id, (*store)[id].key);
    prepared = 0;
    const NodeId v = tiers[0].policy->victim(now, eligible());
    if (v != kNoNode && keep_value(v) + kPlacementHysteresis < keep_value(id) && make_room(lk, 0, RoomFor::chosen)) {
      // The slot is the admission's own: a backend failure here reaches the caller.
      SlotId s = kInvalidSlot;
      const cxlt_result_t r = tiers[0].pool->allocate(&s);
      if (r == CXLT_OK) {
        install(id, 0, s);
        return 0;
      }
      if (r != CXLT_ERROR_OUT_OF_TIER_MEMORY)
        fail(r, "tier '", tiers[0].name, "' could not supply memory: ", backend_last_error());
    }
  }
  for (int attempt = 0; attempt < 16; ++attempt) {
    for (int t = 0; t <= last_tier(); ++t) {
      SlotId s = kInvalidSlot;
      cxlt_result_t r = tiers[t].pool->allocate(&s);
      if (r == CXLT_OK) {
        if (prepared != t) tiers[t].policy->before_admit(id, (*store)[id].key);
        install(id, t, s);
        return t;
      }
      if (r != CXLT_ERROR_OUT_OF_TIER_MEMORY)
        fail(r, "tier '", tiers[t].name, "' could not supply memory: ", backend_last_error());
    }
    if (prepared != 0) {
      tiers[0].policy->before_admit(id, (*store)[id].key);
      prepared = 0;
    }
    bool progress = false;
    for (int t = 0; t <= last_tier() && !progress; ++t) progress = make_room(lk, t, RoomFor::needed);
    // A cascade that found no victim in its own tier may still have freed a slot below it.
    for (int t = 0; t <= last_tier() && !progress; ++t) progress = !tiers[t].pool->full();
    size_t in_passage = 0;
    if (!progress) progress = wait_out_passage(lk, &in_passage);
    if (!progress && stopping) fail(CXLT_ERROR_OUT_OF_TIER_MEMORY, "every tier is full and the runtime is closing");
    if (!progress)
      fail(CXLT_ERROR_OUT_OF_TIER_MEMORY, "every tier is full and every block in it is pinned",
           in_passage > 0 ? " or stayed in passage (moving, or held by another call) past the wait's bound" : "", " (",
           store->size(), " states, ", (*store)[id].key.hex(), " not admitted)");
  }
  fail(CXLT_ERROR_OUT_OF_TIER_MEMORY, "could not keep a free slot in 16 tries: other threads took every slot made free, or blocks stayed moving");
}

// The remote tier's fetch (remote.hpp). The block was just placed and is flagged admitting; it
// is pinned while the lock is released so that no make_room picks it as a victim, nor a mover
// moves it, while the client writes its slot. A miss leaves garbage in the slot, which is fine:
// the caller is told placed = true and fills it.
bool Runtime::Impl::fetch_remote(std::unique_lock<std::mutex> &lk, NodeId id) {
  StoreEntry &e = (*store)[id];
  if (!remote || e.res.tier < 0 || tiers[e.res.tier].no_bytes) return false;
  void *dst = tiers[e.res.tier].pool->address(e.res.slot());
  if (dst == nullptr) return false;
  const Key key = e.key;
  ++e.res.pins;
  lk.unlock();
  const bool ok = remote->fetch(key, dst, block_bytes);
  relock(lk);
  --(*store)[id].res.pins;
  return ok;
}

namespace {
// [mu held] Places block `id`, resident nowhere and its state updated for this admission, in
// the fastest tier with room (making room when every tier is full), flagged admitting while
// the lock is released; then the remote tier fills its slot when it holds the block. True when
// it did (the admission is then not a miss). On an exception the flag is cleared, `undo` runs
// (flag_guard.hpp) and waiters are woken.
template <class Undo>
bool place_admitted(Runtime::Impl &m, std::unique_lock<std::mutex> &lk, NodeId id, Undo undo) {
  FlagGuard admitting(m, id, kFlagAdmitting, std::move(undo));
  m.store->set_resident(id, true);  // never forgotten while being placed
  m.place(lk, id);
  const bool fetched = m.fetch_remote(lk, id);
  admitting.done();
  return fetched;
}
}  // namespace

// --- Runtime ---------------------------------------------------------------------------------

Block Runtime::admit(const Key &key, bool *placed, bool pin) {
  Impl &m = *impl_;
  if (placed) *placed = false;
  std::unique_lock lk = m.lock();
  m.drain_accesses();
  // Find the key, and wait while another thread admits it (the lock is released while it is
  // placed) or, for a pin, while a copy moves it. After every wait start over: meanwhile the
  // block may have been dropped, its state forgotten and its NodeId given to another key. A
  // StoreEntry reference is taken after the last wait.
  NodeId id = kNoNode;
  while (true) {
    id = m.find_or_insert(key);
    const StoreEntry &w = (*m.store)[id];
    if ((w.res.flags & kFlagAdmitting) || (pin && w.res.tier >= 0 && (w.res.flags & kFlagMoving))) {
      m.wait_moved(lk, "admit");
      continue;
    }
    break;
  }
  StoreEntry &e = (*m.store)[id];
  if (e.res.tier >= 0) {
    if (pin) {
      if (e.res.pins == 0xffff) fail(CXLT_ERROR_INVALID_ARGUMENT, "admit: block ", key.hex(), " is pinned 65535 times already");
      ++e.res.pins;
      e.res.flags = static_cast<uint8_t>(e.res.flags & ~kFlagReleased);
    }
    return m.block_of(id);
  }
  const PolicyState before = e.st;  // a refused admission leaves the state as it found it
  bool restored = false;
  m.restore_or_reset(id, &restored);
  e.st.last_access = m.now;  // admission is a reference for recency (not for the score)
  e.st.tick = ++m.tick;
  // The remote tier: a verified copy fills the new slot and the admission is not a miss.
  const bool fetched = place_admitted(m, lk, id, UndoAdmission{m, id, before, restored});
  if (!fetched) ++m.misses;
  if (pin) ++(*m.store)[id].res.pins;
  if (!m.cfg.synchronous) m.mover_cv.notify_one();
  if (placed) *placed = !fetched;
  return m.block_of(id);
}

ReferenceResult Runtime::reference(const Key &key, float attention, uint64_t next_use) {
  Impl &m = *impl_;
  if (!(attention >= 0.0f && attention <= 1.0f))
    fail(CXLT_ERROR_INVALID_ARGUMENT, "reference: attention = ", attention, " is outside [0, 1]");
  std::unique_lock lk = m.lock();
  m.drain_accesses();
  return m.reference_locked(lk, key, attention, next_use);
}

void Runtime::reference_many(const Key *keys, const float *attention, const uint64_t *next_use, size_t n,
                             ReferenceResult *out) {
  Impl &m = *impl_;
  if (n == 0) return;
  if (keys == nullptr || out == nullptr) fail(CXLT_ERROR_INVALID_ARGUMENT, "reference_many: keys and out must not be null");
  if (attention != nullptr)
    for (size_t i = 0; i < n; ++i)
      if (!(attention[i] >= 0.0f && attention[i] <= 1.0f))
        fail(CXLT_ERROR_INVALID_ARGUMENT, "reference_many: attention[", i, "] = ", attention[i], " is outside [0, 1]");
  std::unique_lock lk = m.lock();
  m.drain_accesses();
  // Three stages ahead of the reference being taken: the key's home slot, then the entry the
  // slot names, then the index lines its access or admission writes (each once the line before
  // it has had time to arrive). A hint that went stale (the store grew) costs nothing.
  // The id a slot named is kept (a ring of kEntryAhead) for the third stage.
  constexpr size_t kSlotAhead = 12, kEntryAhead = 6, kIndexAhead = 3;
  // The first references get the same stages before the loop, all of them in flight at once
  // (a request's references are a few dozen: without this, a third of them would wait for each
  // of their lines in turn).
  NodeId ahead[kEntryAhead];
  for (size_t i = 0; i < std::min(n, kSlotAhead); ++i) m.store->prefetch_home(keys[i]);
  for (size_t i = 0; i < std::min(n, kEntryAhead); ++i) {
    ahead[i] = m.store->peek_home(keys[i]);
    if (ahead[i] != kNoNode) m.prefetch_access(ahead[i], false);
  }
  for (size_t i = 0; i < std::min(n, kIndexAhead); ++i)
    if (ahead[i] != kNoNode) m.prefetch_reference(ahead[i]);
  for (size_t i = 0; i < n; ++i) {
    if (i + kSlotAhead < n) m.store->prefetch_home(keys[i + kSlotAhead]);
    if (i + kEntryAhead < n) {
      const NodeId id = m.store->peek_home(keys[i + kEntryAhead]);
      ahead[(i + kEntryAhead) % kEntryAhead] = id;
      if (id != kNoNode) m.prefetch_access(id, false);
    }
    if (i + kIndexAhead < n) {
      const NodeId id = ahead[(i + kIndexAhead) % kEntryAhead];
      if (id != kNoNode) m.prefetch_reference(id);
    }
    out[i] = m.reference_locked(lk, keys[i], attention ? attention[i] : 1.0f, next_use ? next_use[i] : UINT64_MAX);
  }
}

ReferenceResult Runtime::Impl::reference_locked(std::unique_lock<std::mutex> &lk, const Key &key, float attention,
                                                uint64_t next_use) {
  Impl &m = *this;
  ReferenceResult res;
  NodeId id = m.find_or_insert(key);
  while ((*m.store)[id].res.flags & kFlagAdmitting) {  // another thread places it with the lock released
    m.wait_moved(lk, "reference");
    id = m.find_or_insert(key);
  }
  StoreEntry &e = (*m.store)[id];
  if (e.res.tier >= 0) {
    res.hit_tier = e.res.tier;
    if (m.cfg.policy == PolicyKind::opt) {  // every tier's policy: it may be demoted into another
      m.opt_next[id] = next_use;
      for (TierRt &t : m.tiers) t.policy->set_next_use(id, next_use);
    }
    m.note_access(id, attention);
    if (m.cfg.synchronous && m.cfg.promotion != PromotionRule::never) m.promote_sync(lk, id);
    return res;
  }
  ++m.misses;
  m.restore_or_reset(id, &res.restored);
  // The reference itself: the state is updated before the block is placed.
  uint64_t idle = m.now >= e.st.last_access ? m.now - e.st.last_access : 0;
  e.st.score = lrfu_access(e.st.score, idle, attention, m.cfg.lrfu);
  e.st.last_access = m.now;
  ++e.st.accesses;
  e.st.tick = ++m.tick;
  if (m.cfg.policy == PolicyKind::opt) {
    m.opt_next[id] = next_use;
    for (TierRt &t : m.tiers) t.policy->set_next_use(id, next_use);
  }
  // When every tier is full the last tier's policy may keep the block out (OPT: its next use is
  // the farthest): it is admitted and evicted at once.
  bool room = false;
  for (const TierRt &t : m.tiers) room = room || !t.pool->full();
  if (!room && m.tiers[m.last_tier()].policy->bypass(id, m.now, m.eligible())) {
    ++m.tiers[m.last_tier()].admissions;
    ++m.drops;
    m.store->restate(id);  // resident nowhere, with the state this reference gave it
    return res;
  }
  // A failed placement undoes only the residency mark: the reference's state update and its
  // miss stay counted.
  auto unresident = [&m, id](StoreEntry &f) noexcept {
    if (f.res.tier < 0) m.store->set_resident(id, false);
  };
  if (place_admitted(m, lk, id, unresident)) {  // the remote tier had it: not a miss after all
    --m.misses;
    res.remote_hit = true;
  }
  ++m.accesses;
  res.admitted = true;
  return res;
}

}  // namespace cxltier
