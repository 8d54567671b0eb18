// SPDX-License-Identifier: Apache-2.0
// Access to resident blocks: the access batches, lookup, pin/unpin, release, explicit moves,
// policy state, the decode clock and checkpoints. Admission is in admission.cpp.
#include "lib/runtime/runtime_impl.hpp"

#include "lib/runtime/flag_guard.hpp"

#include <cxltier/error.hpp>

#include <algorithm>
#include <chrono>

namespace cxltier {

namespace {
[[noreturn]] void not_found(const Key &key, const char *what) {
  fail(CXLT_ERROR_NOT_FOUND, what, ": block ", key.hex(), " is not resident in any tier");
}
}  // namespace

// --- Runtime ---------------------------------------------------------------------------------

Runtime::Runtime(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

void Runtime::access(const Key *keys, const float *attention, size_t n) {
  Impl &m = *impl_;
  if (n != 0 && keys == nullptr) fail(CXLT_ERROR_INVALID_ARGUMENT, "access: keys is NULL");
  std::unique_lock lk = m.lock();
  m.drain_accesses();
  // Check the whole batch first: nothing is applied unless every entry is good. While
  // prefetching pays (many states), each key's home slot is fetched kSlotAhead keys ahead and
  // the entry that slot names kEntryAhead ahead (the first two of reference_many's stages), so
  // that the lookups' misses overlap instead of following one another. The apply loop below
  // then finds the entries in cache and prefetches the index records.
  constexpr size_t kSlotAhead = 16, kEntryAhead = 8;
  // The keys array itself, one line (4 keys) 128 on, as the check by handle fetches its arrays
  // (access_log.cpp: the random prefetches keep the stream prefetcher from keeping up; 1.11x
  // at 64K resident blocks, 1.0x at 1M, where the lookups' own misses bound it).
  constexpr size_t kArrayAhead = 128;
  const size_t ahead = m.prefetch_pays() ? kSlotAhead : 0;
  for (size_t i = 0; i < std::min(n, ahead); ++i) m.store->prefetch_home(keys[i]);
  m.scratch.clear();
  for (size_t i = 0; i < n; ++i) {
    if (ahead != 0) {
      if ((i & 3) == 0 && i + kArrayAhead < n) __builtin_prefetch(keys + i + kArrayAhead);
      if (i + kSlotAhead < n) m.store->prefetch_home(keys[i + kSlotAhead]);
      if (i + kEntryAhead < n) {
        const NodeId guess = m.store->peek_home(keys[i + kEntryAhead]);
        if (guess != kNoNode) m.prefetch_access(guess, false);
      }
    }
    if (attention && !(attention[i] >= 0.0f && attention[i] <= 1.0f))
      fail(CXLT_ERROR_INVALID_ARGUMENT, "access: attention[", i, "] = ", attention[i], " is outside [0, 1]");
    NodeId id = m.store->find(keys[i]);
    if (id == kNoNode || (*m.store)[id].res.tier < 0) not_found(keys[i], "access");
    m.scratch.push_back(id);
  }
  for (size_t i = 0; i < n; ++i) {
    if (ahead != 0) {  // the entries back into L1 (the check read them a batch ago), the index lines
      if (i + 16 < n) m.prefetch_access(m.scratch[i + 16], false);
      if (i + 8 < n) m.prefetch_access(m.scratch[i + 8], true);
    }
    m.note_access(m.scratch[i], attention ? attention[i] : 1.0f);
  }
  if (m.cfg.synchronous) {
    // promote_sync may release the lock while it copies, and another thread's access() reuses
    // m.scratch: find each key again (a block dropped meanwhile is simply not promoted).
    if (m.cfg.promotion != PromotionRule::never)
      for (size_t i = 0; i < n; ++i) {
        const NodeId id = m.store->find(keys[i]);
        if (id != kNoNode && (*m.store)[id].res.tier >= 0) m.promote_sync(lk, id);
      }
  } else if (!m.promote_queue.empty()) {
    m.mover_cv.notify_one();
  }
}

void Runtime::access_handles(const uint64_t *handles, const float *attention, size_t n) {
  Impl &m = *impl_;
  if (n != 0 && handles == nullptr) fail(CXLT_ERROR_INVALID_ARGUMENT, "access_handles: handles is NULL");
  // Waits for the lock only with a full shard or a batch larger than a buffer (access_log.cpp).
  if (m.log_access_handles(handles, attention, n)) return;
  std::unique_lock lk = m.lock();
  m.drain_accesses();
  for (size_t i = 0; i < n; ++i) {
    if (attention && !(attention[i] >= 0.0f && attention[i] <= 1.0f))
      fail(CXLT_ERROR_INVALID_ARGUMENT, "access_handles: attention[", i, "] = ", attention[i], " is outside [0, 1]");
    NodeId id = static_cast<NodeId>(handles[i] & 0xffffffffu);
    uint32_t gen = static_cast<uint32_t>(handles[i] >> 32);
    const StoreEntry *e = m.store->current(id, gen);
    if (!e || e->res.tier < 0)
      fail(CXLT_ERROR_NOT_FOUND, "access_handles: handle[", i, "] = ", handles[i],
           " is stale (its block was dropped or forgotten) or was never issued");
  }
  for (size_t i = 0; i < n; ++i) m.note_access(static_cast<NodeId>(handles[i] & 0xffffffffu), attention ? attention[i] : 1.0f);
  if (m.cfg.synchronous) {
    if (m.cfg.promotion != PromotionRule::never)
      for (size_t i = 0; i < n; ++i) {
        // Checked again: an earlier promote_sync may have released the lock.
        const NodeId id = static_cast<NodeId>(handles[i] & 0xffffffffu);
        if (m.store->current(id, static_cast<uint32_t>(handles[i] >> 32)))
          m.promote_sync(lk, id);
      }
  } else if (!m.promote_queue.empty()) {
    m.mover_cv.notify_one();
  }
}

bool Runtime::lookup(const Key &key, Block *out) {
  Impl &m = *impl_;
  const std::unique_lock lk = m.lock();
  m.drain_accesses();
  NodeId id = m.store->find(key);
  if (id == kNoNode || (*m.store)[id].res.tier < 0) return false;
  if (out) *out = m.block_of(id);
  return true;
}

Block Runtime::move(const Key &key, int tier, bool wait) {
  Impl &m = *impl_;
  std::unique_lock lk = m.lock();
  m.drain_accesses();
  if (tier < 0 || tier > m.last_tier())
    fail(CXLT_ERROR_INVALID_ARGUMENT, "move: tier ", tier, " does not exist (", m.tiers.size(), " tiers)");
  NodeId id = m.store->find(key);
  // A block held by another call (making room for it, or taken for a burst's room) is waited
  // for too: this call's own hold below must not be cleared by that call, nor clear its hold.
  while (id != kNoNode && ((*m.store)[id].res.flags & (kFlagMoving | kFlagAdmitting | kFlagHeld | kFlagUnindexed))) {
    m.wait_moved(lk, "move");
    id = m.store->find(key);
  }
  if (id == kNoNode || (*m.store)[id].res.tier < 0) not_found(key, "move");
  StoreEntry &e = (*m.store)[id];
  if (e.res.tier == tier) return m.block_of(id);
  if (e.res.pins != 0) fail(CXLT_ERROR_BUSY, "move: block ", key.hex(), " is pinned");
  SlotId d = kInvalidSlot;
  cxlt_result_t r = m.tiers[tier].pool->allocate(&d);
  if (r == CXLT_ERROR_OUT_OF_TIER_MEMORY) {
    // Making room releases the lock while a demotion copies. The block is held (kFlagHeld: no
    // victim, not moved, release(forget) waits) rather than pinned, so that a pin the engine
    // takes meanwhile is its own and is seen below, and a stray unpin is still refused.
    {
      FlagGuard held(m, id, kFlagHeld);
      m.make_room(lk, tier, Runtime::Impl::RoomFor::needed);
    }
    const StoreEntry &after = (*m.store)[id];
    if (after.res.tier < 0 || (after.res.flags & kFlagMoving)) not_found(key, "move");
    if (after.res.pins != 0) fail(CXLT_ERROR_BUSY, "move: block ", key.hex(), " was pinned while room was made for it");
    if (after.res.tier == tier) return m.block_of(id);
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
  std::unique_lock lk = m.lock();
  m.drain_accesses();
  NodeId id = m.store->find(key);
  while (id != kNoNode && ((*m.store)[id].res.flags & (kFlagMoving | kFlagAdmitting))) {
    m.wait_moved(lk, "pin");  // protocol step 4: pins wait for a copy in flight, then pin where it landed
    id = m.store->find(key);
  }
  if (id == kNoNode || (*m.store)[id].res.tier < 0) not_found(key, "pin");
  StoreEntry &e = (*m.store)[id];
  if (e.res.pins == 0xffff) fail(CXLT_ERROR_INVALID_ARGUMENT, "pin: block ", key.hex(), " is pinned 65535 times already");
  ++e.res.pins;
  e.res.flags = static_cast<uint8_t>(e.res.flags & ~kFlagReleased);
  return m.block_of(id);
}

void Runtime::unpin(const Key &key) {
  Impl &m = *impl_;
  std::unique_lock lk = m.lock();
  m.drain_accesses();
  NodeId id = m.store->find(key);
  // While a block is being admitted its pins are the admission's (a remote fetch holds one with
  // the lock released): wait until it is done, so that a stray unpin is refused, not taken from it.
  while (id != kNoNode && ((*m.store)[id].res.flags & kFlagAdmitting)) {
    m.wait_moved(lk, "unpin");
    id = m.store->find(key);
  }
  if (id == kNoNode || (*m.store)[id].res.tier < 0) not_found(key, "unpin");
  StoreEntry &e = (*m.store)[id];
  if (e.res.pins == 0) fail(CXLT_ERROR_INVALID_ARGUMENT, "unpin: block ", key.hex(), " is not pinned");
  --e.res.pins;
}

void Runtime::release(const Key &key, bool forget) {
  Impl &m = *impl_;
  std::unique_lock lk = m.lock();
  m.drain_accesses();
  NodeId id = m.store->find(key);
  while (forget && id != kNoNode && ((*m.store)[id].res.flags & (kFlagMoving | kFlagAdmitting | kFlagHeld | kFlagUnindexed))) {
    m.wait_moved(lk, "release");
    id = m.store->find(key);
  }
  if (id == kNoNode || (*m.store)[id].res.tier < 0) not_found(key, "release");
  StoreEntry &e = (*m.store)[id];
  if (e.res.pins != 0) fail(CXLT_ERROR_BUSY, "release: block ", key.hex(), " is pinned (", e.res.pins, " pins)");
  if (!forget) {
    if (e.res.flags & kFlagReleased) fail(CXLT_ERROR_INVALID_ARGUMENT, "release: block ", key.hex(), " was already released");
    e.res.flags |= kFlagReleased;
    return;
  }
  m.unplace(id, EraseReason::released);
}

bool Runtime::policy_state(const Key &key, cxlt_policy_state_t *out) {
  Impl &m = *impl_;
  const std::unique_lock lk = m.lock();
  m.drain_accesses();
  NodeId id = m.store->find(key);
  if (id == kNoNode || (*m.store)[id].st.tick == 0) return false;
  const StoreEntry &e = (*m.store)[id];
  if (out) {
    out->score = lrfu_effective_score(e.st.score, m.now >= e.st.last_access ? m.now - e.st.last_access : 0, m.cfg.lrfu);
    out->last_access_step = e.st.last_access;
    out->accesses = e.st.accesses;
    out->tier = e.res.tier;
  }
  return true;
}

void Runtime::step() {
  Impl &m = *impl_;
  std::unique_lock lk(m.mu, std::defer_lock);
  m.lock_helping(lk);  // engine threads call step() while others record: help their drain
  m.drain_accesses();
  ++m.now;
  if (m.cfg.checkpoint_every_steps && !m.cfg.store_path.empty() && m.now - m.checkpoint_at_step >= m.cfg.checkpoint_every_steps) {
    m.checkpoint_at_step = m.now;
    m.write_checkpoint_now(lk);
  }
}

uint64_t Runtime::current_step() const {
  const std::unique_lock lk = impl_->lock();
  return impl_->now;
}

bool Runtime::wait_idle(int64_t timeout_ms) {
  Impl &m = *impl_;
  std::unique_lock lk = m.lock();
  return m.wait_settled(lk, timeout_ms);  // copies done and the tiers' order reconciled (placement.cpp)
}

void Runtime::checkpoint() {
  Impl &m = *impl_;
  if (m.cfg.store_path.empty())
    fail(CXLT_ERROR_INVALID_ARGUMENT, "checkpoint: no store.path is configured (persistence is off)");
  std::unique_lock lk = m.lock();
  m.drain_accesses();
  m.write_checkpoint_now(lk);
}

const RuntimeConfig &Runtime::config() const { return impl_->cfg; }
const Topology &Runtime::topology() const { return impl_->topo; }

}  // namespace cxltier
