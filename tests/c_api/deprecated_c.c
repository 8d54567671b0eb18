/* SPDX-License-Identifier: Apache-2.0 */
/* The deprecated names of the C ABI (cxlt_step, cxlt_current_step, cxlt_policy_state) are still
 * exported and behave as the cxlt_runtime_* calls that replace them, from C11, linked against the
 * shared library only: an engine built against 0.1.0 keeps working until they are removed. */
#include <cxltier/cxltier.h>

#include <stdio.h>

#include "check.h"

/* The old names warn by design (CXLT_DEPRECATED); this test calls them on purpose. */
#if defined(__GNUC__)
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
#endif

int main(void) {
  cxlt_config_t *cfg = NULL;
  cxlt_runtime_t *rt = NULL;
  cxlt_key_t key = cxlt_key_from_sequence(7, 0), never = cxlt_key_from_sequence(7, 1);
  cxlt_block_t blk;
  cxlt_policy_state_t a, b;
  uint64_t s_new = 0, s_old = 0;

  CHECK(cxlt_config_create(&cfg) == CXLT_OK);
  CHECK(cxlt_config_set(cfg, "topology", "emulated") == CXLT_OK);
  CHECK(cxlt_config_set(cfg, "geometry.layers", "16") == CXLT_OK);
  CHECK(cxlt_config_set(cfg, "runtime.huge_pages", "none") == CXLT_OK);
  CHECK(cxlt_config_set(cfg, "tiers.0.kind", "dram") == CXLT_OK);
  CHECK(cxlt_config_set(cfg, "tiers.0.budget", "4MiB") == CXLT_OK);
  if (cxlt_runtime_open_config(cfg, &rt) != CXLT_OK) {
    fprintf(stderr, "open: %s\n", cxlt_last_error());
    return 1;
  }
  cxlt_config_destroy(cfg);

  CHECK(cxlt_block_admit(rt, key, &blk) == CXLT_OK);
  /* The clock: each name advances the same clock, each reads it. */
  CHECK(cxlt_runtime_step(rt) == CXLT_OK);
  CHECK(cxlt_step(rt) == CXLT_OK);
  CHECK(cxlt_runtime_current_step(rt, &s_new) == CXLT_OK);
  CHECK(cxlt_current_step(rt, &s_old) == CXLT_OK);
  CHECK(s_new == s_old);
  CHECK(cxlt_runtime_step(rt) == CXLT_OK);
  CHECK(cxlt_current_step(rt, &s_old) == CXLT_OK && s_old == s_new + 1);
  CHECK(cxlt_current_step(rt, NULL) == CXLT_ERROR_INVALID_ARGUMENT);

  /* The policy state: the same answer, the same errors. */
  CHECK(cxlt_runtime_policy_state(rt, key, &a) == CXLT_OK);
  CHECK(cxlt_policy_state(rt, key, &b) == CXLT_OK);
  CHECK(a.score == b.score && a.last_access_step == b.last_access_step && a.accesses == b.accesses &&
        a.tier == b.tier && a.tier == 0);
  CHECK(cxlt_policy_state(rt, never, &b) == CXLT_ERROR_NOT_FOUND);
  CHECK(cxlt_policy_state(rt, key, NULL) == CXLT_ERROR_INVALID_ARGUMENT);

  CHECK(cxlt_runtime_close_ex(rt) == CXLT_OK);
  CHECK(cxlt_step(rt) == CXLT_ERROR_CLOSED);
  CHECK(cxlt_current_step(rt, &s_old) == CXLT_ERROR_CLOSED);
  CHECK(cxlt_policy_state(rt, key, &b) == CXLT_ERROR_CLOSED);

  if (failures == 0) printf("C deprecated names test: ok\n");
  return failures == 0 ? 0 : 1;
}
