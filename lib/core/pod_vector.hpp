// SPDX-License-Identifier: Apache-2.0
// A growable array of trivially copyable elements that grows with realloc. For the per-state
// arrays that a replay grows to millions of entries (the store's 64-byte entries, the LRFU
// index's per-id records): past glibc's mmap threshold (32 MiB at most) realloc moves the pages
// with mremap instead of copying them, so a doubling costs neither a copy of the old part nor a
// second first touch of it. std::vector must allocate, copy and free instead (measured on the
// 40-copy replay: 10 % of its time went to growing these two arrays).
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

namespace cxltier {

template <typename T>
class PodVector {
  static_assert(std::is_trivially_copyable_v<T> && std::is_trivially_destructible_v<T>,
                "PodVector moves elements with realloc");

public:
  PodVector() = default;
  PodVector(const PodVector &) = delete;
  PodVector &operator=(const PodVector &) = delete;
  PodVector(PodVector &&o) noexcept
      : data_(std::exchange(o.data_, nullptr)), size_(std::exchange(o.size_, 0)), cap_(std::exchange(o.cap_, 0)) {}
  PodVector &operator=(PodVector &&o) noexcept {
    if (this != &o) {
      std::free(data_);
      data_ = std::exchange(o.data_, nullptr);
      size_ = std::exchange(o.size_, 0);
      cap_ = std::exchange(o.cap_, 0);
    }
    return *this;
  }
  ~PodVector() { std::free(data_); }

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

  void reserve(size_t n) {
    if (n <= cap_) return;
    if (n > SIZE_MAX / sizeof(T)) throw std::bad_alloc();
    void *p = std::realloc(data_, n * sizeof(T));
    if (p == nullptr) throw std::bad_alloc();
    data_ = static_cast<T *>(p);
    cap_ = n;
    advise_huge_pages(p, n * sizeof(T));
  }
  // New elements are copies of `fill`.
  void resize(size_t n, const T &fill = T{}) {
    if (n > cap_) reserve(std::max(n, cap_ * 2));
    for (size_t i = size_; i < n; ++i) new (data_ + i) T(fill);
    size_ = n;
  }
  T &emplace_back() {
    if (size_ == cap_) reserve(cap_ ? cap_ * 2 : 16);
    new (data_ + size_) T{};
    return data_[size_++];
  }
  void push_back(const T &v) {
    if (size_ == cap_) reserve(cap_ ? cap_ * 2 : 16);
    new (data_ + size_) T(v);
    ++size_;
  }
  void clear() noexcept { size_ = 0; }

private:
  // Arrays of 4 MiB and more ask for huge pages (lib/core/huge_pages.hpp) after every growth.
  static void advise_huge_pages(void *p, size_t bytes) noexcept {
    if (bytes >= 2 * kHugePageBytes) cxltier::advise_huge_pages(p, bytes);
  }

  T *data_ = nullptr;
  size_t size_ = 0;
  size_t cap_ = 0;
};

}  // namespace cxltier
