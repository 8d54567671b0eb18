// SPDX-License-Identifier: Apache-2.0
// Internal assertions in three tiers, as mimalloc has them. CXLT_DEBUG_LEVEL (meson option
// debug_level) selects which run: 1 cheap checks, 2 structure checks, 3 expensive invariant
// checks on every operation. Assertions catch our bugs; they never validate API input
// (that is an Error with a message).
#pragma once

#include <cstdio>
#include <cstdlib>

#ifndef CXLT_DEBUG_LEVEL
#define CXLT_DEBUG_LEVEL 1
#endif

namespace cxltier::detail {
[[noreturn]] inline void assert_fail(const char *expr, const char *file, int line, const char *func) {
  std::fprintf(stderr, "cxltier: internal assertion failed: %s (%s:%d, %s)\n", expr, file, line, func);
  std::abort();
}
}  // namespace cxltier::detail

#define CXLT_CHECK_ALWAYS(expr) \
  ((expr) ? (void)0 : ::cxltier::detail::assert_fail(#expr, __FILE__, __LINE__, __func__))

#if CXLT_DEBUG_LEVEL >= 1
#define cxlt_assert(expr) CXLT_CHECK_ALWAYS(expr)
#else
#define cxlt_assert(expr) ((void)0)
#endif
#if CXLT_DEBUG_LEVEL >= 2
#define cxlt_assert_internal(expr) CXLT_CHECK_ALWAYS(expr)
#else
#define cxlt_assert_internal(expr) ((void)0)
#endif
#if CXLT_DEBUG_LEVEL >= 3
#define cxlt_assert_expensive(expr) CXLT_CHECK_ALWAYS(expr)
#else
#define cxlt_assert_expensive(expr) ((void)0)
#endif
