// SPDX-License-Identifier: Apache-2.0
// A growable array of trivially copyable elements that grows with realloc. For the per-state
// arrays that a replay grows to millions of entries (the store's 64-byte entries, the LRFU
// index's per-id records): past glibc's mmap threshold (32 MiB at most) realloc moves the pages
// with mremap instead of copying them, so a doubling costs neither a copy of the old part nor a
// second first touch of it. std::vector must allocate, copy and free instead (measured on the
// 40-copy replay: 10 % of its time went to growing these two arrays).
//
// Elements start on a cache line (kAlign bytes): the store's entries are 64 bytes so that one
// is one line, but glibc puts a large block 16 bytes into its first page, so without this every
// entry spanned two lines and an access to it missed twice. realloc keeps only 16-byte
// alignment, so a block is kAlign bytes larger than its elements, and when realloc moves it to
// an address with another offset from the line the elements are moved down or up within it
// (only while the block is below the mmap threshold: a mapped block keeps its offset, 16 bytes
// into its page).
//
// Pages are populated ahead of the elements (lib/core/prefault.hpp): when a push or a resize
// reaches the populated part's end, the pages of the next max(1 MiB, an eighth of the elements)
// are populated in one system call, within the capacity, so a growing array takes a few calls
// instead of a page fault per 4 KiB. Its memory runs ahead of its size by at most that much.
// The first 1 MiB of elements is left to fault, however much capacity was reserved.
//
// The subset of std::vector the store and the index use; element addresses change on growth,
// as a vector's do. Allocation failure throws std::bad_alloc.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <new>
#include <type_traits>
#include <utility>

#include "lib/core/huge_pages.hpp"
#include "lib/core/prefault.hpp"

namespace cxltier {

template <typename T>
class PodVector {
  static_assert(std::is_trivially_copyable_v<T> && std::is_trivially_destructible_v<T>,
                "PodVector moves elements with realloc");

public:
  PodVector() = default;
  PodVector(const PodVector &) = delete;
  PodVector &operator=(const PodVector &) = delete;
  static constexpr size_t kAlign = 64;

  PodVector(PodVector &&o) noexcept
      : raw_(std::exchange(o.raw_, nullptr)), huge_pages_(o.huge_pages_), data_(std::exchange(o.data_, nullptr)),
        size_(std::exchange(o.size_, 0)), cap_(std::exchange(o.cap_, 0)), populated_(std::exchange(o.populated_, 0)) {}
  // The huge-page setting belongs to the vector, not to its elements: a move assignment keeps it.
  PodVector &operator=(PodVector &&o) noexcept {
    if (this != &o) {
      std::free(raw_);
      raw_ = std::exchange(o.raw_, nullptr);
      data_ = std::exchange(o.data_, nullptr);
      size_ = std::exchange(o.size_, 0);
      cap_ = std::exchange(o.cap_, 0);
      populated_ = std::exchange(o.populated_, 0);
    }
    return *this;
  }
  ~PodVector() { std::free(raw_); }

  size_t size() const noexcept { return size_; }
  size_t capacity() const noexcept { return cap_; }
  bool empty() const noexcept { return size_ == 0; }
  T *data() noexcept { return data_; }
  const T *data() const noexcept { return data_; }
  T &operator[](size_t i) noexcept { return data_[i]; }
  const T &operator[](size_t i) const noexcept { return data_[i]; }
  T *begin() noexcept { return data_; }
  T *end() noexcept { return data_ + size_; }
  const T *begin() const noexcept { return data_; }
  const T *end() const noexcept { return data_ + size_; }
  T &front() noexcept { return data_[0]; }
  const T &front() const noexcept { return data_[0]; }
  T &back() noexcept { return data_[size_ - 1]; }
  const T &back() const noexcept { return data_[size_ - 1]; }

  void reserve(size_t n) {
    if (n <= cap_) return;
    if (n > (SIZE_MAX - kAlign) / sizeof(T)) throw std::bad_alloc();
    const size_t old_offset = data_ ? static_cast<size_t>(reinterpret_cast<char *>(data_) - raw_) : 0;
    void *p = std::realloc(raw_, n * sizeof(T) + kAlign);
    if (p == nullptr) throw std::bad_alloc();
    raw_ = static_cast<char *>(p);
    const size_t offset = (kAlign - reinterpret_cast<uintptr_t>(p) % kAlign) % kAlign;
    if (offset != old_offset && size_ != 0) std::memmove(raw_ + offset, raw_ + old_offset, size_ * sizeof(T));
    data_ = reinterpret_cast<T *>(raw_ + offset);
    cap_ = n;
    populated_ = std::min(populated_, size_);  // a copying realloc populated only what it copied
    if (huge_pages_) advise_huge_pages(data_, n * sizeof(T));
  }
  // Whether growth from now on asks for huge pages (the default; see advise_huge_pages below). A
  // short-lived owner that touches its pages once turns it off: a huge page's first touch can
  // cost more than its TLB misses save (docs/runtime.md, "Huge pages").
  void set_huge_pages(bool on) noexcept { huge_pages_ = on; }
  // New elements are copies of `fill`.
  void resize(size_t n, const T &fill = T{}) {
    if (n > cap_) reserve(std::max(n, cap_ * 2));
    if (n > populated_) populate_ahead(n);
    for (size_t i = size_; i < n; ++i) new (data_ + i) T(fill);
    size_ = n;
  }
  T &emplace_back() {
    if (size_ == cap_) reserve(cap_ ? cap_ * 2 : 16);
    if (size_ >= populated_) populate_ahead(size_ + 1);
    new (data_ + size_) T{};
    return data_[size_++];
  }
  void push_back(const T &v) {
    if (size_ == cap_) reserve(cap_ ? cap_ * 2 : 16);
    if (size_ >= populated_) populate_ahead(size_ + 1);
    new (data_ + size_) T(v);
    ++size_;
  }
  void pop_back() noexcept { --size_; }
  void clear() noexcept { size_ = 0; }
  // Drops the first n elements, moving the rest down (positions change, capacity stays).
  void erase_front(size_t n) noexcept {
    std::memmove(static_cast<void *>(data_), data_ + n, (size_ - n) * sizeof(T));
    size_ -= n;
  }

private:
  static constexpr size_t kPopulateMinBytes = size_t{1} << 20;
  // Elements [populated_, n) are about to be written: populate their pages and those of the
  // next stretch (see the top of this file). Called only when n > populated_.
  void populate_ahead(size_t n) noexcept {
    const size_t small = kPopulateMinBytes / sizeof(T);
    if (n < small) {  // under 1 MiB in use: left to fault, whatever the capacity reserved
      populated_ = std::min(cap_, small);
      return;
    }
    const size_t ahead = std::max(small, n / 8);
    const size_t to = std::min(cap_, n + ahead);
    prefault_pages(data_ + populated_, (to - populated_) * sizeof(T));
    populated_ = to;
  }
  // Arrays of 4 MiB and more ask for huge pages (lib/core/huge_pages.hpp) after every growth.
  static void advise_huge_pages(void *p, size_t bytes) noexcept {
    if (bytes >= 2 * kHugePageBytes) cxltier::advise_huge_pages(p, bytes);
  }

  char *raw_ = nullptr;  // what realloc returned; data_ is the first kAlign boundary in it
  bool huge_pages_ = true;
  T *data_ = nullptr;
  size_t size_ = 0;
  size_t cap_ = 0;
  size_t populated_ = 0;  // elements [0, populated_) have their pages populated (or are in the first 1 MiB)
};

}  // namespace cxltier
