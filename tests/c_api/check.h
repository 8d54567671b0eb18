/* SPDX-License-Identifier: Apache-2.0 */
/* CHECK(cond) for the C tests: reports a false condition with its place and counts it; main()
 * returns `failures != 0`. C (not C++), so the tests see the header as a C engine does. */
#ifndef CXLT_TESTS_C_API_CHECK_H
#define CXLT_TESTS_C_API_CHECK_H

#include <stdio.h>

static int failures = 0;
#define CHECK(cond)                                                            \
  do {                                                                         \
    if (!(cond)) {                                                             \
      fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
      ++failures;                                                              \
    }                                                                          \
  } while (0)

#endif
