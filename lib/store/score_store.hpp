// SPDX-License-Identifier: Apache-2.0
// The identity-keyed score store: every block's policy state, keyed by its 128-bit identity,
// whether or not the block is resident anywhere. The runtime also keeps a block's residency in
// the same entry, so one hash lookup answers both "where is it" and "how hot is it"; an entry's
// NodeId is stable for its lifetime and indexes every policy's per-block arrays.
//
// Bounded memory: with a capacity, inserting into a full store forgets one non-resident state,
// the one that matters least to future decisions (see forget order below); resident states are
// never forgotten. Capacity 0 means grow without bound (trace replay).
//
// Durable on request: save() writes a checkpoint atomically (a new file written, fsynced and
// renamed over the old one, then the directory fsynced), with a version, per-chunk and
// whole-file checksums; load() validates the whole file before anything is replaced, so a
// truncated, corrupt or foreign file is refused and the store keeps what it had.
//
// Not thread-safe: the runtime serialises access under its own lock.
#pragma once

#include "lib/core/pod_vector.hpp"
#include "lib/policy/eviction.hpp"

#include <cxltier/key.hpp>
#include <cxltier/policy.hpp>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>
#include <string>
#include <string_view>
#include <vector>

namespace cxltier {

// The runtime's half of an entry: where the block lives and who holds it. The policies read
// only `key` and `st`; keeping these fields apart says so in the type.
struct Residency {
  // The runtime's pool slot while resident (low 32 bits; all ones when resident nowhere) and
  // the generation, bumped whenever this NodeId is reused for another key (high 32 bits), in
  // one word: the runtime's engine threads read it without the runtime's lock to check a
  // handle (ScoreStore::handle_resident), so it is written only through set_slot and
  // set_generation, each one atomic store. Read it through slot() and generation().
  uint64_t place = 0xffffffffu;
  int8_t tier = -1;             // tier rank while resident, -1 when resident nowhere
  uint8_t flags = 0;            // runtime flags
  uint16_t pins = 0;            // runtime pin count
  // The runtime's LRFU indexes' stamp of this id (lrfu_id_records.hpp), kept here so that an
  // access writes this one line. The store keeps it across erase and reuse, and a fresh entry's
  // is zero.
  uint32_t policy_stamp = 0;

  uint32_t slot() const noexcept { return static_cast<uint32_t>(place); }
  uint32_t generation() const noexcept { return static_cast<uint32_t>(place >> 32); }
  void set_slot(uint32_t slot) noexcept { set_place((place & ~uint64_t{0xffffffffu}) | slot); }
  void set_generation(uint32_t generation) noexcept {
    set_place((place & uint64_t{0xffffffffu}) | (static_cast<uint64_t>(generation) << 32));
  }
  // [no lock] The word as one load, for a reader that does not hold the writer's lock.
  uint64_t place_now() const noexcept { return __atomic_load_n(&place, __ATOMIC_ACQUIRE); }

private:
  void set_place(uint64_t w) noexcept { __atomic_store_n(&place, w, __ATOMIC_RELEASE); }
};
static_assert(sizeof(Residency) == 16);

struct StoreEntry {
  Key key;
  PolicyState st;
  Residency res;
};
static_assert(sizeof(StoreEntry) == 64, "one cache line per entry");
static_assert(offsetof(StoreEntry, res) == 48, "the residency fields fill the line's last 16 bytes");

struct StoreOptions {
  uint64_t capacity = 1u << 20;   // most states kept; 0: grow without bound
  PolicyKind forget_by = PolicyKind::lrfu;  // what "matters least" means (see forget order)
  LrfuParams lrfu;                // decay mode changes the LRFU forget order
  bool huge_pages = true;         // the entries and the key index ask for huge pages
  // Every entry stays at its address for the store's life, so that handle_resident may read it
  // without a lock: the entries get address room for `capacity` states (for an unbounded store,
  // 2^31, or what a quarter of a limited address space holds: ScoreStore::fixed_room), made
  // writable as they are used. An unbounded store refuses a state past its room.
  bool fixed_addresses = false;
};

// What a checkpoint carries besides the states.
struct CheckpointMeta {
  uint64_t current_step = 0;
  uint64_t current_tick = 0;
  double alpha = 0.05;
  double beta = 0.001;
  ScoreMode mode = ScoreMode::touch;
};

struct LoadedCheckpoint {
  CheckpointMeta meta;
  std::vector<std::pair<Key, PolicyState>> states;
};

class ScoreStore {
public:
  explicit ScoreStore(const StoreOptions &opt);

  // Inline: the batch calls look up hundreds of keys a call.
  NodeId find(const Key &key) const noexcept {
    const uint32_t t = tag(key);
    size_t i = home(key);
    while (true) {
      const Slot &s = table_[i];
      if (s.id == kNoNode) return kNoNode;
      if (s.tag == t && entries_[s.id].key == key) return s.id;
      i = (i + 1) & mask_;
    }
  }
  // Hints for a lookup of `key` soon (a batch looks ahead): prefetch its home slot; later, the
  // id in that slot when the tag matches (no probing, no key comparison: a guess to prefetch
  // the entry by, never an answer).
  void prefetch_home(const Key &key) const noexcept { __builtin_prefetch(&table_[home(key)]); }
  NodeId peek_home(const Key &key) const noexcept {
    const Slot &s = table_[home(key)];
    return s.tag == tag(key) ? s.id : kNoNode;
  }
  // Insert a fresh (zero) state for a key that is not present. When the store is full, the
  // non-resident state that matters least is forgotten first and its NodeId reused; *forgotten
  // is that id (kNoNode if none), so the caller can tell the policies. Throws
  // Error(CXLT_ERROR_OUT_OF_HOST_MEMORY) if the store is full of resident states.
  NodeId insert(const Key &key, NodeId *forgotten);
  // Forget one state now (it must not be resident).
  void erase(NodeId id) noexcept;

  StoreEntry &operator[](NodeId id) noexcept { return entries_[id]; }
  const StoreEntry &operator[](NodeId id) const noexcept { return entries_[id]; }
  bool valid(NodeId id) const noexcept { return id < entries_.size() && in_use_[id]; }
  // The state `id` names, if it is still the one handed out with `generation` (a handle's or
  // an access record's); nullptr when the id was erased, forgotten or reused since. Reads the
  // entry's line only: every erase and forget bumps the generation, replace_with moves every
  // generation past the old ones, and an id issued anew after a replace_with shrank the store
  // starts past them too (gen_floor_). So an id not in use never matches a generation it was
  // handed out with, and in_use_ (one more random line on the access path) need not be read.
  // A generation that was never handed out (a forged handle) may match an unused id: callers
  // that take handles from the API also check that the block is resident.
  StoreEntry *current(NodeId id, uint32_t generation) noexcept {
    if (id >= entries_.size()) return nullptr;
    StoreEntry &e = entries_[id];
    return e.res.generation() == generation ? &e : nullptr;
  }

  // [any thread, no lock; fixed_addresses only] Whether `handle` ((generation << 32) | id)
  // names a block resident in some tier now: the id was issued and its entry's place word holds
  // that generation and a slot. One load of one word, which every writer of it stores whole
  // (Residency::set_slot, set_generation); ids are published after their entry is written.
  bool handle_resident(uint64_t handle) const noexcept {
    const auto id = static_cast<size_t>(handle & 0xffffffffu);
    if (id >= published_.n.load(std::memory_order_acquire)) return false;
    const uint64_t w = fixed_[id].res.place_now();
    return static_cast<uint32_t>(w) != 0xffffffffu && (w >> 32) == (handle >> 32);
  }
  void prefetch_handle(uint64_t handle) const noexcept {
    const auto id = static_cast<size_t>(handle & 0xffffffffu);
    if (id < published_.n.load(std::memory_order_relaxed)) __builtin_prefetch(fixed_ + id);
  }
  // The most entries the store's address room holds (fixed_addresses; 0 without), and the room
  // a store of `capacity` states (0: unbounded) asks for.
  size_t room() const noexcept { return entries_.room(); }
  static size_t fixed_room(uint64_t capacity) noexcept;

  // `fn` is called now and whenever the entries move (growth, replace_with), with the first
  // entry's address (null while there is none): the runtime's LRFU index reads each state's
  // score and last access where the entry keeps them, and keeps its stamp there.
  void on_entries_moved(std::function<void(StoreEntry *)> fn) {
    moved_ = std::move(fn);
    if (moved_) moved_(entries_.data());
  }

  // The runtime calls these when a block becomes resident somewhere / resident nowhere, so the
  // store knows which states it may forget.
  void set_resident(NodeId id, bool resident) noexcept;
  // The policy state of `id` changed while it was in the forget order (resident nowhere): move
  // it to its new place there. The order keeps no copy of a state but its order value rounded
  // to a float, and reads the exact values from the entry, so a caller that writes `st` of a
  // non-resident state calls this before the store's next insert, erase, set_resident, restate
  // or validate, with one exception: set_resident(id, true) or erase(id) may take the changed
  // state out of the order at once (taking a state out never compares it). A no-op for a state
  // outside the order and for an unbounded store.
  void restate(NodeId id) noexcept;

  size_t size() const noexcept { return size_; }
  uint64_t capacity() const noexcept { return opt_.capacity; }
  // The bytes a store of `capacity` states (0: unbounded) keeps per state when full: its entry,
  // its in-use byte, its share of the key index (sized at open for a bounded store; at its
  // fullest, load 1/2, for an unbounded one) and a bounded store's forget-order place and
  // position. (docs/runtime.md, "Memory per block".)
  static double bytes_per_state(uint64_t capacity) noexcept;
  // Every NodeId handed out so far is below this (policies size their arrays to it).
  size_t id_limit() const noexcept { return entries_.size(); }
  uint64_t forgotten_total() const noexcept { return forgotten_total_; }

  template <typename F>
  void for_each(F &&f) const {
    for (NodeId id = 0; id < entries_.size(); ++id)
      if (in_use_[id]) f(id, entries_[id]);
  }
  // The same over the ids in [lo, hi), clipped to id_limit().
  template <typename F>
  void for_each_in(size_t lo, size_t hi, F &&f) const {
    hi = std::min(hi, entries_.size());
    for (size_t id = lo; id < hi; ++id)
      if (in_use_[id]) f(static_cast<NodeId>(id), entries_[id]);
  }

  // Checkpoints. save() throws Error(CXLT_ERROR_IO) and leaves the previous file intact on any
  // failure; load() throws CXLT_ERROR_IO (missing, unreadable, a symbolic link) or
  // CXLT_ERROR_CORRUPT (truncated, damaged, foreign, or from a newer format) naming the file.
  void save(const std::string &path, const CheckpointMeta &meta) const;
  // Copy every state out (for a checkpoint written without holding the caller's lock).
  std::vector<std::pair<Key, PolicyState>> snapshot() const;
  // Write a checkpoint of `states` (the same format and guarantees as save()).
  static void write_checkpoint(const std::string &path, const CheckpointMeta &meta,
                               const std::vector<std::pair<Key, PolicyState>> &states);
  static LoadedCheckpoint load(const std::string &path);
  // The checks and decoding of load() on bytes already read (`path` names them in errors);
  // load() is open + read + this. Throws CXLT_ERROR_CORRUPT as load() does.
  static LoadedCheckpoint parse_checkpoint(std::string_view bytes, const std::string &path);
  // Replace the whole content by a loaded checkpoint (all states non-resident). Throws (and
  // changes nothing) if the checkpoint holds more states than a bounded store's capacity. Every
  // entry's policy stamp starts at zero: call it only while no policy keeps an entry of an id.
  void replace_with(const LoadedCheckpoint &cp);

  // Invariant check for tests; empty when valid.
  // Checks the key index, the size and the forget heap. An entry counts as resident when its
  // tier is >= 0 or any of `resident_flags` is set in its flags (the runtime marks a block being
  // admitted resident before it has a tier).
  std::string validate(uint8_t resident_flags = 0) const;

private:
  struct Slot {
    NodeId id;
    uint32_t tag;
  };
  // What the forget order compares before the key, computed from the entry (the heap keeps the
  // value rounded to a float, HeapPlace; restate() says when a state in the order changes).
  struct ForgetKey {
    double value;     // lower is forgotten first
    uint64_t t;       // then the older last access
  };
  // What the order compares for each policy (StoreOptions::forget_by, and LRFU's mode), chosen
  // once: forget_key runs on every push and restate, and twice for each comparison whose floats
  // tie.
  enum class ForgetBy : uint8_t { score, decayed_score, scored_last_access, accesses, tick };
  ForgetKey forget_key(NodeId id) const noexcept {
    const PolicyState &st = entries_[id].st;
    double v;
    switch (forget_by_) {
      case ForgetBy::score: v = st.score; break;
      // score * (1-alpha)^(now - t) orders like log(score) - t * log(1-alpha), for any now.
      case ForgetBy::decayed_score:
        v = st.score > 0 ? std::log(st.score) - static_cast<double>(st.last_access) * log_keep_
                         : -std::numeric_limits<double>::infinity();
        break;
      case ForgetBy::scored_last_access:  // alpha 1: a score is all or nothing
        v = st.score > 0 ? static_cast<double>(st.last_access) : -std::numeric_limits<double>::infinity();
        break;
      case ForgetBy::accesses: v = static_cast<double>(st.accesses); break;
      default: v = static_cast<double>(st.tick); break;
    }
    return ForgetKey{v, st.last_access};
  }
  // Whether state a is forgotten before state b, from their entries: then the smaller key.
  bool forgets_before(NodeId a, NodeId b) const noexcept {
    const ForgetKey ka = forget_key(a), kb = forget_key(b);
    if (ka.value != kb.value) return ka.value < kb.value;
    if (ka.t != kb.t) return ka.t < kb.t;
    return entries_[a].key < entries_[b].key;
  }
  // A place in the forget heap: the state's order value rounded to a float beside its id.
  // Rounding never reverses an order (x < y gives float(x) <= float(y)), so two places whose
  // floats differ compare by them alone, and only equal floats read the two entries. A sift
  // then reads the heap's own array, two children usually in one line, and the entries only on
  // ties (more of them past 2^24 ticks under LRU, FIFO, ARC and OPT, whose value is the tick).
  struct HeapPlace {
    float value;
    NodeId id;
  };
  bool forgets_before(const HeapPlace &a, const HeapPlace &b) const noexcept {
    if (a.value != b.value) return a.value < b.value;
    return forgets_before(a.id, b.id);
  }
  HeapPlace heap_place(NodeId id) const noexcept { return HeapPlace{static_cast<float>(forget_key(id).value), id}; }

  size_t home(const Key &k) const noexcept { return static_cast<size_t>(key_hash(k)) & mask_; }
  // The hash's low 32 bits: a slot's home is its tag's low bits (tables up to 2^32 slots), so
  // a deletion moves slots back without reading their entries' keys. Two keys of one home share
  // a tag with probability 2^-(32 - log2 slots) (a key comparison then decides); keys of
  // different homes never do.
  static uint32_t tag(const Key &k) noexcept { return static_cast<uint32_t>(key_hash(k)); }
  size_t slot_home(const Slot &s) const noexcept {
    return mask_ <= 0xffffffffu ? (s.tag & mask_) : home(entries_[s.id].key);
  }
  void index_insert(NodeId id) noexcept;
  void index_erase(NodeId id) noexcept;
  void rehash(size_t table_size);
  void fheap_push(NodeId id) noexcept;
  void fheap_remove(NodeId id) noexcept;
  // Each returns whether the state at i moved.
  bool fheap_sift_up(size_t i) noexcept;
  bool fheap_sift_down(size_t i) noexcept;
  NodeId allocate_id();
  // A fresh state in an id's entry for a new key: a new generation, the policy stamp kept.
  void reset_entry(NodeId id) noexcept {
    // Field by field: the place word is read without a lock (handle_resident), so it is
    // written as one atomic store, never as part of a copy of the whole entry.
    StoreEntry &e = entries_[id];
    const StoreEntry fresh{};
    e.key = fresh.key;
    e.st = fresh.st;
    e.res.set_slot(fresh.res.slot());
    e.res.set_generation(e.res.generation() + 1);
    e.res.tier = fresh.res.tier;
    e.res.flags = fresh.res.flags;
    e.res.pins = fresh.res.pins;
  }

  StoreOptions opt_;
  ForgetBy forget_by_ = ForgetBy::score;
  double log_keep_ = 0;  // log(1 - alpha), for ForgetBy::decayed_score
  PodVector<StoreEntry> entries_;
  std::vector<uint8_t> in_use_;
  std::vector<NodeId> free_ids_;
  PodVector<Slot> table_;
  size_t mask_ = 0;
  size_t size_ = 0;
  uint64_t forgotten_total_ = 0;
  // Every generation an id was handed out with before the last replace_with is below this; ids
  // issued from then on start here, so a handle of an id the swap dropped stays stale.
  uint32_t gen_floor_ = 0;
  // Min-heap of non-resident states by forget order, with each id's position (12 bytes a state).
  std::vector<HeapPlace> fheap_;
  std::vector<uint32_t> fpos_;
  std::function<void(StoreEntry *)> moved_;  // on_entries_moved
  // fixed_addresses: the entries, and how many of them handle_resident may read (written under
  // the owner's lock after each new entry is written; read without it).
  struct Published {
    std::atomic<size_t> n{0};
    Published() = default;
    Published(Published &&o) noexcept : n(o.n.load(std::memory_order_relaxed)) {}
    Published &operator=(Published &&o) noexcept {
      n.store(o.n.load(std::memory_order_relaxed), std::memory_order_release);
      return *this;
    }
  };
  const StoreEntry *fixed_ = nullptr;
  // On a line of its own: engine threads read it for every handle, the owner writes it for
  // every new id, and nothing beside it should share that traffic.
  alignas(64) Published published_;
};

}  // namespace cxltier
