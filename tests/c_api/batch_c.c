/* SPDX-License-Identifier: Apache-2.0 */
/* The batch calls from C11, linked against the shared library only: cxlt_block_admit_batch,
 * cxlt_prefix_lookup (with and without CXLT_LOOKUP_PIN), cxlt_block_unpin_batch and
 * cxlt_block_release_batch, each refusing a bad batch with nothing applied. Tiers of 4 + 8 + 16
 * blocks of 1 MiB (examples/quickstart.toml's). */
#include <cxltier/cxltier.h>

#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "check.h"

#define NKEYS 40

static int pinned(cxlt_runtime_t *rt, cxlt_key_t k) {
  /* A pinned block refuses a release with BUSY. */
  cxlt_block_t b;
  if (cxlt_block_lookup(rt, k, &b) != CXLT_OK) return -1;
  return cxlt_block_release(rt, k, 0) == CXLT_ERROR_BUSY;
}

int main(void) {
  cxlt_config_t *cfg = NULL;
  cxlt_runtime_t *rt = NULL;
  cxlt_key_t keys[NKEYS], twice[2], none = cxlt_key_from_sequence(99, 0);
  cxlt_block_t blocks[NKEYS], one;
  int placed[NKEYS];
  size_t matched = 12345, i;
  cxlt_stats_t st;

  CHECK(cxlt_config_create(&cfg) == CXLT_OK);
  CHECK(cxlt_config_set(cfg, "topology", "emulated") == CXLT_OK);
  CHECK(cxlt_config_set(cfg, "geometry.layers", "16") == CXLT_OK);
  CHECK(cxlt_config_set(cfg, "runtime.huge_pages", "none") == CXLT_OK);
  CHECK(cxlt_config_set(cfg, "tiers.0.kind", "hbm") == CXLT_OK);
  CHECK(cxlt_config_set(cfg, "tiers.0.budget", "4MiB") == CXLT_OK);
  CHECK(cxlt_config_set(cfg, "tiers.1.kind", "dram") == CXLT_OK);
  CHECK(cxlt_config_set(cfg, "tiers.1.budget", "8MiB") == CXLT_OK);
  CHECK(cxlt_config_set(cfg, "tiers.2.kind", "cxl") == CXLT_OK);
  CHECK(cxlt_config_set(cfg, "tiers.2.budget", "16MiB") == CXLT_OK);
  if (cxlt_runtime_open_config(cfg, &rt) != CXLT_OK) {
    fprintf(stderr, "open: %s\n", cxlt_last_error());
    return 1;
  }
  cxlt_config_destroy(cfg);
  for (i = 0; i < NKEYS; ++i) keys[i] = cxlt_key_from_sequence(1, i);

  /* One prefill of 10 blocks, pinned: every one new, resident, pinned, its bytes writable. */
  CHECK(cxlt_block_admit_batch(rt, keys, 10, CXLT_ADMIT_PIN, blocks, placed) == CXLT_OK);
  for (i = 0; i < 10; ++i) {
    CHECK(placed[i] == 1);
    CHECK(blocks[i].tier >= 0 && blocks[i].data != NULL && blocks[i].bytes == 1048576u);
    memset(blocks[i].data, (int)i, blocks[i].bytes);
    CHECK(pinned(rt, keys[i]) == 1);
  }
  /* Again: resident, so placed 0 and the same bytes. */
  CHECK(cxlt_block_admit_batch(rt, keys, 10, 0, blocks, placed) == CXLT_OK);
  for (i = 0; i < 10; ++i) CHECK(placed[i] == 0 && ((unsigned char *)blocks[i].data)[7] == (unsigned char)i);

  /* Unpin: nothing applied when one entry is bad (keys[0] is pinned once, given twice). */
  twice[0] = keys[0];
  twice[1] = keys[0];
  CHECK(cxlt_block_unpin_batch(rt, twice, 2) == CXLT_ERROR_INVALID_ARGUMENT);
  CHECK(strstr(cxlt_last_error(), "keys[1]") != NULL);
  CHECK(pinned(rt, keys[0]) == 1);
  twice[1] = none;
  CHECK(cxlt_block_unpin_batch(rt, twice, 2) == CXLT_ERROR_NOT_FOUND);
  CHECK(pinned(rt, keys[0]) == 1);
  CHECK(cxlt_block_unpin_batch(rt, keys, 10) == CXLT_OK);
  for (i = 0; i < 10; ++i) CHECK(pinned(rt, keys[i]) == 0);

  /* The prefix: keys 0..9 resident, 10 not. */
  CHECK(cxlt_prefix_lookup(rt, keys, 20, 0, &matched, blocks) == CXLT_OK);
  CHECK(matched == 10);
  CHECK(cxlt_prefix_lookup(rt, keys + 10, 5, 0, &matched, blocks) == CXLT_OK);
  CHECK(matched == 0);
  CHECK(cxlt_prefix_lookup(rt, keys, 6, CXLT_LOOKUP_PIN, &matched, blocks) == CXLT_OK);
  CHECK(matched == 6);
  for (i = 0; i < 10; ++i) CHECK(pinned(rt, keys[i]) == (i < 6));
  for (i = 0; i < 6; ++i) CHECK(((unsigned char *)blocks[i].data)[100] == (unsigned char)i);
  CHECK(cxlt_prefix_lookup(rt, keys, 6, 8u, &matched, blocks) == CXLT_ERROR_INVALID_ARGUMENT);
  CHECK(cxlt_prefix_lookup(rt, keys, 6, 0, NULL, blocks) == CXLT_ERROR_INVALID_ARGUMENT);
  /* FETCH without the remote tier changes nothing. */
  CHECK(cxlt_prefix_lookup(rt, keys, 20, CXLT_LOOKUP_FETCH, &matched, blocks) == CXLT_OK);
  CHECK(matched == 10);
  CHECK(cxlt_block_unpin_batch(rt, keys, 6) == CXLT_OK);

  /* More blocks than the unpinned ones can make room for: 28 slots, 6 pinned, 10 resident. */
  CHECK(cxlt_prefix_lookup(rt, keys, 6, CXLT_LOOKUP_PIN, &matched, blocks) == CXLT_OK);
  CHECK(cxlt_block_admit_batch(rt, keys + 10, 23, 0, blocks, placed) == CXLT_ERROR_OUT_OF_TIER_MEMORY);
  CHECK(strstr(cxlt_last_error(), "nothing admitted") != NULL);
  CHECK(cxlt_block_lookup(rt, keys[10], &one) == CXLT_ERROR_NOT_FOUND);
  CHECK(cxlt_block_lookup(rt, keys[6], &one) == CXLT_OK); /* nothing was evicted for it */
  /* 22 fit: the 4 unpinned resident blocks outside the batch may go, 18 slots are free. */
  CHECK(cxlt_block_admit_batch(rt, keys + 10, 22, 0, blocks, placed) == CXLT_OK);
  for (i = 0; i < 22; ++i) CHECK(placed[i] == 1 && blocks[i].tier >= 0);
  CHECK(cxlt_runtime_wait_idle(rt, -1) == CXLT_OK);
  for (i = 0; i < 6; ++i) CHECK(cxlt_block_lookup(rt, keys[i], &one) == CXLT_OK);
  CHECK(cxlt_block_unpin_batch(rt, keys, 6) == CXLT_OK);

  /* Release: a pinned key, an absent key or a repeat refuses the whole batch. */
  CHECK(cxlt_block_pin(rt, keys[12], &one) == CXLT_OK);
  CHECK(cxlt_block_release_batch(rt, keys + 10, 5, 1) == CXLT_ERROR_BUSY);
  CHECK(cxlt_block_lookup(rt, keys[10], &one) == CXLT_OK);
  CHECK(cxlt_block_unpin(rt, keys[12]) == CXLT_OK);
  twice[0] = keys[10];
  twice[1] = keys[10];
  CHECK(cxlt_block_release_batch(rt, twice, 2, 0) == CXLT_ERROR_INVALID_ARGUMENT);
  CHECK(cxlt_block_release(rt, keys[10], 0) == CXLT_OK); /* was not released by the batch */
  CHECK(cxlt_block_release_batch(rt, keys + 10, 3, 0) == CXLT_ERROR_INVALID_ARGUMENT);
  CHECK(strstr(cxlt_last_error(), "already released") != NULL);
  CHECK(cxlt_block_release_batch(rt, keys + 11, 4, 1) == CXLT_OK);
  for (i = 11; i < 15; ++i) CHECK(cxlt_block_lookup(rt, keys[i], &one) == CXLT_ERROR_NOT_FOUND);
  CHECK(cxlt_block_release_batch(rt, keys + 11, 1, 1) == CXLT_ERROR_NOT_FOUND);
  CHECK(cxlt_block_release_batch(rt, NULL, 3, 1) == CXLT_ERROR_INVALID_ARGUMENT);
  CHECK(cxlt_block_release_batch(rt, NULL, 0, 1) == CXLT_OK);
  CHECK(cxlt_block_admit_batch(rt, keys, 1, 4u, blocks, placed) == CXLT_ERROR_INVALID_ARGUMENT);

  st.size = sizeof st;
  st.version = CXLT_STATS_VERSION;
  CHECK(cxlt_stats_get(rt, &st) == CXLT_OK);
  CHECK(st.migration_failures == 0);
  /* A caller built before the placement fields passes the older size and gets the fields before them. */
  {
    cxlt_stats_t old;
    memset(&old, 0xab, sizeof old);
    old.size = offsetof(cxlt_stats_t, inversions);
    old.version = CXLT_STATS_VERSION;
    CHECK(cxlt_stats_get(rt, &old) == CXLT_OK);
    CHECK(old.size == offsetof(cxlt_stats_t, inversions) && old.tier_count == 3 && old.drops == st.drops);
    CHECK(old.inversions == 0xababababababababull); /* not written */
    old.size = sizeof old - 8;
    CHECK(cxlt_stats_get(rt, &old) == CXLT_ERROR_INVALID_ARGUMENT);
  }
  cxlt_runtime_close(rt);
  CHECK(cxlt_block_admit_batch(rt, keys, 1, 0, blocks, placed) == CXLT_ERROR_CLOSED);
  CHECK(cxlt_prefix_lookup(rt, keys, 1, 0, &matched, blocks) == CXLT_ERROR_CLOSED);

  if (failures == 0) printf("C batch test: ok\n");
  return failures == 0 ? 0 : 1;
}
