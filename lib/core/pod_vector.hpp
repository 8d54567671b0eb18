// SPDX-License-Identifier: Apache-2.0
// A growable array of trivially copyable elements that grows without copying once it is large.
// For the per-state arrays that a replay grows to millions of entries (the store's 64-byte
// entries, the LRFU index's per-id records) and the index's bucket heaps, which grow under the
// runtime's lock. std::vector must allocate, copy and free on every doubling (measured on the
// 40-copy replay: 10 % of its time went to growing these two arrays).
//
// Below kMapBytes the elements live in a malloc'd block that grows with realloc. From kMapBytes
// on they live in a mapping of their own (mmap), which grows with mremap(MREMAP_MAYMOVE): the
// kernel moves the page tables, so a doubling costs neither a copy of the old part nor a second
// first touch of it, whatever its size. (glibc's realloc does the same only for its own mmapped
// blocks, and its mremap fails with EFAULT once the block's pages hold two kinds of advice, as
// they did when only the 2 MiB-aligned middle was advised to use huge pages: glibc then copied
// the whole array, 63 ms at 20 MiB on this machine, in one push.)
//
// Elements start on a cache line (kAlign bytes): the store's entries are 64 bytes so that one
// is one line, but glibc puts a block 16 bytes into its first line, so without this every entry
// spanned two lines and an access to it missed twice. realloc keeps only 16-byte alignment, so a
// malloc'd block is kAlign bytes larger than its elements, and when realloc moves it to an
// address with another offset from the line the elements are moved down or up within it. A
// mapping starts on a page.
//
// Pages are populated ahead of the elements (lib/core/prefault.hpp): when a push or a resize
// reaches the populated part's end, the pages of the next max(1 MiB, an eighth of the elements)
// are populated in one system call, within the capacity, so a growing array takes a few calls
// instead of a page fault per 4 KiB. Its memory runs ahead of its size by at most that much.
// The first 1 MiB of elements is left to fault, however much capacity was reserved.
//
// The subset of std::vector the store and the index use; element addresses change on growth,
// as a vector's do, unless fix_address() gave the array a room of its own: from then on the
// elements stay where they are for the array's life (the runtime's engine threads read the
// store's entries without a lock). Allocation failure throws std::bad_alloc.
#pragma once

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <new>
#include <type_traits>
#include <utility>

#include "lib/core/huge_pages.hpp"
#include "lib/core/prefault.hpp"

#include <sys/mman.h>

namespace cxltier {

template <typename T>
class PodVector {
  static_assert(std::is_trivially_copyable_v<T> && std::is_trivially_destructible_v<T>,
                "PodVector moves elements with realloc and mremap");

public:
  PodVector() = default;
  PodVector(const PodVector &) = delete;
  PodVector &operator=(const PodVector &) = delete;
  static constexpr size_t kAlign = 64;

  PodVector(PodVector &&o) noexcept
      : raw_(std::exchange(o.raw_, nullptr)), mapped_bytes_(std::exchange(o.mapped_bytes_, 0)),
        room_(std::exchange(o.room_, nullptr)), room_bytes_(std::exchange(o.room_bytes_, 0)),
        room_advised_(o.room_advised_), huge_pages_(o.huge_pages_),
        data_(std::exchange(o.data_, nullptr)), size_(std::exchange(o.size_, 0)), cap_(std::exchange(o.cap_, 0)),
        populated_(std::exchange(o.populated_, 0)) {}
  // The huge-page setting belongs to the vector, not to its elements: a move assignment keeps it.
  PodVector &operator=(PodVector &&o) noexcept {
    if (this != &o) {
      release();
      raw_ = std::exchange(o.raw_, nullptr);
      mapped_bytes_ = std::exchange(o.mapped_bytes_, 0);
      room_ = std::exchange(o.room_, nullptr);
      room_bytes_ = std::exchange(o.room_bytes_, 0);
      room_advised_ = o.room_advised_;
      data_ = std::exchange(o.data_, nullptr);
      size_ = std::exchange(o.size_, 0);
      cap_ = std::exchange(o.cap_, 0);
      populated_ = std::exchange(o.populated_, 0);
    }
    return *this;
  }
  ~PodVector() { release(); }

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
    if (n > (SIZE_MAX - kAlign - kMapBytes) / sizeof(T)) throw std::bad_alloc();
    if (room_bytes_ != 0) {
      grow_in_room(n);
      return;
    }
    if (n * sizeof(T) >= kMapBytes) {
      grow_mapped(n);
    } else {
      const size_t old_offset = data_ ? static_cast<size_t>(reinterpret_cast<char *>(data_) - raw_) : 0;
      void *p = std::realloc(raw_, n * sizeof(T) + kAlign);
      if (p == nullptr) throw std::bad_alloc();
      raw_ = static_cast<char *>(p);
      const size_t offset = (kAlign - reinterpret_cast<uintptr_t>(p) % kAlign) % kAlign;
      if (offset != old_offset && size_ != 0) std::memmove(raw_ + offset, raw_ + old_offset, size_ * sizeof(T));
      data_ = reinterpret_cast<T *>(raw_ + offset);
      populated_ = std::min(populated_, size_);  // a copying realloc populated only what it copied
    }
    cap_ = n;
  }
  // Reserves address room for n elements, moves the elements there, and keeps them at that
  // address from then on: growth within the room makes more of it writable in place (mprotect),
  // and growth past it throws std::bad_alloc. The room is mapped PROT_NONE, which commits no
  // memory; the kernel counts each part against its overcommit policy as it becomes writable,
  // as it would a mapping of that size. Throws std::bad_alloc, leaving the array as it was, when
  // the address space has no such room (a ulimit -v) or the first part cannot be made
  // writable. Once only.
  void fix_address(size_t n) {
    if (room_bytes_ != 0 || n < size_ || n > (SIZE_MAX - 2 * kHugePageBytes) / sizeof(T)) throw std::bad_alloc();
    const size_t page = base_page_bytes();
    // One huge page more than the room, so that the elements can start on a huge page.
    const size_t bytes = ((std::max<size_t>(n, 1) * sizeof(T) + page - 1) / page) * page + kHugePageBytes;
    void *r = mmap(nullptr, bytes, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (r == MAP_FAILED) throw std::bad_alloc();
    char *start = reinterpret_cast<char *>((reinterpret_cast<uintptr_t>(r) + kHugePageBytes - 1) & ~(uintptr_t{kHugePageBytes} - 1));
    const size_t keep = cap_;
    char *const old_raw = raw_;
    const size_t old_mapped = mapped_bytes_;
    T *const old_data = data_;
    const size_t old_populated = populated_;
    room_ = static_cast<char *>(r);
    room_bytes_ = bytes;
    room_advised_ = false;
    raw_ = start;
    mapped_bytes_ = 0;
    data_ = reinterpret_cast<T *>(start);
    cap_ = 0;
    populated_ = 0;
    try {
      grow_in_room(std::max(size_, size_t{16}));
    } catch (...) {
      (void)munmap(r, bytes);
      room_ = nullptr;
      room_bytes_ = 0;
      raw_ = old_raw;
      mapped_bytes_ = old_mapped;
      data_ = old_data;
      cap_ = keep;
      populated_ = old_populated;
      throw;
    }
    if (size_ != 0) std::memcpy(static_cast<void *>(data_), old_data, size_ * sizeof(T));
    if (old_mapped != 0) {
      (void)munmap(old_raw, old_mapped);
    } else {
      std::free(old_raw);
    }
  }
  bool address_fixed() const noexcept { return room_bytes_ != 0; }
  // The elements the room holds (0 without one).
  size_t room() const noexcept { return room_bytes_ ? static_cast<size_t>(room_ + room_bytes_ - raw_) / sizeof(T) : 0; }
  // Whether growth from now on asks for huge pages (the default; arrays of 4 MiB and more, see
  // grow_mapped below; lib/core/huge_pages.hpp says why). A mapping advised already keeps its
  // advice as it grows: set this before the first growth past 4 MiB. A
  // short-lived owner that touches its pages once turns it off: a huge page's first touch can
  // cost more than its TLB misses save (docs/runtime.md, "Huge pages").
  void set_huge_pages(bool on) noexcept { huge_pages_ = on; }
  // New elements are copies of `fill`.
  void resize(size_t n, const T &fill = T{}) {
    if (n > cap_) reserve(grown(n));
    if (n > populated_) populate_ahead(n);
    for (size_t i = size_; i < n; ++i) new (data_ + i) T(fill);
    size_ = n;
  }
  T &emplace_back() {
    if (size_ == cap_) reserve(grown(size_ + 1));
    if (size_ >= populated_) populate_ahead(size_ + 1);
    new (data_ + size_) T{};
    return data_[size_++];
  }
  void push_back(const T &v) {
    if (size_ == cap_) reserve(grown(size_ + 1));
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
  // Arrays of kMapBytes and more live in a mapping of their own (see the top of this file).
  static constexpr size_t kMapBytes = size_t{1} << 20;

  // Moves the elements to a mapping that holds n of them: a new one (from a malloc'd block,
  // copying its elements), or the same one grown by mremap. The whole mapping is advised to use
  // huge pages when the setting is on and it spans two of them: advice on part of it would split
  // it in two, and mremap cannot grow a range that spans two.
  void grow_mapped(size_t n) {
    const size_t page = base_page_bytes();
    const size_t bytes = (n * sizeof(T) + page - 1) / page * page;
    // Advised before a copy, so that the copy's first touch already gets huge pages.
    auto advise = [&](void *at) {
      if (bytes >= 2 * kHugePageBytes) advise_huge(at, bytes);
    };
    // A new mapping holding a copy of the elements; the caller releases the old block.
    auto copy_to_new = [&]() -> void * {
      void *q = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
      if (q == MAP_FAILED) throw std::bad_alloc();
      advise(q);
      if (size_ != 0) std::memcpy(q, data_, size_ * sizeof(T));
      populated_ = std::min(populated_, size_);  // the copy populated only what it copied
      return q;
    };
    void *p;
    if (mapped_bytes_ != 0) {
      p = mremap(raw_, mapped_bytes_, bytes, MREMAP_MAYMOVE);
      if (p == MAP_FAILED) {
        // Out of memory, or a mapping mremap cannot move as one (split by someone's madvise,
        // mprotect or mbind on part of it): a new mapping and a copy, as glibc would do.
        if (errno == ENOMEM) throw std::bad_alloc();
        p = copy_to_new();
        (void)munmap(raw_, mapped_bytes_);
      } else {
        advise(p);
      }
    } else {
      p = copy_to_new();
      std::free(raw_);
    }
    raw_ = static_cast<char *>(p);
    mapped_bytes_ = bytes;
    data_ = reinterpret_cast<T *>(raw_);
  }
  // Asks for transparent huge pages over [at, at + bytes), when the setting is on (a mapping or
  // a room of 4 MiB and more: grow_mapped and grow_in_room decide when).
  void advise_huge(void *at, size_t bytes) const noexcept {
#ifdef MADV_HUGEPAGE
    if (huge_pages_) (void)madvise(at, bytes, MADV_HUGEPAGE);
#else
    (void)at;
    (void)bytes;
#endif
  }
  // The capacity to grow to for `need` elements: double, or 16 at first; within a room, no
  // more than the room holds (past it, `need` itself, which reserve refuses).
  size_t grown(size_t need) const noexcept {
    size_t n = std::max(need, cap_ ? cap_ * 2 : size_t{16});
    if (room_bytes_ != 0) n = std::max(need, std::min(n, room()));
    return n;
  }
  // Makes the first n elements of the room (fix_address) writable, in whole pages. Once 4 MiB
  // of it are, the whole room from the elements on is advised to use huge pages, as grow_mapped
  // advises a mapping of that size (one madvise over the whole room: no split).
  void grow_in_room(size_t n) {
    const size_t page = base_page_bytes();
    if (n > room()) throw std::bad_alloc();
    const size_t bytes = (n * sizeof(T) + page - 1) / page * page;
    if (bytes > mapped_bytes_) {
      if (mprotect(raw_ + mapped_bytes_, bytes - mapped_bytes_, PROT_READ | PROT_WRITE) != 0) throw std::bad_alloc();
      mapped_bytes_ = bytes;
    }
    if (!room_advised_ && mapped_bytes_ >= 2 * kHugePageBytes) {
      advise_huge(raw_, static_cast<size_t>(room_ + room_bytes_ - raw_));
      room_advised_ = true;
    }
    cap_ = mapped_bytes_ / sizeof(T);
  }
  void release() noexcept {
    if (room_bytes_ != 0) {
      (void)munmap(room_, room_bytes_);
      room_bytes_ = 0;
      mapped_bytes_ = 0;
      return;
    }
    if (mapped_bytes_ != 0) {
      (void)munmap(raw_, mapped_bytes_);
    } else {
      std::free(raw_);
    }
    mapped_bytes_ = 0;
  }

  char *raw_ = nullptr;     // the malloc'd block (data_ is its first kAlign boundary) or the mapping
  size_t mapped_bytes_ = 0;  // the mapping's length (in a room, its writable part); 0 while the elements are in a malloc'd block
  char *room_ = nullptr;     // fix_address's mapping (raw_ is its first huge page boundary)
  size_t room_bytes_ = 0;    // its length; 0 when the array has none
  bool room_advised_ = false;  // the room has had its huge-page advice (grow_in_room)
  bool huge_pages_ = true;
  T *data_ = nullptr;
  size_t size_ = 0;
  size_t cap_ = 0;
  size_t populated_ = 0;  // elements [0, populated_) have their pages populated (or are in the first 1 MiB)
};

}  // namespace cxltier
