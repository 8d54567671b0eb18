// SPDX-License-Identifier: Apache-2.0
// Copy kernels: memcpy and non-temporal stores (AVX2, SSE2, scalar movnti), chosen at run time
// with __builtin_cpu_supports so one binary runs on every x86-64 and uses AVX2 where present.
// Other architectures get memcpy for every kernel (copy_kernel_available says so).
#include "copy.hpp"

#include <cstdint>
#include <cstring>

#if defined(__x86_64__)
#include <immintrin.h>
#define CXLT_COPY_X86 1
#else
#define CXLT_COPY_X86 0
#endif

namespace cxltier {

namespace {

// Below this, streaming stores (which bypass the cache and need an sfence) cost more than
// they save: use ordinary stores.
constexpr size_t kSmall = 256;

void copy_memcpy(void *dst, const void *src, size_t n) noexcept { std::memcpy(dst, src, n); }

#if CXLT_COPY_X86
// Each kernel: ordinary stores up to the destination's alignment, streaming stores for the
// aligned body (loads may be unaligned), ordinary stores for the tail, then sfence so the
// streamed bytes are ordered before anything the caller stores next.

__attribute__((target("avx2"))) void copy_nt_avx2(void *dst, const void *src, size_t n) noexcept {
  auto *d = static_cast<char *>(dst);
  auto *s = static_cast<const char *>(src);
  if (n < kSmall) {
    std::memcpy(d, s, n);
    return;
  }
  size_t head = (32 - (reinterpret_cast<uintptr_t>(d) & 31)) & 31;
  std::memcpy(d, s, head);
  d += head, s += head, n -= head;
  const size_t body = n & ~size_t{127};
  for (const char *end = s + body; s < end; s += 128, d += 128) {
    __m256i a = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(s));
    __m256i b = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(s + 32));
    __m256i c = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(s + 64));
    __m256i e = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(s + 96));
    _mm256_stream_si256(reinterpret_cast<__m256i *>(d), a);
    _mm256_stream_si256(reinterpret_cast<__m256i *>(d + 32), b);
    _mm256_stream_si256(reinterpret_cast<__m256i *>(d + 64), c);
    _mm256_stream_si256(reinterpret_cast<__m256i *>(d + 96), e);
  }
  std::memcpy(d, s, n - body);
  _mm_sfence();
}

void copy_nt_sse2(void *dst, const void *src, size_t n) noexcept {
  auto *d = static_cast<char *>(dst);
  auto *s = static_cast<const char *>(src);
  if (n < kSmall) {
    std::memcpy(d, s, n);
    return;
  }
  size_t head = (16 - (reinterpret_cast<uintptr_t>(d) & 15)) & 15;
  std::memcpy(d, s, head);
  d += head, s += head, n -= head;
  const size_t body = n & ~size_t{63};
  for (const char *end = s + body; s < end; s += 64, d += 64) {
    __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i *>(s));
    __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i *>(s + 16));
    __m128i c = _mm_loadu_si128(reinterpret_cast<const __m128i *>(s + 32));
    __m128i e = _mm_loadu_si128(reinterpret_cast<const __m128i *>(s + 48));
    _mm_stream_si128(reinterpret_cast<__m128i *>(d), a);
    _mm_stream_si128(reinterpret_cast<__m128i *>(d + 16), b);
    _mm_stream_si128(reinterpret_cast<__m128i *>(d + 32), c);
    _mm_stream_si128(reinterpret_cast<__m128i *>(d + 48), e);
  }
  std::memcpy(d, s, n - body);
  _mm_sfence();
}

void copy_nt_scalar(void *dst, const void *src, size_t n) noexcept {
  auto *d = static_cast<char *>(dst);
  auto *s = static_cast<const char *>(src);
  if (n < kSmall) {
    std::memcpy(d, s, n);
    return;
  }
  size_t head = (8 - (reinterpret_cast<uintptr_t>(d) & 7)) & 7;
  std::memcpy(d, s, head);
  d += head, s += head, n -= head;
  const size_t body = n & ~size_t{31};
  for (const char *end = s + body; s < end; s += 32, d += 32) {
    long long v[4];
    std::memcpy(v, s, sizeof v);  // unaligned loads without aliasing trouble
    _mm_stream_si64(reinterpret_cast<long long *>(d), v[0]);
    _mm_stream_si64(reinterpret_cast<long long *>(d + 8), v[1]);
    _mm_stream_si64(reinterpret_cast<long long *>(d + 16), v[2]);
    _mm_stream_si64(reinterpret_cast<long long *>(d + 24), v[3]);
  }
  std::memcpy(d, s, n - body);
  _mm_sfence();
}
#endif

struct Dispatch {
  bool avx2 = false;
  bool x86 = false;
  Dispatch() {
#if CXLT_COPY_X86
    __builtin_cpu_init();
    x86 = true;
    avx2 = __builtin_cpu_supports("avx2");
#endif
  }
};

const Dispatch &dispatch() {
  static const Dispatch d;
  return d;
}

}  // namespace

const char *copy_kernel_name(CopyKernel k) noexcept {
  switch (k) {
  case CopyKernel::memcpy: return "memcpy";
  case CopyKernel::nt: return "nt";
  case CopyKernel::nt_avx2: return "nt-avx2";
  case CopyKernel::nt_sse2: return "nt-sse2";
  case CopyKernel::nt_scalar: return "nt-scalar";
  }
  return "?";
}

std::optional<CopyKernel> parse_copy_kernel(std::string_view name) noexcept {
  for (CopyKernel k : {CopyKernel::memcpy, CopyKernel::nt, CopyKernel::nt_avx2, CopyKernel::nt_sse2,
                       CopyKernel::nt_scalar}) {
    if (name == copy_kernel_name(k)) return k;
  }
  return std::nullopt;
}

bool copy_kernel_available(CopyKernel k) noexcept {
  const Dispatch &d = dispatch();
  switch (k) {
  case CopyKernel::memcpy:
  case CopyKernel::nt: return true;
  case CopyKernel::nt_avx2: return d.avx2;
  case CopyKernel::nt_sse2:
  case CopyKernel::nt_scalar: return d.x86;
  }
  return false;
}

CopyKernel resolve_copy_kernel(CopyKernel k) noexcept {
  if (k != CopyKernel::nt) return k;
  const Dispatch &d = dispatch();
  if (d.avx2) return CopyKernel::nt_avx2;
  if (d.x86) return CopyKernel::nt_sse2;
  return CopyKernel::memcpy;
}

std::vector<CopyKernel> available_copy_kernels() {
  std::vector<CopyKernel> out{CopyKernel::memcpy};
  for (CopyKernel k : {CopyKernel::nt_avx2, CopyKernel::nt_sse2, CopyKernel::nt_scalar}) {
    if (copy_kernel_available(k)) out.push_back(k);
  }
  return out;
}

CopyFn copy_kernel_fn(CopyKernel k) noexcept {
  if (!copy_kernel_available(k)) return nullptr;
  switch (resolve_copy_kernel(k)) {
  case CopyKernel::memcpy: return copy_memcpy;
#if CXLT_COPY_X86
  case CopyKernel::nt_avx2: return copy_nt_avx2;
  case CopyKernel::nt_sse2: return copy_nt_sse2;
  case CopyKernel::nt_scalar: return copy_nt_scalar;
#endif
  default: return copy_memcpy;
  }
}

void copy_block(CopyKernel k, void *dst, const void *src, size_t bytes) noexcept {
  CopyFn fn = copy_kernel_fn(k);
  (fn ? fn : copy_memcpy)(dst, src, bytes);
}

}  // namespace cxltier
