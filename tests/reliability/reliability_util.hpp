// SPDX-License-Identifier: Apache-2.0
// Helpers for the reliability tests: how much to run (scaled down under sanitizers, up with
// CXLT_RELIABILITY_SCALE), the process's resident memory and open file descriptors (leak
// checks), and LeakSanitizer's on-demand check when the build has it.
#pragma once

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <dirent.h>
#include <string>
#include <unistd.h>

#if defined(__SANITIZE_ADDRESS__)
#define CXLT_TEST_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define CXLT_TEST_ASAN 1
#endif
#endif
#if defined(__SANITIZE_THREAD__)
#define CXLT_TEST_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define CXLT_TEST_TSAN 1
#endif
#endif
#if defined(CXLT_TEST_ASAN)
#include <sanitizer/lsan_interface.h>
#endif

namespace cxlt_rel {

#if defined(CXLT_TEST_ASAN) || defined(CXLT_TEST_TSAN)
constexpr bool kSanitized = true;
#else
constexpr bool kSanitized = false;
#endif

// `normal` units of work, divided by `sanitized_divisor` under a sanitizer (they run 3-15x
// slower) and multiplied by $CXLT_RELIABILITY_SCALE (a positive number; default 1).
inline uint64_t scaled(uint64_t normal, uint64_t sanitized_divisor = 4) {
  double n = static_cast<double>(kSanitized ? normal / sanitized_divisor : normal);
  if (const char *s = std::getenv("CXLT_RELIABILITY_SCALE")) {
    double f = std::strtod(s, nullptr);
    if (f > 0) n *= f;
  }
  return n < 1 ? 1 : static_cast<uint64_t>(n);
}

// Resident set size in bytes (/proc/self/statm, second field, in pages).
inline uint64_t rss_bytes() {
  FILE *f = std::fopen("/proc/self/statm", "r");
  if (!f) return 0;
  unsigned long long size = 0, resident = 0;
  int n = std::fscanf(f, "%llu %llu", &size, &resident);
  std::fclose(f);
  return n == 2 ? resident * static_cast<uint64_t>(sysconf(_SC_PAGESIZE)) : 0;
}

// Open file descriptors of this process.
inline int open_fds() {
  DIR *d = opendir("/proc/self/fd");
  if (!d) return -1;
  int n = 0;
  while (dirent *e = readdir(d))
    if (e->d_name[0] != '.') ++n;
  closedir(d);
  return n - 1;  // the directory stream's own descriptor
}

// LeakSanitizer's check now (ASan builds): true when it found no leak. Elsewhere always true
// (the RSS and descriptor checks stand in).
inline bool no_leaks_now() {
#if defined(CXLT_TEST_ASAN)
  return __lsan_do_recoverable_leak_check() == 0;
#else
  return true;
#endif
}

inline std::string mib(uint64_t bytes) {
  char b[32];
  std::snprintf(b, sizeof b, "%.1f MiB", static_cast<double>(bytes) / 1048576.0);
  return b;
}

}  // namespace cxlt_rel
