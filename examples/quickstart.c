/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The README's C example: open a three-tier runtime, admit more blocks than the tiers hold
 * (demotions, then drops from the last tier), release a block's bytes, admit it again and read
 * back the score it had before; then serve three requests that share a system prompt with the
 * batch calls (prefix lookup, batch admission, unpin and release). Uses only <cxltier/cxltier.h>; build with
 *   cc quickstart.c $(pkg-config --cflags --libs cxltier)
 * Run: ./a.out examples/quickstart.toml
 */
#include <cxltier/cxltier.h>

#include <stdio.h>
#include <string.h>

#define CHECK(call)                                                                   \
  do {                                                                                \
    cxlt_result_t r_ = (call);                                                        \
    if (r_ != CXLT_OK) {                                                              \
      fprintf(stderr, "%s failed: %s\n", #call, cxlt_last_error());                   \
      return 1;                                                                       \
    }                                                                                 \
  } while (0)

int main(int argc, char **argv) {
  cxlt_runtime_t *rt = NULL;
  cxlt_tier_info_t fastest;
  cxlt_block_t block;
  cxlt_policy_state_t st, before;
  cxlt_key_t first = cxlt_key_from_sequence(1, 0);
  size_t tiers = 0, i, total = 0;
  float attention = 0.8f;
  int step;

  CHECK(cxlt_runtime_open(argc > 1 ? argv[1] : NULL, &rt));
  CHECK(cxlt_runtime_tier_count(rt, &tiers));
  CHECK(cxlt_runtime_tier_info(rt, 0, &fastest));
  for (i = 0; i < tiers; ++i) {
    cxlt_tier_info_t info;
    CHECK(cxlt_runtime_tier_info(rt, i, &info));
    printf("tier %zu: %-5s %s, budget %llu bytes\n", i, info.name, info.emulated ? "(emulated)" : "",
           (unsigned long long)info.budget_bytes);
    total += (size_t)(info.budget_bytes / 1048576u);
  }

  /* Block 0 of sequence 1: admit it, write its KV, and give it some attention. */
  CHECK(cxlt_block_admit(rt, first, &block));
  memset(block.data, 0x42, block.bytes);
  for (step = 0; step < 3; ++step) {
    CHECK(cxlt_block_access(rt, &first, &attention, 1));
    CHECK(cxlt_runtime_step(rt));
  }
  CHECK(cxlt_runtime_policy_state(rt, first, &before));
  printf("block 0: score %.6f in tier %d\n", before.score, before.tier);

  /* More blocks than every tier holds together: blocks go down the tiers, then out of the last. */
  for (i = 1; i < total + 8; ++i) {
    cxlt_key_t k = cxlt_key_from_sequence(1, i);
    CHECK(cxlt_block_admit(rt, k, &block));
    CHECK(cxlt_runtime_step(rt));
  }
  CHECK(cxlt_runtime_wait_idle(rt, -1));
  CHECK(cxlt_runtime_policy_state(rt, first, &st));
  printf("after %zu more blocks: block 0 is in tier %d (-1: dropped, its state kept)\n", total + 7, st.tier);

  /* Sequence 1 ends: free block 0's bytes now (if LRFU kept it resident), keep its state. */
  if (st.tier >= 0) CHECK(cxlt_block_release(rt, first, 1));
  CHECK(cxlt_runtime_policy_state(rt, first, &st));
  if (st.tier != -1) {
    fprintf(stderr, "block 0 should be resident nowhere after its release\n");
    return 1;
  }

  /* Access it again: it comes back with the score it had. */
  CHECK(cxlt_block_admit(rt, first, &block));
  CHECK(cxlt_runtime_policy_state(rt, first, &st));
  printf("re-admitted: score %.6f (before: %.6f), tier %d\n", st.score, before.score, st.tier);
  if (st.score != before.score) {
    fprintf(stderr, "the score was not restored\n");
    return 1;
  }
  /* An engine's request loop: three requests share a system prompt of 4 blocks, each adds 2
   * blocks of its own. Prefill: how much of the prompt is cached (pinned in the same call), one
   * admission for the rest (new blocks get their KV written), then decode steps over all of
   * them; at the end the request's pins go in one call and its own blocks are released. */
  {
    enum { SYSTEM = 4, OWN = 2, N = SYSTEM + OWN };
    int req;
    for (req = 0; req < 3; ++req) {
      cxlt_key_t keys[N], parent = {0, 0};
      cxlt_block_t blocks[N];
      int placed[N];
      int32_t tokens[16];
      size_t matched = 0, b, t;
      for (b = 0; b < N; ++b) {
        for (t = 0; t < 16; ++t) tokens[t] = (int32_t)(b < SYSTEM ? 1000 + b * 16 + t : (size_t)req * 100000 + b * 16 + t);
        keys[b] = cxlt_key_from_tokens(parent, tokens, 16);
        parent = keys[b];
      }
      CHECK(cxlt_prefix_lookup(rt, keys, N, CXLT_LOOKUP_PIN, &matched, blocks));
      if (matched < N) {
        CHECK(cxlt_block_admit_batch(rt, keys + matched, N - matched, CXLT_ADMIT_PIN, blocks + matched, placed));
        for (b = matched; b < N; ++b)
          if (placed[b - matched]) memset(blocks[b].data, (int)b, blocks[b].bytes); /* the prefill writes the KV */
      }
      for (step = 0; step < 4; ++step) { /* decode: every block of the context is attended */
        CHECK(cxlt_block_access(rt, keys, NULL, N));
        CHECK(cxlt_runtime_step(rt));
      }
      CHECK(cxlt_block_unpin_batch(rt, keys, N));
      CHECK(cxlt_block_release_batch(rt, keys + SYSTEM, OWN, 0)); /* the system prompt stays in use */
      printf("request %d: %zu of %d blocks cached at prefill\n", req, matched, N);
      if (req > 0 && matched < SYSTEM) {
        fprintf(stderr, "request %d should have found the shared system prompt cached\n", req);
        return 1;
      }
    }
  }
  {
    cxlt_stats_t s;
    s.size = sizeof s;
    s.version = CXLT_STATS_VERSION;
    CHECK(cxlt_stats_get(rt, &s));
    printf("demotions %llu, drops %llu, re-admissions with restored state %llu\n", (unsigned long long)s.demotions,
           (unsigned long long)s.drops, (unsigned long long)s.readmissions_restored);
    /* 36 blocks through tiers that hold 28: the fastest tier's victims went down, the last tier's out. */
    if (s.demotions == 0 || s.drops == 0 || s.readmissions_restored == 0) {
      fprintf(stderr, "expected demotions, drops and a restored re-admission\n");
      return 1;
    }
  }
  cxlt_runtime_close(rt);
  /* A closed handle is refused, not a crash. */
  if (cxlt_runtime_step(rt) != CXLT_ERROR_CLOSED) return 1;
  printf("ok\n");
  return 0;
}
