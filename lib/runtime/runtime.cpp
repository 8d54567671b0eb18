// SPDX-License-Identifier: Apache-2.0
// The tiered runtime: admission, access, pin/unpin, release, lookup, the decode clock, stats.
// Opening (tier resolution, backends, pools, the checkpoint) is in runtime_open.cpp; moving
// bytes between tiers (the migration protocol) in migration.cpp.
#include "runtime/runtime_impl.hpp"

#include "core/assert.hpp"

#include <cxltier/error.hpp>
#include <cxltier/units.hpp>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>

namespace cxltier {

namespace {
[[noreturn]] void not_found(const Key &key, const char *what) {
  fail(CXLT_ERROR_NOT_FOUND, what, ": block ", key.hex(), " is not resident in any tier");
}
}  // namespace

bool Runtime::Impl::eligible_fn(const void *ctx, NodeId id) noexcept {
  const Impl *self = static_cast<const Impl *>(ctx);
  const StoreEntry &e = (*self->store)[id];
  return e.pins == 0 && (e.flags & (kFlagMoving | kFlagHeld)) == 0;
}

void Runtime::Impl::ensure_policy_ids() {
  size_t need = store->id_limit();
  residency.ensure(need);
  if (need <= policy_ids) return;
  size_t n = std::max<size_t>({need, policy_ids * 2, 1024});
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

uint64_t Runtime::Impl::handle_of(NodeId id) const noexcept {
  return (static_cast<uint64_t>((*store)[id].generation) << 32) | id;
}

Block Runtime::Impl::block_of(NodeId id) const noexcept {
  const StoreEntry &e = (*store)[id];
  Block b;
  b.tier = e.tier;
  b.bytes = block_bytes;
  b.handle = handle_of(id);
  b.data = e.tier >= 0 ? tiers[e.tier].pool->address(e.slot) : nullptr;
  return b;
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
  residency.ensure(static_cast<size_t>(id) + 1);  // done when the id was issued (ensure_policy_ids): a no-op
  StoreEntry &e = (*store)[id];
  e.tier = static_cast<int8_t>(tier);
  e.slot = slot;
  e.flags = static_cast<uint8_t>(e.flags & ~kFlagReleased);
  store->set_resident(id, true);
  residency.publish(id, e.generation, true);
  tiers[tier].policy->insert(id, e.key, e.st);
  ++tiers[tier].admissions;
}

void Runtime::Impl::drop(NodeId id) {
  unplace(id, EraseReason::evicted);
  ++drops;
}

void Runtime::Impl::unplace(NodeId id, EraseReason why) {
  StoreEntry &e = (*store)[id];
  cxlt_assert(e.tier >= 0 && e.pins == 0 && (e.flags & kFlagMoving) == 0);
  TierRt &t = tiers[e.tier];
  t.policy->erase(id, why);
  cxlt_result_t r = t.pool->free(e.slot);
  cxlt_assert(r == CXLT_OK);
  (void)r;
  e.tier = -1;
  e.slot = kInvalidSlot;
  e.flags = static_cast<uint8_t>(e.flags & ~(kFlagReleased | kFlagPromoteQueued));
  store->set_resident(id, false);
  residency.publish(id, e.generation, false);
}

// Free one slot in `tier` by demoting its victim one tier down (making room there first when
// that tier is full), or dropping it from the last tier. Returns false when the tier has no
// block that may move (every one pinned or already moving). May release the lock while a
// demotion copies bytes.
bool Runtime::Impl::make_room(std::unique_lock<std::mutex> &lk, int tier, NodeId incoming, int depth) {
  (void)incoming;
  if (depth > static_cast<int>(tiers.size())) return false;
  if (tier < last_tier() && tiers[tier + 1].pool->full()) make_room(lk, tier + 1, kNoNode, depth + 1);
  NodeId v = tiers[tier].policy->victim(now, eligible());
  if (v == kNoNode) return false;
  if (tier == last_tier()) {
    policy_drop(lk, v, /*wait=*/true);  // written out first when the remote tier is on
    return true;
  }
  SlotId d = kInvalidSlot;
  cxlt_result_t r = tiers[tier + 1].pool->allocate(&d);
  if (r == CXLT_ERROR_OUT_OF_TIER_MEMORY) {
    // Every tier below is full of pinned or moving blocks: the victim leaves the tiers here
    // (its policy state stays in the store; written out first when the remote tier is on).
    policy_drop(lk, v, /*wait=*/true);
    return true;
  }
  if (r != CXLT_OK)
    fail(r, "tier '", tiers[tier + 1].name, "' could not supply memory for a demotion: ", backend_last_error());
  std::string err;
  if (!move_now(lk, v, tier + 1, d, &err))
    fail(CXLT_ERROR_BACKEND, "demoting a block from tier '", tiers[tier].name, "' to '", tiers[tier + 1].name,
         "' failed (the block stays where it was): ", err);
  return true;
}

// Put a non-resident block into the fastest tier with a free slot; when every tier is full,
// make room (cascading demotions, dropping from the last tier) and retry.
int Runtime::Impl::place(std::unique_lock<std::mutex> &lk, NodeId id) {
  int prepared = -1;  // tier whose policy saw before_admit (ARC adapts there, once)
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
    for (int t = 0; t <= last_tier() && !progress; ++t) progress = make_room(lk, t, id, 0);
    // A cascade that found no victim in its own tier may still have freed a slot below it.
    for (int t = 0; t <= last_tier() && !progress; ++t) progress = !tiers[t].pool->full();
    if (!progress)
      fail(CXLT_ERROR_OUT_OF_TIER_MEMORY, "every tier is full and every block in it is pinned or moving (",
           store->size(), " states, ", (*store)[id].key.hex(), " not admitted)");
  }
  fail(CXLT_ERROR_OUT_OF_TIER_MEMORY, "could not keep a free slot: other threads took every slot made free");
}

void Runtime::Impl::note_access(NodeId id, float attention) noexcept {
  StoreEntry &e = (*store)[id];
  uint64_t idle = now >= e.st.last_access ? now - e.st.last_access : 0;
  e.st.score = lrfu_access(e.st.score, idle, attention, cfg.lrfu);
  e.st.last_access = now;
  ++e.st.accesses;
  e.st.tick = ++tick;
  e.flags = static_cast<uint8_t>(e.flags & ~kFlagReleased);
  TierRt &t = tiers[e.tier];
  if ((e.flags & kFlagMoving) == 0) t.policy->access(id, e.st);
  ++t.hits;
  ++accesses;
  if (e.tier > 0 && cfg.promotion != PromotionRule::never && !cfg.synchronous && (e.flags & kFlagPromoteQueued) == 0 &&
      promote_queue.size() < 65536) {
    e.flags |= kFlagPromoteQueued;
    promote_queue.push_back(id);
  }
}

// The remote tier's fetch (remote.hpp). The block was just placed and is flagged admitting; it
// is pinned while the lock is released so that no make_room picks it as a victim, nor a mover
// moves it, while the client writes its slot. A miss leaves garbage in the slot, which is fine:
// the caller is told placed = true and fills it.
bool Runtime::Impl::fetch_remote(std::unique_lock<std::mutex> &lk, NodeId id) {
  StoreEntry &e = (*store)[id];
  if (!remote || e.tier < 0 || tiers[e.tier].no_bytes) return false;
  void *dst = tiers[e.tier].pool->address(e.slot);
  if (dst == nullptr) return false;
  const Key key = e.key;
  ++e.pins;
  lk.unlock();
  const bool ok = remote->fetch(key, dst, block_bytes);
  lk.lock();
  --(*store)[id].pins;
  return ok;
}

// --- Runtime ---------------------------------------------------------------------------------

Runtime::Runtime(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Block Runtime::admit(const Key &key, bool *placed, bool pin) {
  Impl &m = *impl_;
  if (placed) *placed = false;
  std::unique_lock lk(m.mu);
  m.drain_accesses();
  // Find the key, and wait while another thread admits it (the lock is released while it is
  // placed) or, for a pin, while a copy moves it. After every wait start over: meanwhile the
  // block may have been dropped, its state forgotten and its NodeId given to another key, or the
  // store's entries moved when it grew. A StoreEntry reference is taken after the last wait.
  NodeId id = kNoNode;
  while (true) {
    id = m.find_or_insert(key);
    const StoreEntry &w = (*m.store)[id];
    if ((w.flags & kFlagAdmitting) || (pin && w.tier >= 0 && (w.flags & kFlagMoving))) {
      m.moved_cv.wait(lk);
      continue;
    }
    break;
  }
  StoreEntry &e = (*m.store)[id];
  if (e.tier >= 0) {
    if (pin) {
      if (e.pins == 0xffff) fail(CXLT_ERROR_INVALID_ARGUMENT, "admit: block ", key.hex(), " is pinned 65535 times already");
      ++e.pins;
      e.flags = static_cast<uint8_t>(e.flags & ~kFlagReleased);
    }
    return m.block_of(id);
  }
  const PolicyState before = e.st;  // a refused admission leaves the state as it found it
  bool restored = false;
  m.restore_or_reset(id, &restored);
  e.st.last_access = m.now;  // admission is a reference for recency (not for the score)
  e.st.tick = ++m.tick;
  e.flags |= kFlagAdmitting;
  m.store->set_resident(id, true);  // never forgotten while being placed
  try {
    m.place(lk, id);
  } catch (...) {
    StoreEntry &f = (*m.store)[id];
    f.flags = static_cast<uint8_t>(f.flags & ~kFlagAdmitting);
    if (f.tier < 0) {
      f.st = before;
      if (restored) --m.restored;
      m.store->set_resident(id, false);
      if (before.tick == 0 && f.pins == 0 && f.flags == 0) m.store->erase(id);  // a key never seen: no state at all
    }
    m.moved_cv.notify_all();
    throw;
  }
  // The remote tier: a verified copy fills the new slot and the admission is not a miss.
  const bool fetched = m.fetch_remote(lk, id);
  if (!fetched) ++m.misses;
  StoreEntry &f = (*m.store)[id];
  f.flags = static_cast<uint8_t>(f.flags & ~kFlagAdmitting);
  if (pin) ++f.pins;
  m.moved_cv.notify_all();
  if (!m.cfg.synchronous) m.mover_cv.notify_one();
  if (placed) *placed = !fetched;
  return m.block_of(id);
}

void Runtime::access(const Key *keys, const float *attention, size_t n) {
  Impl &m = *impl_;
  if (n != 0 && keys == nullptr) fail(CXLT_ERROR_INVALID_ARGUMENT, "access: keys is NULL");
  std::unique_lock lk(m.mu);
  m.drain_accesses();
  // Check the whole batch first: nothing is applied unless every entry is good.
  m.scratch.clear();
  for (size_t i = 0; i < n; ++i) {
    if (attention && !(attention[i] >= 0.0f && attention[i] <= 1.0f))
      fail(CXLT_ERROR_INVALID_ARGUMENT, "access: attention[", i, "] = ", attention[i], " is outside [0, 1]");
    NodeId id = m.store->find(keys[i]);
    if (id == kNoNode || (*m.store)[id].tier < 0) not_found(keys[i], "access");
    m.scratch.push_back(id);
  }
  for (size_t i = 0; i < n; ++i) {
    if (i + 16 < n) m.prefetch_access(m.scratch[i + 16], false);
    if (i + 8 < n) m.prefetch_access(m.scratch[i + 8], true);
    m.note_access(m.scratch[i], attention ? attention[i] : 1.0f);
  }
  if (m.cfg.synchronous) {
    // promote_sync may release the lock while it copies, and another thread's access() reuses
    // m.scratch: find each key again (a block dropped meanwhile is simply not promoted).
    if (m.cfg.promotion != PromotionRule::never)
      for (size_t i = 0; i < n; ++i) {
        const NodeId id = m.store->find(keys[i]);
        if (id != kNoNode && (*m.store)[id].tier >= 0) m.promote_sync(lk, id);
      }
  } else if (!m.promote_queue.empty()) {
    m.mover_cv.notify_one();
  }
}

void Runtime::access_handles(const uint64_t *handles, const float *attention, size_t n) {
  Impl &m = *impl_;
  if (n != 0 && handles == nullptr) fail(CXLT_ERROR_INVALID_ARGUMENT, "access_handles: handles is NULL");
  if (m.log_access_handles(handles, attention, n)) return;  // recorded without the lock (access_log.cpp)
  std::unique_lock lk(m.mu);
  m.drain_accesses();
  for (size_t i = 0; i < n; ++i) {
    if (attention && !(attention[i] >= 0.0f && attention[i] <= 1.0f))
      fail(CXLT_ERROR_INVALID_ARGUMENT, "access_handles: attention[", i, "] = ", attention[i], " is outside [0, 1]");
    NodeId id = static_cast<NodeId>(handles[i] & 0xffffffffu);
    uint32_t gen = static_cast<uint32_t>(handles[i] >> 32);
    if (!m.store->valid(id) || (*m.store)[id].generation != gen || (*m.store)[id].tier < 0)
      fail(CXLT_ERROR_NOT_FOUND, "access_handles: handle[", i, "] = ", handles[i],
           " is stale (its block was dropped or forgotten) or was never issued");
  }
  for (size_t i = 0; i < n; ++i) m.note_access(static_cast<NodeId>(handles[i] & 0xffffffffu), attention ? attention[i] : 1.0f);
  if (m.cfg.synchronous) {
    if (m.cfg.promotion != PromotionRule::never)
      for (size_t i = 0; i < n; ++i) {
        // Checked again: an earlier promote_sync may have released the lock.
        const NodeId id = static_cast<NodeId>(handles[i] & 0xffffffffu);
        if (m.store->valid(id) && (*m.store)[id].generation == static_cast<uint32_t>(handles[i] >> 32))
          m.promote_sync(lk, id);
      }
  } else if (!m.promote_queue.empty()) {
    m.mover_cv.notify_one();
  }
}

ReferenceResult Runtime::reference(const Key &key, float attention, uint64_t next_use) {
  Impl &m = *impl_;
  if (!(attention >= 0.0f && attention <= 1.0f))
    fail(CXLT_ERROR_INVALID_ARGUMENT, "reference: attention = ", attention, " is outside [0, 1]");
  std::unique_lock lk(m.mu);
  m.drain_accesses();
  ReferenceResult res;
  NodeId id = m.find_or_insert(key);
  while ((*m.store)[id].flags & kFlagAdmitting) {  // another thread places it with the lock released
    m.moved_cv.wait(lk);
    id = m.find_or_insert(key);
  }
  StoreEntry &e = (*m.store)[id];
  if (e.tier >= 0) {
    res.hit_tier = e.tier;
    if (m.cfg.policy == PolicyKind::opt) {
      m.opt_next[id] = next_use;
      m.tiers[e.tier].policy->set_next_use(id, next_use);
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
    // Belady with the incoming block admitted first: when every tier is full and the incoming
    // block's next use is farther than the last tier's victim's, it is the one evicted.
    bool room = false;
    for (TierRt &t : m.tiers) room = room || !t.pool->full();
    if (!room) {
      NodeId v = m.tiers[m.last_tier()].policy->victim(m.now, m.eligible());
      const uint64_t never = UINT64_MAX, vnext = v == kNoNode ? 0 : m.opt_next[v];
      if (v != kNoNode && (next_use > vnext || (next_use == never && vnext == never))) {
        ++m.tiers[m.last_tier()].admissions;  // admitted and evicted at once
        ++m.drops;
        return res;
      }
    }
  }
  e.flags |= kFlagAdmitting;
  m.store->set_resident(id, true);
  try {
    m.place(lk, id);
  } catch (...) {
    StoreEntry &f = (*m.store)[id];
    f.flags = static_cast<uint8_t>(f.flags & ~kFlagAdmitting);
    if (f.tier < 0) m.store->set_resident(id, false);
    m.moved_cv.notify_all();
    throw;
  }
  if (m.fetch_remote(lk, id)) {  // the remote tier had it: not a miss after all
    --m.misses;
    res.remote_hit = true;
  }
  (*m.store)[id].flags = static_cast<uint8_t>((*m.store)[id].flags & ~kFlagAdmitting);
  m.moved_cv.notify_all();
  ++m.accesses;
  res.admitted = true;
  return res;
}

bool Runtime::lookup(const Key &key, Block *out) {
  Impl &m = *impl_;
  std::lock_guard lk(m.mu);
  m.drain_accesses();
  NodeId id = m.store->find(key);
  if (id == kNoNode || (*m.store)[id].tier < 0) return false;
  if (out) *out = m.block_of(id);
  return true;
}

Block Runtime::move(const Key &key, int tier, bool wait) {
  Impl &m = *impl_;
  std::unique_lock lk(m.mu);
  m.drain_accesses();
  if (tier < 0 || tier > m.last_tier())
    fail(CXLT_ERROR_INVALID_ARGUMENT, "move: tier ", tier, " does not exist (", m.tiers.size(), " tiers)");
  NodeId id = m.store->find(key);
  while (id != kNoNode && ((*m.store)[id].flags & (kFlagMoving | kFlagAdmitting))) {
    m.moved_cv.wait(lk);
    id = m.store->find(key);
  }
  if (id == kNoNode || (*m.store)[id].tier < 0) not_found(key, "move");
  StoreEntry &e = (*m.store)[id];
  if (e.tier == tier) return m.block_of(id);
  if (e.pins != 0) fail(CXLT_ERROR_BUSY, "move: block ", key.hex(), " is pinned");
  SlotId d = kInvalidSlot;
  cxlt_result_t r = m.tiers[tier].pool->allocate(&d);
  if (r == CXLT_ERROR_OUT_OF_TIER_MEMORY) {
    // Making room releases the lock while a demotion copies. The block is held (kFlagHeld: no
    // victim, not moved, release(forget) waits) rather than pinned, so that a pin the engine
    // takes meanwhile is its own and is seen below, and a stray unpin is still refused.
    e.flags |= kFlagHeld;
    auto unhold = [&] {
      (*m.store)[id].flags = static_cast<uint8_t>((*m.store)[id].flags & ~kFlagHeld);
      m.moved_cv.notify_all();
    };
    try {
      m.make_room(lk, tier, kNoNode, 0);
    } catch (...) {
      unhold();
      throw;
    }
    unhold();
    const StoreEntry &after = (*m.store)[id];
    if (after.tier < 0 || (after.flags & kFlagMoving)) not_found(key, "move");
    if (after.pins != 0) fail(CXLT_ERROR_BUSY, "move: block ", key.hex(), " was pinned while room was made for it");
    if (after.tier == tier) return m.block_of(id);
    r = m.tiers[tier].pool->allocate(&d);
  }
  if (r != CXLT_OK)
    fail(r == CXLT_ERROR_OUT_OF_TIER_MEMORY ? r : CXLT_ERROR_BACKEND, "move: tier '", m.tiers[tier].name,
         "' has no slot to give: ", r == CXLT_ERROR_OUT_OF_TIER_MEMORY ? "every block in it is pinned or moving" : backend_last_error());
  if (!wait || m.cfg.synchronous) {
    if (m.cfg.synchronous) {
      std::string err;
      if (!m.move_now(lk, id, tier, d, &err)) fail(CXLT_ERROR_BACKEND, "move: copy failed (the block stays where it was): ", err);
      return m.block_of(id);
    }
    m.schedule_move(id, tier, d);
    return m.block_of(id);
  }
  std::string err;
  if (!m.move_now(lk, id, tier, d, &err)) fail(CXLT_ERROR_BACKEND, "move: copy failed (the block stays where it was): ", err);
  return m.block_of(id);
}

Block Runtime::pin(const Key &key) {
  Impl &m = *impl_;
  std::unique_lock lk(m.mu);
  m.drain_accesses();
  NodeId id = m.store->find(key);
  while (id != kNoNode && ((*m.store)[id].flags & (kFlagMoving | kFlagAdmitting))) {
    m.moved_cv.wait(lk);  // protocol step 4: pins wait for a copy in flight, then pin where it landed
    id = m.store->find(key);
  }
  if (id == kNoNode || (*m.store)[id].tier < 0) not_found(key, "pin");
  StoreEntry &e = (*m.store)[id];
  if (e.pins == 0xffff) fail(CXLT_ERROR_INVALID_ARGUMENT, "pin: block ", key.hex(), " is pinned 65535 times already");
  ++e.pins;
  e.flags = static_cast<uint8_t>(e.flags & ~kFlagReleased);
  return m.block_of(id);
}

void Runtime::unpin(const Key &key) {
  Impl &m = *impl_;
  std::lock_guard lk(m.mu);
  m.drain_accesses();
  NodeId id = m.store->find(key);
  if (id == kNoNode || (*m.store)[id].tier < 0) not_found(key, "unpin");
  StoreEntry &e = (*m.store)[id];
  if (e.pins == 0) fail(CXLT_ERROR_INVALID_ARGUMENT, "unpin: block ", key.hex(), " is not pinned");
  --e.pins;
}

void Runtime::release(const Key &key, bool forget) {
  Impl &m = *impl_;
  std::unique_lock lk(m.mu);
  m.drain_accesses();
  NodeId id = m.store->find(key);
  while (forget && id != kNoNode && ((*m.store)[id].flags & (kFlagMoving | kFlagAdmitting | kFlagHeld))) {
    m.moved_cv.wait(lk);
    id = m.store->find(key);
  }
  if (id == kNoNode || (*m.store)[id].tier < 0) not_found(key, "release");
  StoreEntry &e = (*m.store)[id];
  if (e.pins != 0) fail(CXLT_ERROR_BUSY, "release: block ", key.hex(), " is pinned (", e.pins, " pins)");
  if (!forget) {
    if (e.flags & kFlagReleased) fail(CXLT_ERROR_INVALID_ARGUMENT, "release: block ", key.hex(), " was already released");
    e.flags |= kFlagReleased;
    return;
  }
  m.unplace(id, EraseReason::released);
}

bool Runtime::policy_state(const Key &key, cxlt_policy_state_t *out) {
  Impl &m = *impl_;
  std::lock_guard lk(m.mu);
  m.drain_accesses();
  NodeId id = m.store->find(key);
  if (id == kNoNode || (*m.store)[id].st.tick == 0) return false;
  const StoreEntry &e = (*m.store)[id];
  if (out) {
    out->score = lrfu_effective_score(e.st.score, m.now >= e.st.last_access ? m.now - e.st.last_access : 0, m.cfg.lrfu);
    out->last_access_step = e.st.last_access;
    out->accesses = e.st.accesses;
    out->tier = e.tier;
  }
  return true;
}

void Runtime::step() {
  Impl &m = *impl_;
  std::unique_lock lk(m.mu);
  m.drain_accesses();
  ++m.now;
  if (m.cfg.checkpoint_every_steps && !m.cfg.store_path.empty() && m.now - m.checkpoint_at_step >= m.cfg.checkpoint_every_steps) {
    m.checkpoint_at_step = m.now;
    m.write_checkpoint_now(lk);
  }
}

uint64_t Runtime::current_step() const {
  std::lock_guard lk(impl_->mu);
  return impl_->now;
}

bool Runtime::wait_idle(int64_t timeout_ms) {
  Impl &m = *impl_;
  std::unique_lock lk(m.mu);
  return m.wait_settled(lk, timeout_ms);  // copies done and the tiers' order reconciled (placement.cpp)
}

void Runtime::checkpoint() {
  Impl &m = *impl_;
  if (m.cfg.store_path.empty())
    fail(CXLT_ERROR_INVALID_ARGUMENT, "checkpoint: no store.path is configured (persistence is off)");
  std::unique_lock lk(m.mu);
  m.drain_accesses();
  m.write_checkpoint_now(lk);
}

cxlt_stats_t Runtime::stats() const {
  const Impl &m = *impl_;
  std::lock_guard lk(m.mu);
  const_cast<Impl &>(m).drain_accesses();  // recorded accesses count (applying them is logically const)
  cxlt_stats_t s{};
  s.size = sizeof s;
  s.version = CXLT_STATS_VERSION;
  s.tier_count = static_cast<uint32_t>(m.tiers.size());
  for (size_t i = 0; i < m.tiers.size(); ++i) {
    const TierRt &t = m.tiers[i];
    s.tier[i].budget_bytes = t.pool->budget_bytes();
    s.tier[i].used_bytes = t.pool->bytes_used();
    s.tier[i].blocks = t.pool->slots_used();
    s.tier[i].hits = t.hits;
    s.tier[i].admissions = t.admissions;
  }
  s.accesses = m.accesses;
  s.misses = m.misses;
  s.promotions = m.promotions;
  s.demotions = m.demotions;
  s.drops = m.drops;
  s.readmissions_restored = m.restored;
  s.migration_failures = m.failures;
  for (size_t i = 0; i < CXLT_MAX_TIERS; ++i)
    for (size_t j = 0; j < CXLT_MAX_TIERS; ++j) {
      s.pair_bytes[i][j] = m.pair_bytes[i][j];
      s.pair_blocks[i][j] = m.pair_blocks[i][j];
      s.pair_ns[i][j] = m.pair_ns[i][j];
    }
  s.store_entries = m.store->size();
  s.store_forgotten = m.store->forgotten_total();
  if (m.remote) {
    const RemoteCounters rc = m.remote->counters();
    s.remote_hits = rc.hits;
    s.remote_misses = rc.misses;
    s.remote_writeouts = rc.writeouts;
    s.remote_failures = rc.failures;
    s.remote_bytes_out = rc.bytes_out;
    s.remote_bytes_in = rc.bytes_in;
  }
  const PlacementMeasure pm = m.measure_placement();
  s.inversions = pm.inversions;
  s.inversion_max_gap = pm.max_gap;
  s.steps_since_no_inversion = m.placement.ever_clean ? m.now - m.placement.last_clean_step : m.now;
  s.placement_blocks = pm.blocks;
  return s;
}

std::string Runtime::stats_json() const {
  cxlt_stats_t s = stats();
  nlohmann::json j;
  j["version"] = s.version;
  j["step"] = current_step();
  j["block_bytes"] = impl_->block_bytes;
  nlohmann::json tiers = nlohmann::json::array();
  for (uint32_t i = 0; i < s.tier_count; ++i) {
    const TierRt &t = impl_->tiers[i];
    tiers.push_back({{"rank", i},
                     {"name", t.name},
                     {"kind", tier_kind_name(t.kind)},
                     {"backend", t.backend_name},
                     {"emulated", t.emulated},
                     {"budget_bytes", s.tier[i].budget_bytes},
                     {"used_bytes", s.tier[i].used_bytes},
                     {"blocks", s.tier[i].blocks},
                     {"hits", s.tier[i].hits},
                     {"admissions", s.tier[i].admissions}});
  }
  j["tiers"] = tiers;
  j["accesses"] = s.accesses;
  j["misses"] = s.misses;
  j["promotions"] = s.promotions;
  j["demotions"] = s.demotions;
  j["drops"] = s.drops;
  j["readmissions_restored"] = s.readmissions_restored;
  j["migration_failures"] = s.migration_failures;
  nlohmann::json pairs = nlohmann::json::array();
  for (uint32_t a = 0; a < s.tier_count; ++a)
    for (uint32_t b = 0; b < s.tier_count; ++b) {
      if (a == b || s.pair_blocks[a][b] == 0) continue;
      double sec = static_cast<double>(s.pair_ns[a][b]) / 1e9;
      pairs.push_back({{"from", impl_->tiers[a].name},
                       {"to", impl_->tiers[b].name},
                       {"method", copy_method(a, b)},
                       {"blocks", s.pair_blocks[a][b]},
                       {"bytes", s.pair_bytes[a][b]},
                       {"copy_seconds", sec},
                       {"gbps", sec > 0 ? static_cast<double>(s.pair_bytes[a][b]) / sec / 1e9 : 0.0}});
    }
  j["pairs"] = pairs;
  j["placement"] = {{"inversions", s.inversions},
                    {"max_gap", s.inversion_max_gap},
                    {"steps_since_no_inversion", s.steps_since_no_inversion},
                    {"blocks_compared", s.placement_blocks}};
  j["store"] = {{"entries", s.store_entries}, {"forgotten", s.store_forgotten}, {"capacity", impl_->cfg.store_capacity}};
  if (impl_->remote) {
    const RemoteCounters rc = impl_->remote->counters();
    j["remote"] = {{"engine", impl_->remote->describe()}, {"hits", rc.hits}, {"misses", rc.misses},
                   {"writeouts", rc.writeouts}, {"failures", rc.failures}, {"bytes_out", rc.bytes_out},
                   {"bytes_in", rc.bytes_in}, {"skipped", rc.skipped}, {"corrupt", rc.corrupt},
                   {"timeouts", rc.timeouts}, {"moved", rc.moved}, {"ask", rc.ask}, {"refreshes", rc.refreshes}};
  } else {
    j["remote"] = nullptr;
  }
  return j.dump(2);
}

size_t Runtime::tier_count() const { return impl_->tiers.size(); }

cxlt_tier_info_t Runtime::tier_info(size_t rank) const {
  const Impl &m = *impl_;
  if (rank >= m.tiers.size()) fail(CXLT_ERROR_INVALID_ARGUMENT, "tier rank ", rank, " >= tier count ", m.tiers.size());
  std::lock_guard lk(m.mu);
  const TierRt &t = m.tiers[rank];
  cxlt_tier_info_t info{};
  info.rank = static_cast<int>(rank);
  info.kind = static_cast<cxlt_tier_kind_t>(t.kind);
  std::snprintf(info.name, sizeof info.name, "%s", t.name.c_str());
  std::snprintf(info.backend, sizeof info.backend, "%s", t.backend_name.c_str());
  info.budget_bytes = t.pool->budget_bytes();
  info.used_bytes = t.pool->bytes_used();
  info.blocks = t.pool->slots_used();
  info.bandwidth_mib_s = t.bandwidth_mib_s;
  info.latency_ns = t.latency_ns;
  info.emulated = t.emulated ? 1 : 0;
  return info;
}

std::string Runtime::copy_method(size_t from, size_t to) const {
  const Impl &m = *impl_;
  if (from >= m.tiers.size() || to >= m.tiers.size()) return "?";
  const TierRt &a = m.tiers[from], &b = m.tiers[to];
  if (a.no_bytes && b.no_bytes) return "none";
  const uint32_t at = a.backend->ops().traits, bt = b.backend->ops().traits;
  if (b.backend->supports(TierOp::copy_in) && (bt & CXLT_TRAIT_COPIES_ITSELF)) return "backend:" + b.backend_name;
  if ((bt & CXLT_TRAIT_PACES) && b.backend->params().pace_mib_s > 0) return "backend:" + b.backend_name + "-paced";
  if (a.backend->supports(TierOp::copy_out) && (at & CXLT_TRAIT_COPIES_ITSELF)) return "backend:" + a.backend_name;
  return copy_kernel_name(resolve_copy_kernel(to > from ? m.kernel_down : m.kernel_up));
}

const RuntimeConfig &Runtime::config() const { return impl_->cfg; }
const Topology &Runtime::topology() const { return impl_->topo; }

std::string Runtime::validate() const {
  const Impl &m = *impl_;
  std::lock_guard lk(m.mu);
  const_cast<Impl &>(m).drain_accesses();  // recorded accesses count (applying them is logically const)
  std::string err;
  std::vector<uint32_t> per_tier(m.tiers.size(), 0), moving(m.tiers.size(), 0);
  m.store->for_each([&](NodeId id, const StoreEntry &e) {
    const uint64_t word = e.tier >= 0 ? (static_cast<uint64_t>(e.generation) << 1) | 1u : 0;
    if (m.residency.word(id) != word)
      err += "block " + e.key.hex() + " has residency word " + std::to_string(m.residency.word(id)) + ", expected " +
             std::to_string(word) + "; ";
    if (e.tier < 0) {
      if (e.pins) err += "block " + e.key.hex() + " is pinned but resident nowhere; ";
      return;
    }
    if (static_cast<size_t>(e.tier) >= m.tiers.size()) {
      err += "block " + e.key.hex() + " has tier " + std::to_string(e.tier) + "; ";
      return;
    }
    ++per_tier[e.tier];
    if (e.flags & kFlagMoving) ++moving[e.tier];
    if (!m.tiers[e.tier].pool->is_allocated(e.slot))
      err += "block " + e.key.hex() + " holds slot " + std::to_string(e.slot) + " that its pool says is free; ";
    (void)id;
  });
  for (size_t t = 0; t < m.tiers.size(); ++t) {
    const TierRt &tr = m.tiers[t];
    std::string why;
    if (!tr.pool->is_valid(&why)) err += "tier " + tr.name + " pool: " + why + "; ";
    if (tr.pool->bytes_used() > tr.pool->budget_bytes()) err += "tier " + tr.name + " is over budget; ";
    // Pool slots = resident blocks + destinations of moves in flight into this tier.
    uint32_t incoming = 0;
    for (const MoveJob &j : m.jobs)
      if (j.dst == static_cast<int>(t)) ++incoming;
    if (m.in_flight == 0 && tr.pool->slots_used() != per_tier[t])
      err += "tier " + tr.name + " pool holds " + std::to_string(tr.pool->slots_used()) + " slots for " +
             std::to_string(per_tier[t]) + " blocks; ";
    if (tr.policy->size() != per_tier[t] - moving[t])
      err += "tier " + tr.name + " index holds " + std::to_string(tr.policy->size()) + " blocks, expected " +
             std::to_string(per_tier[t] - moving[t]) + "; ";
    std::string pv = tr.policy->validate();
    if (!pv.empty()) err += "tier " + tr.name + " index: " + pv;
    if (tr.moving_out != moving[t]) err += "tier " + tr.name + " moving-out count is off; ";
    (void)incoming;
  }
  std::string sv = m.store->validate(kFlagAdmitting);  // placed with the lock released: resident, no tier yet
  if (!sv.empty()) err += "store: " + sv;
  return err;
}

}  // namespace cxltier
