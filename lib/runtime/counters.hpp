// SPDX-License-Identifier: Apache-2.0
// The runtime's counters, each named once. Every list is an X-macro: a caller defines X, applies
// the list to it, and gets one line per counter. The lists declare the members that count
// (Runtime::Impl, TierRt, RemoteCounters) and drive stats() (cxlt_stats_t) and stats_json()
// (stats.cpp). cxlt_stats_t itself (include/cxltier/cxltier.h) is ABI and keeps its own layout:
// a name listed here that it lacks does not compile. Every counter counts events or bytes since
// open and only grows.
#pragma once

// Runtime::Impl's counters, under mu: X(member, name), where name is the cxlt_stats_t field and
// the stats_json() key.
#define CXLT_RUNTIME_COUNTERS(X)                                                                      \
  X(accesses, accesses)               /* block accesses recorded */                                   \
  X(misses, misses)                   /* accesses or admissions of blocks resident nowhere */         \
  X(promotions, promotions)           /* blocks moved to a faster tier */                             \
  X(demotions, demotions)             /* blocks moved to a slower tier */                             \
  X(drops, drops)                     /* blocks dropped from the last tier (state kept) */            \
  X(restored, readmissions_restored)  /* admissions that restored a stored state */                   \
  X(failures, migration_failures)     /* copies that failed (blocks left where they were) */

// Each tier's counters (TierRt, under mu): X(name), the member, the cxlt_tier_stats_t field and
// the key in stats_json()'s "tiers" entries.
#define CXLT_TIER_COUNTERS(X) \
  X(hits)       /* accesses that found the block in this tier (higher is better) */ \
  X(admissions) /* blocks admitted straight into this tier */

// The copies between tiers, [from][to] (Runtime::Impl, under mu): X(name), the member and the
// cxlt_stats_t field. stats_json() reports them per pair, with rates, in "pairs".
#define CXLT_PAIR_COUNTERS(X) \
  X(pair_bytes)  /* bytes moved */ \
  X(pair_blocks) /* blocks moved */ \
  X(pair_ns)     /* copy time, ns */

// The remote tier's counters (RemoteCounters, read without the runtime's lock): X(name), the
// member and the key in stats_json()'s "remote". Those of the first list are also the
// cxlt_stats_t fields remote_<name>.
#define CXLT_REMOTE_STATS_COUNTERS(X)                                                          \
  X(hits)      /* fetches that found a verified copy (higher is better) */                      \
  X(misses)    /* fetches that did not (absent, failed or corrupt) */                           \
  X(writeouts) /* blocks written out and acknowledged */                                        \
  X(failures)  /* operations that failed: timeout, node down, error reply (fetch or write) */   \
  X(bytes_out) /* payload bytes written (headers excluded) */                                   \
  X(bytes_in)  /* payload bytes fetched and verified */
#define CXLT_REMOTE_JSON_COUNTERS(X)                                                           \
  X(skipped)   /* drops not written out: below the threshold or max_pending reached */          \
  X(corrupt)   /* values refused by the header or checksum check (counted in misses) */         \
  X(timeouts)  /* operations that ran into the deadline (counted in failures) */                \
  X(moved)     /* -MOVED redirections followed */                                               \
  X(ask)       /* -ASK redirections followed */                                                 \
  X(refreshes) /* slot-table refreshes (CLUSTER SLOTS) */
