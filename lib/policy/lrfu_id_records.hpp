// SPDX-License-Identifier: Apache-2.0
// The LRFU index's per-id records, one array for every tier of a runtime. A block is live in
// at most one tier's index at a time (the runtime takes it out of one before it puts it in
// another), so the tiers' indexes share one record per id instead of keeping one each: 8
// bytes an id whatever the number of tiers. The record names the index that owns it; the
// others read an id's state only through heap entries, whose version its stamp outdates (every
// insert, erase and access bumps the version, so an entry made by one index never matches a
// stamp another has written since), and through places left in their pending lists, which they
// skip unless they own the record.
//
// An id's score and last access (what an index orders it by), and its stamp (its version and
// pending bit, which every access writes), are either kept here, in arrays beside the records
// (the default: an index on its own), or where their owner keeps them (the runtime: its score
// store's entries, which hold the same two values, so that they are not kept twice, and the
// stamp in the same 64-byte line, so that an access writes that one line and not the record's
// too). Then the owner writes the score and last access before it tells the index of an insert
// or an access, changes them only while the id is live in no index or with the index told,
// and republishes their address whenever its array moves (external_states). It never writes a
// stamp: it keeps each id's across the id's reuse (a heap may still hold an entry of its last
// use), and a fresh one is zero; it may start stamps afresh only while no index holds any
// entry, stale ones included.
//
// Not thread-safe beyond what the indexes promise: stamps and states of different ids may be
// written at once (the runtime's drain applied in parts, which writes them in its store lines);
// growth only while no index is in use.
#pragma once

#include "lib/core/assert.hpp"
#include "lib/core/pod_vector.hpp"

#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <vector>

namespace cxltier {

// Per id, in 8 bytes (the array starts on a line, so a record never straddles two): its place
// in the owner's live list, its bucket in the owner's index (of its latest entry; a pending
// block's entry is stale, and it is still counted there), and the owner. The stamp is not
// here: an access writes it, and the runtime keeps it in the line its access writes anyway.
struct LrfuIdRecord {
  static constexpr unsigned kBucketBits = 17;  // buckets 0 to 65536 (the saturated one), and none
  static constexpr uint32_t kNoBucket = (1u << kBucketBits) - 1;
  static constexpr unsigned kMaxOwner = (1u << (32 - kBucketBits)) - 1;
  uint32_t live_pos;
  uint32_t bucket : kBucketBits;
  uint32_t owner : 32 - kBucketBits;  // the tag of the index that last inserted the id (0: none yet)
};
static_assert(sizeof(LrfuIdRecord) == 8 && PodVector<LrfuIdRecord>::kAlign % sizeof(LrfuIdRecord) == 0);

// An id's stamp: its version in bits 1-31 and whether it is pending (in the owner's pending
// list, without a live entry) in bit 0. Every insert, erase and access adds 1 to the version,
// so that it outdates every entry made before; an entry carries the version it was made at. A
// version wraps after 2^31 changes of one id: an entry is mistaken for current only if it
// stayed in a heap through a multiple of that many (a rebuild drops every stale entry).
namespace lrfu_stamp {
constexpr uint32_t kPending = 1;
constexpr uint32_t kVersionStep = 2;
constexpr uint32_t version(uint32_t stamp) noexcept { return stamp >> 1; }
constexpr bool pending(uint32_t stamp) noexcept { return (stamp & kPending) != 0; }
// The stamp after an access: the next version, pending (the access outdates the id's entry).
constexpr uint32_t accessed(uint32_t stamp) noexcept { return (stamp + kVersionStep) | kPending; }
}  // namespace lrfu_stamp

// An id's score at its last access and that access's step, as an index orders it.
struct LrfuStateAt {
  double s;
  uint64_t t;
};
static_assert(sizeof(LrfuStateAt) == 16);

// A sharing index's copy of the arrays' addresses and size: an access reads a record through
// it, one load fewer than through the shared object, and every growth updates all copies.
struct LrfuIdView {
  LrfuIdRecord *data = nullptr;
  size_t n = 0;
  // Id i's score is the double at states + i * stride, its last access the uint64_t 8 bytes
  // on. own_states is the same array when the records keep them (the index writes them), and
  // null when their owner does.
  const unsigned char *states = nullptr;
  size_t stride = sizeof(LrfuStateAt);
  LrfuStateAt *own_states = nullptr;
  // Id i's stamp is stamps[i << stamp_shift]: in the records' own array of stamps, or where the
  // owner keeps it (a shift: the access's address costs no multiply). Typed: a store through a
  // uint32_t * may alias only uint32_t objects, not the pointers, sizes and doubles an access
  // reads after it, which a char-typed store (memcpy) made the compiler load again.
  uint32_t *stamps = nullptr;
  unsigned stamp_shift = 0;  // the records' own stamps: one uint32_t each

  LrfuIdRecord &operator[](size_t i) const noexcept { return data[i]; }
  size_t size() const noexcept { return n; }
  double s(size_t i) const noexcept {
    double v;
    std::memcpy(&v, states + i * stride, sizeof v);
    return v;
  }
  uint64_t t(size_t i) const noexcept {
    uint64_t v;
    std::memcpy(&v, states + i * stride + sizeof(double), sizeof v);
    return v;
  }
  uint32_t stamp(size_t i) const noexcept { return stamps[i << stamp_shift]; }
  void set_stamp(size_t i, uint32_t v) const noexcept { stamps[i << stamp_shift] = v; }
};

// The arrays, and the views of the indexes that share them.
class LrfuIdRecords {
public:
  LrfuIdRecords() = default;
  LrfuIdRecords(const LrfuIdRecords &) = delete;
  LrfuIdRecords &operator=(const LrfuIdRecords &) = delete;

  size_t size() const noexcept { return ids_.size(); }
  // Ids below n get a record (fresh ones copy `fill`, with a zero state and stamp where the
  // records keep them); may allocate.
  // One array may move before another's growth throws: the views learn of it either way.
  void resize(size_t n, const LrfuIdRecord &fill) {
    grow([&] {
      if (!external_) {
        states_.resize(n, LrfuStateAt{0.0, 0});
        stamps_.resize(n, 0);
      }
      ids_.resize(n, fill);
    });
  }
  void reserve(size_t n) {
    grow([&] {
      if (!external_) {
        states_.reserve(n);
        stamps_.reserve(n);
      }
      ids_.reserve(n);
    });
  }
  void set_huge_pages(bool on) noexcept {
    ids_.set_huge_pages(on);
    states_.set_huge_pages(on);
    stamps_.set_huge_pages(on);
  }
  // The bytes kept per id: the record, and the state and stamp unless their owner keeps them
  // (external_states).
  static constexpr size_t bytes_per_id(bool external_states) noexcept {
    return sizeof(LrfuIdRecord) + (external_states ? 0 : sizeof(LrfuStateAt) + sizeof(uint32_t));
  }
  // From now on, id i's score is the double at first + i * stride, its last access the
  // uint64_t after it and its stamp the uint32_t at first_stamp + i * stride bytes, kept by the
  // caller (see the top of this file); call again whenever that array moves, before an index
  // reads a state. The records' own states and stamps are freed.
  // `stride` is a power of two, at least 16.
  void external_states(const double *first, uint32_t *first_stamp, size_t stride) noexcept {
    cxlt_assert(stride >= sizeof(LrfuStateAt) && (stride & (stride - 1)) == 0);
    external_ = true;
    states_ = PodVector<LrfuStateAt>();
    stamps_ = PodVector<uint32_t>();
    ext_first_ = reinterpret_cast<const unsigned char *>(first);
    ext_stamps_ = first_stamp;
    ext_stride_ = stride;
    publish();
  }
  // An index keeps *view current from now on, until it detaches; returns its owner tag (1, 2,
  // ...). Throws std::length_error past LrfuIdRecord::kMaxOwner attachments (a runtime attaches
  // one index a tier).
  uint16_t attach(LrfuIdView *view) {
    if (tags_ >= LrfuIdRecord::kMaxOwner) throw std::length_error("LRFU id records: too many indexes attached");
    views_.push_back(view);
    *view = current();
    return ++tags_;
  }
  void detach(LrfuIdView *view) noexcept { std::erase(views_, view); }

private:
  template <typename F>
  void grow(F &&f) {
    try {
      f();
    } catch (...) {
      publish();
      throw;
    }
    publish();
  }
  LrfuIdView current() noexcept {
    LrfuIdView v{ids_.data(), ids_.size()};
    if (external_) {
      v.states = ext_first_;
      v.stride = ext_stride_;
      v.stamps = ext_stamps_;
      v.stamp_shift = static_cast<unsigned>(std::countr_zero(ext_stride_ / sizeof(uint32_t)));
    } else {
      v.states = reinterpret_cast<const unsigned char *>(states_.data());
      v.own_states = states_.data();
      v.stamps = stamps_.data();
      v.stamp_shift = 0;
    }
    return v;
  }
  void publish() noexcept {
    const LrfuIdView v = current();
    for (LrfuIdView *p : views_) *p = v;
  }
  PodVector<LrfuIdRecord> ids_;
  PodVector<LrfuStateAt> states_;  // while the records keep the states
  PodVector<uint32_t> stamps_;     // and the stamps
  bool external_ = false;
  const unsigned char *ext_first_ = nullptr;
  uint32_t *ext_stamps_ = nullptr;
  size_t ext_stride_ = 0;
  std::vector<LrfuIdView *> views_;
  uint16_t tags_ = 0;
};

}  // namespace cxltier
