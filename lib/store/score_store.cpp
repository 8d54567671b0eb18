// SPDX-License-Identifier: Apache-2.0
// The identity-keyed score store: open-addressing index, stable entry ids and the forget
// order. Checkpoints (the file format, save and load) are in checkpoint.cpp.
//
// Forget order (when a bounded store is full): among states whose block is resident nowhere,
// forget first the one that can least change a future decision:
//   lrfu (touch mode): the lowest score (restoring it differs least from a fresh state);
//   lrfu (decay mode): the lowest current score (score x (1-alpha)^idle steps, compared in the
//                      log domain so that the order never changes as the clock advances);
//   lfu: the fewest accesses;
//   lru, fifo, arc, opt: the oldest last access;
// then the older last access, then the smaller key. Exact (a heap over non-resident states),
// not sampled.
#include "lib/store/score_store.hpp"

#include "lib/core/assert.hpp"

#include <cxltier/error.hpp>

#include <cmath>
#include <limits>
#include <sstream>

#include <sys/resource.h>

namespace cxltier {

namespace {
size_t next_pow2(size_t v) {
  size_t p = 16;
  while (p < v) p <<= 1;
  return p;
}
// The key index's slots for a store sized for `states` states: a power of two, at load 1/2 or
// less with every one of them present. The constructor sizes the index by it, and
// bytes_per_state counts it.
size_t index_slots_for(size_t states) { return next_pow2(states * 2); }
}  // namespace

ScoreStore::ScoreStore(const StoreOptions &opt) : opt_(opt) {
  switch (opt_.forget_by) {
    case PolicyKind::lrfu:
      forget_by_ = opt_.lrfu.mode != ScoreMode::decay ? ForgetBy::score
                   : opt_.lrfu.alpha >= 1.0          ? ForgetBy::scored_last_access
                                                     : ForgetBy::decayed_score;
      log_keep_ = std::log1p(-opt_.lrfu.alpha);
      break;
    case PolicyKind::lfu: forget_by_ = ForgetBy::accesses; break;
    default: forget_by_ = ForgetBy::tick; break;
  }
  size_t initial = opt_.capacity ? static_cast<size_t>(opt_.capacity) : 1024;
  if (opt_.capacity > (1ull << 31)) fail(CXLT_ERROR_CONFIG, "store.capacity = ", opt_.capacity, " is larger than 2^31 states");
  entries_.set_huge_pages(opt_.huge_pages);
  if (opt_.fixed_addresses) {
    try {
      entries_.fix_address(fixed_room(opt_.capacity));
    } catch (const std::bad_alloc &) {
      fail(CXLT_ERROR_OUT_OF_HOST_MEMORY, "score store: no address room for ", fixed_room(opt_.capacity),
           " states (", fixed_room(opt_.capacity) * sizeof(StoreEntry), " bytes of address space)");
    }
    fixed_ = entries_.data();
  }
  entries_.reserve(initial);
  in_use_.reserve(initial);
  rehash(index_slots_for(initial));
}

size_t ScoreStore::fixed_room(uint64_t capacity) noexcept {
  if (capacity) return static_cast<size_t>(capacity);
  // Unbounded: room for 2^31 entries (128 GiB of addresses, no memory), or for what a quarter
  // of a limited address space (ulimit -v) holds, so that the rest of the process keeps room.
  size_t room = size_t{1} << 31;
  struct rlimit lim {};
  if (getrlimit(RLIMIT_AS, &lim) == 0 && lim.rlim_cur != RLIM_INFINITY)
    room = std::min(room, std::max<size_t>(static_cast<size_t>(lim.rlim_cur / 4 / sizeof(StoreEntry)), 1024));
  return room;
}

void ScoreStore::rehash(size_t table_size) {
  PodVector<Slot> fresh;  // a PodVector for its huge-page advice: lookups land at random
  fresh.set_huge_pages(opt_.huge_pages);
  fresh.resize(table_size, Slot{kNoNode, 0});
  const size_t mask = table_size - 1;
  // A slot's tag holds its key's hash bits up to 2^32 slots, so there the old table alone says
  // where each key goes (the table only grows, so the old one fits too): its 8-byte slots are
  // read in order, and no entry's key (a 64-byte line each) is read or hashed again. Any
  // insertion order leaves a valid linear-probing table.
  const bool by_tags = mask <= 0xffffffffu;
  if (by_tags)
    for (const Slot &s : table_) {
      if (s.id == kNoNode) continue;
      size_t i = s.tag & mask;
      while (fresh[i].id != kNoNode) i = (i + 1) & mask;
      fresh[i] = s;
    }
  table_ = std::move(fresh);
  mask_ = mask;
  if (!by_tags)
    for (NodeId id = 0; id < entries_.size(); ++id)
      if (in_use_[id]) index_insert(id);
}

void ScoreStore::index_insert(NodeId id) noexcept {
  const Key &k = entries_[id].key;
  size_t i = home(k);
  while (table_[i].id != kNoNode) i = (i + 1) & mask_;
  table_[i] = Slot{id, tag(k)};
}

void ScoreStore::index_erase(NodeId id) noexcept {
  size_t i = home(entries_[id].key);
  while (table_[i].id != id) {
    cxlt_assert(table_[i].id != kNoNode);
    i = (i + 1) & mask_;
  }
  // Backward-shift deletion keeps linear probing tombstone-free.
  size_t j = i;
  while (true) {
    j = (j + 1) & mask_;
    if (table_[j].id == kNoNode) break;
    size_t h = slot_home(table_[j]);
    // Move j back to i unless its home lies cyclically in (i, j].
    bool in_between = (i <= j) ? (i < h && h <= j) : (i < h || h <= j);
    if (!in_between) {
      table_[i] = table_[j];
      i = j;
    }
  }
  table_[i] = Slot{kNoNode, 0};
}

bool ScoreStore::fheap_sift_up(size_t i) noexcept {
  const size_t from = i;
  const HeapPlace moving = fheap_[i];
  while (i > 0) {
    size_t p = (i - 1) / 2;
    if (!forgets_before(moving, fheap_[p])) break;
    fheap_[i] = fheap_[p];
    fpos_[fheap_[i].id] = static_cast<uint32_t>(i);
    i = p;
  }
  fheap_[i] = moving;
  fpos_[moving.id] = static_cast<uint32_t>(i);
  return i != from;
}

bool ScoreStore::fheap_sift_down(size_t i) noexcept {
  const size_t from = i;
  const HeapPlace moving = fheap_[i];
  const size_t n = fheap_.size();
  while (true) {
    size_t c = 2 * i + 1;
    if (c >= n) break;
    if (c + 1 < n && forgets_before(fheap_[c + 1], fheap_[c])) ++c;
    if (!forgets_before(fheap_[c], moving)) break;
    fheap_[i] = fheap_[c];
    fpos_[fheap_[i].id] = static_cast<uint32_t>(i);
    i = c;
  }
  fheap_[i] = moving;
  fpos_[moving.id] = static_cast<uint32_t>(i);
  return i != from;
}

void ScoreStore::fheap_push(NodeId id) noexcept {
  if (opt_.capacity == 0) return;  // unbounded: nothing is ever forgotten
  fheap_.push_back(heap_place(id));
  fheap_sift_up(fheap_.size() - 1);
}

void ScoreStore::fheap_remove(NodeId id) noexcept {
  if (opt_.capacity == 0) return;
  size_t i = fpos_[id];
  cxlt_assert(i < fheap_.size() && fheap_[i].id == id);
  const HeapPlace last = fheap_.back();
  fheap_.pop_back();
  if (last.id == id) return;
  fheap_[i] = last;
  fpos_[last.id] = static_cast<uint32_t>(i);
  if (!fheap_sift_down(i)) fheap_sift_up(i);
}

void ScoreStore::restate(NodeId id) noexcept {
  if (opt_.capacity == 0 || fpos_[id] == 0xffffffffu) return;
  const size_t i = fpos_[id];
  fheap_[i] = heap_place(id);
  if (!fheap_sift_up(i)) fheap_sift_down(i);
}

void ScoreStore::set_resident(NodeId id, bool resident) noexcept {
  StoreEntry &e = entries_[id];
  const bool was = e.res.tier >= 0;
  (void)was;
  // The caller sets e.res.tier; we only track membership in the forget heap.
  if (resident) {
    if (opt_.capacity && fpos_[id] != 0xffffffffu) {
      fheap_remove(id);
      fpos_[id] = 0xffffffffu;
    }
  } else {
    if (opt_.capacity && fpos_[id] == 0xffffffffu) fheap_push(id);
  }
}

double ScoreStore::bytes_per_state(uint64_t capacity) noexcept {
  const double b = sizeof(StoreEntry) + sizeof(decltype(in_use_)::value_type);
  if (capacity == 0) return b + 2 * sizeof(Slot);
  const double slots = static_cast<double>(index_slots_for(static_cast<size_t>(capacity)));
  return b + slots * sizeof(Slot) / static_cast<double>(capacity) + sizeof(decltype(fheap_)::value_type) +
         sizeof(decltype(fpos_)::value_type);
}

NodeId ScoreStore::allocate_id() {
  if (!free_ids_.empty()) {
    NodeId id = free_ids_.back();
    free_ids_.pop_back();
    return id;
  }
  if (entries_.size() >= 0xfffffff0u) fail(CXLT_ERROR_OUT_OF_HOST_MEMORY, "score store: more than 2^32 states");
  if (fixed_ && entries_.size() >= entries_.room())
    fail(CXLT_ERROR_OUT_OF_HOST_MEMORY, "score store: its address room for ", entries_.room(),
         " states is full; set store.capacity to bound the states kept");
  // The per-id arrays grow together; if one growth fails, those before it are undone, so that
  // they keep one size and the store is as it was.
  const size_t n = entries_.size();
  try {
    const StoreEntry *const before = entries_.data();
    entries_.emplace_back().res.set_generation(gen_floor_);
    if (moved_ && entries_.data() != before) moved_(entries_.data());  // before anything may throw
    in_use_.push_back(0);
    if (opt_.capacity) fpos_.push_back(0xffffffffu);
  } catch (...) {
    entries_.resize(n);
    in_use_.resize(n);
    if (opt_.capacity) fpos_.resize(n);
    throw;
  }
  if (fixed_) published_.n.store(n + 1, std::memory_order_release);  // its place word is written
  return static_cast<NodeId>(n);
}

NodeId ScoreStore::insert(const Key &key, NodeId *forgotten) {
  if (forgotten) *forgotten = kNoNode;
  cxlt_assert_internal(find(key) == kNoNode);
  NodeId id;
  if (opt_.capacity && size_ >= opt_.capacity) {
    if (fheap_.empty())
      fail(CXLT_ERROR_OUT_OF_HOST_MEMORY, "score store is full (", opt_.capacity,
           " states) and every state belongs to a resident block; raise store.capacity");
    id = fheap_.front().id;
    fheap_remove(id);
    fpos_[id] = 0xffffffffu;
    index_erase(id);
    ++forgotten_total_;
    if (forgotten) *forgotten = id;
    reset_entry(id);
  } else {
    if (!opt_.capacity && (size_ + 1) * 2 > table_.size()) rehash(table_.size() * 2);
    id = allocate_id();
    reset_entry(id);
    in_use_[id] = 1;
    ++size_;
  }
  entries_[id].key = key;
  index_insert(id);
  // A fresh state is non-resident until the runtime places it.
  if (opt_.capacity) fheap_push(id);
  return id;
}

void ScoreStore::erase(NodeId id) noexcept {
  cxlt_assert(valid(id) && entries_[id].res.tier < 0);
  if (opt_.capacity && fpos_[id] != 0xffffffffu) {
    fheap_remove(id);
    fpos_[id] = 0xffffffffu;
  }
  index_erase(id);
  in_use_[id] = 0;
  entries_[id].res.set_generation(entries_[id].res.generation() + 1);
  free_ids_.push_back(id);
  --size_;
}

std::string ScoreStore::validate(uint8_t resident_flags) const {
  std::ostringstream err;
  size_t n = 0, nonres = 0;
  for (NodeId id = 0; id < entries_.size(); ++id) {
    if (!in_use_[id]) continue;
    ++n;
    if (find(entries_[id].key) != id) err << "id " << id << " not found by its key; ";
    const bool resident = entries_[id].res.tier >= 0 || (entries_[id].res.flags & resident_flags) != 0;
    if (!resident) ++nonres;
    if (opt_.capacity) {
      bool in_heap = fpos_[id] != 0xffffffffu;
      if (in_heap == resident) err << "id " << id << " forget-heap membership wrong; ";
    }
  }
  if (n != size_) err << "size " << size_ << " but " << n << " in use; ";
  if (opt_.capacity) {
    if (fheap_.size() != nonres) err << "forget heap holds " << fheap_.size() << ", non-resident " << nonres << "; ";
    for (size_t i = 0; i < fheap_.size(); ++i) {
      const HeapPlace want = heap_place(fheap_[i].id);
      if (fheap_[i].value != want.value) err << "forget heap place " << i << " holds a stale order value; ";
      if (i > 0 && forgets_before(fheap_[i].id, fheap_[(i - 1) / 2].id)) err << "forget heap order violated at " << i << "; ";
    }
    if (size_ > opt_.capacity) err << "over capacity; ";
  }
  size_t slots = 0;
  for (const Slot &s : table_)
    if (s.id != kNoNode) ++slots;
  if (slots != size_) err << "index holds " << slots << " ids for " << size_ << " states; ";
  return err.str();
}

}  // namespace cxltier
