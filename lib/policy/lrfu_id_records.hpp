// SPDX-License-Identifier: Apache-2.0
// The LRFU index's per-id records, one array for every tier of a runtime. A block is live in
// at most one tier's index at a time (the runtime takes it out of one before it puts it in
// another), so the tiers' indexes share one record per id instead of keeping one each: 32
// bytes an id whatever the number of tiers. The record names the index that owns it; the
// others read it only through heap entries, whose version it outdates (every insert, erase
// and access bumps the version, so an entry made by one index never matches a record another
// has written since), and through places left in their pending lists, which they skip unless
// they own the record.
//
// Not thread-safe beyond what the indexes promise: records of different ids may be written
// at once (the runtime's drain applied in parts); growth only while no index is in use.
#pragma once

#include "lib/core/pod_vector.hpp"

#include <cstddef>
#include <cstdint>
#include <vector>

namespace cxltier {

// Per id, in one record so that an access touches one cache line (32 bytes, and the array
// starts on a line, so a record never straddles two): current state (the auditor reads it),
// version, bucket in the owner's index (of its latest entry; a pending block's entry is
// stale, and it is still counted there), place in the owner's live list, whether it is pending
// (in the owner's pending list, without a live entry), and the owner.
struct LrfuIdRecord {
  double s;
  uint64_t t;
  uint32_t version;
  uint32_t bucket;
  uint32_t live_pos;
  uint16_t pending;
  uint16_t owner;  // the tag of the index that last inserted the id (0: none yet)
};
static_assert(sizeof(LrfuIdRecord) == 32 && PodVector<LrfuIdRecord>::kAlign % sizeof(LrfuIdRecord) == 0);

// A sharing index's copy of the array's address and size: an access reads a record through
// it, one load fewer than through the shared object, and every growth updates all copies.
struct LrfuIdView {
  LrfuIdRecord *data = nullptr;
  size_t n = 0;
  LrfuIdRecord &operator[](size_t i) const noexcept { return data[i]; }
  size_t size() const noexcept { return n; }
};

// The array, and the views of the indexes that share it.
class LrfuIdRecords {
public:
  LrfuIdRecords() = default;
  LrfuIdRecords(const LrfuIdRecords &) = delete;
  LrfuIdRecords &operator=(const LrfuIdRecords &) = delete;

  size_t size() const noexcept { return ids_.size(); }
  // Ids below n get a record (fresh ones copy `fill`); may allocate.
  void resize(size_t n, const LrfuIdRecord &fill) {
    ids_.resize(n, fill);
    publish();
  }
  void reserve(size_t n) {
    ids_.reserve(n);
    publish();
  }
  void set_huge_pages(bool on) noexcept { ids_.set_huge_pages(on); }
  // An index keeps *view current from now on, until it detaches; returns its owner tag (1, 2,
  // ...).
  uint16_t attach(LrfuIdView *view) {
    views_.push_back(view);
    *view = LrfuIdView{ids_.data(), ids_.size()};
    return ++tags_;
  }
  void detach(LrfuIdView *view) noexcept { std::erase(views_, view); }

private:
  void publish() noexcept {
    for (LrfuIdView *v : views_) *v = LrfuIdView{ids_.data(), ids_.size()};
  }
  PodVector<LrfuIdRecord> ids_;
  std::vector<LrfuIdView *> views_;
  uint16_t tags_ = 0;
};

}  // namespace cxltier
