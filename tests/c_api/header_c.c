/* SPDX-License-Identifier: Apache-2.0 */
/* The public header compiled as C11 (not C++), and a few calls through the C ABI. */
#include <cxltier/cxltier.h>

#include <stdio.h>
#include <string.h>

#include "check.h"

int main(void) {
  uint64_t bytes = 0;
  CHECK(cxlt_version() == CXLT_VERSION);
  CHECK(cxlt_block_bytes(80, 8, 128, 2, 16, &bytes) == CXLT_OK);
  CHECK(bytes == 5242880u);
  CHECK(cxlt_block_bytes(0, 8, 128, 2, 16, &bytes) == CXLT_ERROR_INVALID_ARGUMENT);
  CHECK(strstr(cxlt_last_error(), "layers") != NULL);
  CHECK(cxlt_block_bytes(80, 8, 128, 2, 16, NULL) == CXLT_ERROR_INVALID_ARGUMENT);
  CHECK(strcmp(cxlt_result_string(CXLT_OK), "ok") == 0);
  CHECK(strcmp(cxlt_tier_kind_name(CXLT_TIER_CXL), "cxl") == 0);
  {
    cxlt_key_t a = cxlt_key_from_sequence(1, 2), b = cxlt_key_from_sequence(1, 2), c = cxlt_key_from_sequence(2, 1);
    int32_t toks[16];
    cxlt_key_t root = {0, 0}, p1, p2;
    int i;
    CHECK(a.hi == b.hi && a.lo == b.lo);
    CHECK(a.hi != c.hi || a.lo != c.lo);
    for (i = 0; i < 16; ++i) toks[i] = i * 7;
    p1 = cxlt_key_from_tokens(root, toks, 16);
    p2 = cxlt_key_from_tokens(root, toks, 16);
    CHECK(p1.hi == p2.hi && p1.lo == p2.lo);
  }
  if (failures == 0) printf("C ABI header test: ok\n");
  return failures == 0 ? 0 : 1;
}
