/* SPDX-License-Identifier: Apache-2.0 */
/*
 * cxltier.h: the C ABI of cxltier, the contract that inference engines link against.
 *
 * It compiles as C11 and as C++. Every function returns a cxlt_result_t (or a plain value
 * where it cannot fail) and never lets an exception through. Sizes are in bytes, times in
 * nanoseconds, bandwidths in MiB/s unless a name says otherwise (gbps: 10^9 bytes/s).
 *
 * Conventions:
 *   - CXLT_OK (0) is success; every other value is an error. After an error the thread-local
 *     message from cxlt_last_error() names what was wrong (the field, the key, the file).
 *   - Output parameters are written only on success. A NULL required output pointer is
 *     CXLT_ERROR_INVALID_ARGUMENT.
 *   - Every call that takes a cxlt_runtime_t returns CXLT_ERROR_CLOSED for a handle that is
 *     closed or was never opened; each function below lists its other errors.
 *   - Results marked CXLT_NODISCARD must be checked: ignoring them loses the only report of an
 *     error (or a handle that must be freed).
 *   - A cxlt_runtime_t is safe to call from several threads at once.
 */
#ifndef CXLTIER_CXLTIER_H
#define CXLTIER_CXLTIER_H

#include <stddef.h>
#include <stdint.h>

/* --- Attributes --------------------------------------------------------------------------- */
/*
 * CXLT_API: exported from libcxltier.so.
 * CXLT_NODISCARD: the result must be looked at (it is the only report of an error, or it owns a
 *   handle). C++17 and later get [[nodiscard]], which a cast to void silences; C gets GCC's
 *   warn_unused_result, which only a use of the value silences.
 * CXLT_DEPRECATED(msg): a name kept for compatibility; using it warns with msg.
 */
#if defined(__GNUC__)
#define CXLT_API __attribute__((visibility("default")))
#else
#define CXLT_API
#endif

#if defined(__cplusplus) && __cplusplus >= 201703L
#define CXLT_NODISCARD [[nodiscard]]
#elif defined(__GNUC__)
#define CXLT_NODISCARD __attribute__((warn_unused_result))
#else
#define CXLT_NODISCARD
#endif

#if defined(__GNUC__)
#define CXLT_DEPRECATED(msg) __attribute__((deprecated(msg)))
#else
#define CXLT_DEPRECATED(msg)
#endif

#ifdef __cplusplus
#define CXLT_NOEXCEPT noexcept
extern "C" {
#else
#define CXLT_NOEXCEPT
#endif

/* --- Version ------------------------------------------------------------------------------ */
#define CXLT_VERSION_MAJOR 0
#define CXLT_VERSION_MINOR 1
#define CXLT_VERSION_PATCH 0
/** (major << 16) | (minor << 8) | patch of the header this code was compiled against. */
#define CXLT_VERSION ((CXLT_VERSION_MAJOR << 16) | (CXLT_VERSION_MINOR << 8) | CXLT_VERSION_PATCH)

/** \return the version of the loaded library, encoded as CXLT_VERSION. */
CXLT_API uint32_t cxlt_version(void) CXLT_NOEXCEPT;

/* --- Results ------------------------------------------------------------------------------ */
/** The one result type of the C ABI. */
typedef enum cxlt_result {
  CXLT_OK = 0,
  CXLT_ERROR_INVALID_ARGUMENT = 1, /**< a NULL pointer, a value out of range, a misused API */
  CXLT_ERROR_OUT_OF_HOST_MEMORY = 2, /**< the process could not allocate its own metadata */
  CXLT_ERROR_OUT_OF_TIER_MEMORY = 3, /**< no tier has room and nothing can be demoted */
  CXLT_ERROR_NOT_FOUND = 4,        /**< an unknown key or handle, or a block resident nowhere */
  CXLT_ERROR_NOT_SUPPORTED = 5,    /**< the build or the machine lacks the feature */
  CXLT_ERROR_BACKEND = 6,          /**< a tier backend failed (allocation, placement, copy) */
  CXLT_ERROR_IO = 7,               /**< a file could not be read or written */
  CXLT_ERROR_CORRUPT = 8,          /**< a file is truncated, damaged or foreign */
  CXLT_ERROR_BUSY = 9,             /**< the block is pinned or in use */
  CXLT_ERROR_CLOSED = 10,          /**< the runtime handle is closed or was never opened */
  CXLT_ERROR_CONFIG = 11,          /**< the configuration is invalid (the message names the field) */
  CXLT_ERROR_TOPOLOGY = 12,        /**< the topology could not be loaded or read */
  CXLT_ERROR_TIMEOUT = 13,         /**< a wait ran past its deadline */
  CXLT_ERROR_UNKNOWN = 0x7ffffffe  /**< an internal error; please report it */
} cxlt_result_t;

/** \return a static, human-readable name for r (never NULL). */
CXLT_API const char *cxlt_result_string(cxlt_result_t r) CXLT_NOEXCEPT;

/**
 * \return the message of the last failing call made by this thread ("" if none). The string
 * stays valid until this thread's next cxltier call.
 */
CXLT_API const char *cxlt_last_error(void) CXLT_NOEXCEPT;

/* --- Identity keys ------------------------------------------------------------------------ */
/** A 128-bit block identity. The score store is keyed by it. {0,0} is the root parent. */
typedef struct cxlt_key_s { uint64_t hi, lo; } cxlt_key_t;

/** \return the key of block `block_index` of sequence `sequence_id` (XXH3-128, domain-separated). */
CXLT_API cxlt_key_t cxlt_key_from_sequence(uint64_t sequence_id, uint64_t block_index) CXLT_NOEXCEPT;

/**
 * \return the content key of a block: XXH3-128 over the parent block's key and this block's
 * token ids, so identical prefixes get the same key in every sequence (pass {0,0} as the parent
 * of the first block). `tokens` may be NULL only when n_tokens is 0: NULL with n_tokens > 0
 * returns {0, 0} (the root parent, not the key of any content) and sets cxlt_last_error().
 */
CXLT_API cxlt_key_t cxlt_key_from_tokens(cxlt_key_t parent, const int32_t *tokens,
                                         size_t n_tokens) CXLT_NOEXCEPT;

/* --- Block geometry ----------------------------------------------------------------------- */
/**
 * Bytes per block = 2 (K and V) x layers x kv_heads x head_dim x bytes_per_element x
 * tokens_per_block. The canonical model (80, 8, 128, 2, 16) gives 5,242,880 bytes.
 * \return CXLT_ERROR_INVALID_ARGUMENT if a field is zero or the product overflows 64 bits.
 */
CXLT_NODISCARD CXLT_API cxlt_result_t cxlt_block_bytes(uint32_t layers, uint32_t kv_heads, uint32_t head_dim,
                                                       uint32_t bytes_per_element, uint32_t tokens_per_block,
                                                       uint64_t *out_bytes) CXLT_NOEXCEPT;

/* --- Tiers -------------------------------------------------------------------------------- */
/**
 * The most tiers a runtime has: a configuration with more is refused (CXLT_ERROR_CONFIG). It
 * sizes the per-tier arrays of cxlt_stats_t, so it changes only with CXLT_STATS_VERSION.
 */
#define CXLT_MAX_TIERS 8

/** Memory kinds, as discovered from hwloc. Order here is not the performance order. */
typedef enum cxlt_tier_kind {
  CXLT_TIER_HBM = 0,     /**< high-bandwidth memory attached to the CPU (MCDRAM, HBM) */
  CXLT_TIER_GPU = 1,     /**< GPU memory (a CUDA device, or a GPU-memory NUMA node) */
  CXLT_TIER_DRAM = 2,    /**< ordinary host DRAM */
  CXLT_TIER_CXL = 3,     /**< CXL-attached DRAM */
  CXLT_TIER_NVM = 4,     /**< non-volatile memory used as RAM */
  CXLT_TIER_SPM = 5,     /**< specific-purpose memory whose kind hwloc cannot tell */
  CXLT_TIER_UNKNOWN = 6,
  CXLT_TIER_REMOTE = 7   /**< a remote store below the last local tier (Redis Cluster) */
} cxlt_tier_kind_t;

/** \return "hbm", "gpu", "dram", "cxl", "nvm", "spm", "unknown" or "remote". */
CXLT_API const char *cxlt_tier_kind_name(cxlt_tier_kind_t kind) CXLT_NOEXCEPT;

/** One tier of a runtime, as cxlt_runtime_tier_info reports it. */
typedef struct cxlt_tier_info_s {
  int rank;                   /**< 0 is the fastest tier */
  cxlt_tier_kind_t kind;
  char name[32];              /**< e.g. "hbm", "dram", "cxl", "gpu0" */
  char backend[16];           /**< "numa", "memkind", "emulated", "null", "cuda" */
  uint64_t budget_bytes;      /**< configured byte budget (higher holds more) */
  uint64_t used_bytes;        /**< bytes of resident blocks now */
  uint64_t blocks;            /**< resident blocks now */
  double bandwidth_mib_s;     /**< declared or discovered, MiB/s, higher is better; 0 if unknown */
  double latency_ns;          /**< declared or discovered, ns, lower is better; 0 if unknown */
  int emulated;               /**< 1 if laid on host memory standing in for this kind */
} cxlt_tier_info_t;

/* --- Runtime ------------------------------------------------------------------------------ */
typedef struct cxlt_runtime_s cxlt_runtime_t;
typedef struct cxlt_config_s cxlt_config_t;

/** A resident block: where its bytes are. `data` is NULL on the null backend. */
typedef struct cxlt_block_s {
  void *data;        /**< start of the block's bytes, valid while the block is pinned */
  size_t bytes;      /**< the block size of the runtime */
  int tier;          /**< rank of the tier that holds it */
  uint64_t handle;   /**< opaque handle for cxlt_block_access_handles (no hashing) */
} cxlt_block_t;

/** A block's policy state, kept in the score store whether or not the block is resident. */
typedef struct cxlt_policy_state_s {
  double score;               /**< LRFU score in [0, 1]; higher is hotter */
  uint64_t last_access_step;  /**< decode step of the last access */
  uint64_t accesses;          /**< number of accesses ever recorded */
  int tier;                   /**< tier rank, or -1 when the block is resident nowhere */
} cxlt_policy_state_t;

/*
 * Configuration handle: lets engines set fields one by one, so new fields never break the ABI.
 * Every call below that takes a handle returns CXLT_ERROR_INVALID_ARGUMENT for a NULL one.
 */
/**
 * Create a configuration: every default, then the CXLT_* environment variables applied.
 * Precedence does not depend on call order: default < file (cxlt_config_load_file) <
 * environment < cxlt_config_set. Free it with cxlt_config_destroy.
 * \return CXLT_ERROR_CONFIG naming a bad variable; CXLT_ERROR_INVALID_ARGUMENT for a NULL out;
 *         CXLT_ERROR_OUT_OF_HOST_MEMORY.
 */
CXLT_NODISCARD CXLT_API cxlt_result_t cxlt_config_create(cxlt_config_t **out) CXLT_NOEXCEPT;
/**
 * Merge a TOML file into cfg.
 * \return CXLT_ERROR_IO (unreadable file), CXLT_ERROR_CONFIG naming the line and key,
 *         CXLT_ERROR_INVALID_ARGUMENT (NULL cfg or path).
 */
CXLT_NODISCARD CXLT_API cxlt_result_t cxlt_config_load_file(cxlt_config_t *cfg, const char *path) CXLT_NOEXCEPT;
/**
 * Set one key, with the names of the TOML file ("policy.alpha", "tiers.0.budget", ...; see
 * docs/configuration.md) and the value as text ("0.05", "4GiB", "lrfu").
 * \return CXLT_ERROR_CONFIG for an unknown key or a value of the wrong type;
 *         CXLT_ERROR_INVALID_ARGUMENT for a NULL argument.
 */
CXLT_NODISCARD CXLT_API cxlt_result_t cxlt_config_set(cxlt_config_t *cfg, const char *key, const char *value) CXLT_NOEXCEPT;
/** Check every field. \return CXLT_ERROR_CONFIG with the bad field named in cxlt_last_error(). */
CXLT_NODISCARD CXLT_API cxlt_result_t cxlt_config_validate(const cxlt_config_t *cfg) CXLT_NOEXCEPT;
/**
 * Write the effective configuration as TOML into buf (NUL-terminated). *needed (may be NULL)
 * always gets the size with the NUL.
 * \return CXLT_ERROR_INVALID_ARGUMENT for a NULL cfg, or a buf that is NULL or smaller than
 *         that size (nothing written to it).
 */
CXLT_NODISCARD CXLT_API cxlt_result_t cxlt_config_dump(const cxlt_config_t *cfg, char *buf, size_t cap, size_t *needed) CXLT_NOEXCEPT;
/** Free a configuration handle. NULL does nothing. Cannot fail. */
CXLT_API void cxlt_config_destroy(cxlt_config_t *cfg) CXLT_NOEXCEPT;

/**
 * Open a runtime from a TOML file (NULL: defaults, on this machine's tiers or the embedded
 * default topology). CXLT_* environment variables override the file.
 * *out gets a handle to close with cxlt_runtime_close or cxlt_runtime_close_ex.
 * \return CXLT_ERROR_CONFIG, CXLT_ERROR_IO, CXLT_ERROR_TOPOLOGY, CXLT_ERROR_BACKEND,
 *         CXLT_ERROR_CORRUPT (a damaged score-store checkpoint: nothing is loaded),
 *         CXLT_ERROR_INVALID_ARGUMENT (NULL out).
 */
CXLT_NODISCARD CXLT_API cxlt_result_t cxlt_runtime_open(const char *config_path, cxlt_runtime_t **out) CXLT_NOEXCEPT;
/**
 * Open a runtime from a configuration handle (the handle may be destroyed afterwards).
 * \return as cxlt_runtime_open; CXLT_ERROR_INVALID_ARGUMENT for a NULL cfg or out.
 */
CXLT_NODISCARD CXLT_API cxlt_result_t cxlt_runtime_open_config(const cxlt_config_t *cfg, cxlt_runtime_t **out) CXLT_NOEXCEPT;
/**
 * Wait for migrations in flight, write the score-store checkpoint if persistence is on, free
 * every tier's memory. Calls that race with close, or come after it, return CXLT_ERROR_CLOSED.
 * Reports nothing: a failed final checkpoint is only in cxlt_last_error(); engines that need to
 * know call cxlt_runtime_close_ex.
 */
CXLT_API void cxlt_runtime_close(cxlt_runtime_t *rt) CXLT_NOEXCEPT;
/**
 * Close as cxlt_runtime_close does, and report the final score-store checkpoint: waits for
 * calls in flight on this handle to return, stops the migrations, writes the checkpoint, frees
 * every tier's memory. The handle is closed whatever the result.
 * \return CXLT_OK (written, or persistence is off); CXLT_ERROR_IO when the final checkpoint
 *         could not be written (the previous checkpoint file is intact; the reason is in
 *         cxlt_last_error()); CXLT_ERROR_CLOSED for a handle already closed or never opened.
 */
CXLT_NODISCARD CXLT_API cxlt_result_t cxlt_runtime_close_ex(cxlt_runtime_t *rt) CXLT_NOEXCEPT;

/**
 * Give the block `key` a slot in the fastest tier with room under its budget, demoting the
 * highest-priority unpinned blocks (cascading, dropping from the last tier) when none has room.
 * A block seen before gets its stored policy state back (score and access count); admission
 * counts as a reference for recency (last_access_step becomes the current step).
 * If the block is already resident, returns it where it is.
 * \return CXLT_ERROR_OUT_OF_TIER_MEMORY if every block is pinned; CXLT_ERROR_BACKEND if a tier
 *         could not supply memory (nothing moved).
 */
CXLT_NODISCARD CXLT_API cxlt_result_t cxlt_block_admit(cxlt_runtime_t *rt, cxlt_key_t key, cxlt_block_t *out) CXLT_NOEXCEPT;
/** Flags of cxlt_block_admit_ex. */
#define CXLT_ADMIT_PIN 1u /**< return the block pinned (admit and pin in one step) */

/**
 * As cxlt_block_admit, with flags (CXLT_ADMIT_PIN). *placed (may be NULL) is set to 1 when
 * this call gave the block a new slot (its bytes are undefined: the engine must fill them, e.g.
 * recompute the KV), 0 when the block was already resident (its bytes are as last written).
 * \return CXLT_ERROR_INVALID_ARGUMENT for an unknown flag.
 */
CXLT_NODISCARD CXLT_API cxlt_result_t cxlt_block_admit_ex(cxlt_runtime_t *rt, cxlt_key_t key, unsigned flags, cxlt_block_t *out,
                                                          int *placed) CXLT_NOEXCEPT;

/**
 * Record one decode step's accesses: for each of n keys, score = alpha*attention +
 * (1-alpha)*score and last access = current step. attention may be NULL (each counts as 1.0).
 * Blocks outside the fastest tier may be promoted by the configured rule (asynchronously).
 * The batch is checked first: \return CXLT_ERROR_INVALID_ARGUMENT (an attention value outside
 * [0,1] or not finite) or CXLT_ERROR_NOT_FOUND (a key not resident) with nothing applied.
 */
CXLT_NODISCARD CXLT_API cxlt_result_t cxlt_block_access(cxlt_runtime_t *rt, const cxlt_key_t *keys,
                                                        const float *attention, size_t n) CXLT_NOEXCEPT;
/** As cxlt_block_access, by the handles that admit/lookup returned (no hashing). A stale handle gives CXLT_ERROR_NOT_FOUND. */
CXLT_NODISCARD CXLT_API cxlt_result_t cxlt_block_access_handles(cxlt_runtime_t *rt, const uint64_t *handles,
                                                                const float *attention, size_t n) CXLT_NOEXCEPT;

/** Where the block is now. \return CXLT_ERROR_NOT_FOUND if it is resident nowhere. */
CXLT_NODISCARD CXLT_API cxlt_result_t cxlt_block_lookup(cxlt_runtime_t *rt, cxlt_key_t key, cxlt_block_t *out) CXLT_NOEXCEPT;

/** Flags of cxlt_block_move. */
#define CXLT_MOVE_WAIT 1u /**< return when the copy is done (else it is queued) */

/**
 * Move a resident block to tier `tier` (a placement hint: prefetch before use, or push out
 * early). Makes room there by the usual cascade when the tier is full. out (may be NULL) gets
 * the block's place after the call: the new one with CXLT_MOVE_WAIT, the current one otherwise.
 * \return CXLT_ERROR_NOT_FOUND (not resident), CXLT_ERROR_BUSY (pinned),
 *         CXLT_ERROR_INVALID_ARGUMENT (no such tier or flag), CXLT_ERROR_BACKEND (the copy failed;
 *         the block stays where it was).
 */
CXLT_NODISCARD CXLT_API cxlt_result_t cxlt_block_move(cxlt_runtime_t *rt, cxlt_key_t key, int tier, unsigned flags,
                                                      cxlt_block_t *out) CXLT_NOEXCEPT;

/**
 * Pin a resident block: it will not move or be dropped until unpinned, and out->data stays
 * valid. Pins nest. If the block is being migrated, waits for that copy to finish.
 */
CXLT_NODISCARD CXLT_API cxlt_result_t cxlt_block_pin(cxlt_runtime_t *rt, cxlt_key_t key, cxlt_block_t *out) CXLT_NOEXCEPT;
/** Undo one pin. \return CXLT_ERROR_INVALID_ARGUMENT if the block is not pinned. */
CXLT_NODISCARD CXLT_API cxlt_result_t cxlt_block_unpin(cxlt_runtime_t *rt, cxlt_key_t key) CXLT_NOEXCEPT;

/**
 * The sequence that owned the block ended. The block stays cached (and evictable) unless
 * `forget` is non-zero, in which case its bytes are freed now (its policy state is kept).
 * \return CXLT_ERROR_NOT_FOUND if not resident, CXLT_ERROR_BUSY if pinned.
 */
CXLT_NODISCARD CXLT_API cxlt_result_t cxlt_block_release(cxlt_runtime_t *rt, cxlt_key_t key, int forget) CXLT_NOEXCEPT;

/* --- Batch calls -------------------------------------------------------------------------- */
/*
 * Each applies the rules of its single-block call to keys[0..n) in order, under one lock, and
 * checks the whole batch before applying any of it: on an error nothing of the batch is applied
 * and no output is written (partial results: none); cxlt_last_error() names the position of the
 * entry that was wrong. n = 0 does nothing (keys and the outputs may then be NULL).
 */

/**
 * One prefill's blocks: cxlt_block_admit_ex of each key (CXLT_ADMIT_PIN: each returned pinned).
 * blocks_out[i] gets the place of keys[i]; placed_out (may be NULL) gets, per key, 1 when this
 * call gave it a new slot (the engine fills its bytes), 0 when it was resident (or was filled
 * from the remote tier). A key given twice gets one slot (placed 1 then 0) and, with
 * CXLT_ADMIT_PIN, two pins. No block of the batch is a victim of another's admission: all of
 * them are resident when it returns.
 * \return CXLT_ERROR_INVALID_ARGUMENT (NULL keys or blocks_out with n > 0, an unknown flag, a
 *         block pinned 65535 times); CXLT_ERROR_OUT_OF_TIER_MEMORY when the tiers cannot hold
 *         every key resident nowhere (the rest pinned; blocks that a copy or another call
 *         holds for the moment are waited for first, up to 8 times): nothing admitted, no block
 *         moved for it; CXLT_ERROR_BACKEND if a tier could not supply memory (the blocks this
 *         call placed are freed again, their state as before).
 */
CXLT_NODISCARD CXLT_API cxlt_result_t cxlt_block_admit_batch(cxlt_runtime_t *rt, const cxlt_key_t *keys, size_t n, unsigned flags,
                                                             cxlt_block_t *blocks_out, int *placed_out) CXLT_NOEXCEPT;

/** Flags of cxlt_prefix_lookup. */
#define CXLT_LOOKUP_PIN 1u   /**< pin every block of the matched prefix, in one step */
#define CXLT_LOOKUP_FETCH 2u /**< with the remote tier on: admit and fill from it the blocks it holds */

/**
 * How much of a request's prefix is cached: *matched gets the length of the longest prefix of
 * keys (chained content keys of a prompt) resident in some tier, blocks_out[0..*matched) their
 * places. With CXLT_LOOKUP_PIN every block of the matched prefix is pinned under one hold of the
 * lock (none can be dropped or moved between the answer and the pin; a block being copied is
 * waited for, as cxlt_block_pin does); the engine unpins them (cxlt_block_unpin_batch). With
 * CXLT_LOOKUP_FETCH and the remote tier on (docs/remote.md), the blocks after the local prefix
 * that the remote tier holds are admitted and filled from it one by one (pinned with
 * CXLT_LOOKUP_PIN), extending the prefix; the first it does not hold ends it (that trial counts
 * as a miss). Without the remote tier CXLT_LOOKUP_FETCH changes nothing.
 * blocks_out needs room for n blocks.
 * \return CXLT_ERROR_INVALID_ARGUMENT (NULL keys, blocks_out or matched, an unknown flag, a
 *         block pinned 65535 times: nothing pinned). A key resident nowhere is not an error: it
 *         ends the prefix.
 */
CXLT_NODISCARD CXLT_API cxlt_result_t cxlt_prefix_lookup(cxlt_runtime_t *rt, const cxlt_key_t *keys, size_t n, unsigned flags,
                                                         size_t *matched, cxlt_block_t *blocks_out) CXLT_NOEXCEPT;

/**
 * cxlt_block_release of each key (forget != 0: the bytes of each are freed now).
 * \return CXLT_ERROR_NOT_FOUND (a key not resident), CXLT_ERROR_BUSY (a key pinned),
 *         CXLT_ERROR_INVALID_ARGUMENT (NULL keys with n > 0, a key given twice, or, without
 *         forget, a key released before): nothing released.
 */
CXLT_NODISCARD CXLT_API cxlt_result_t cxlt_block_release_batch(cxlt_runtime_t *rt, const cxlt_key_t *keys, size_t n,
                                                               int forget) CXLT_NOEXCEPT;

/**
 * cxlt_block_unpin of each key; a key may be given as many times as it is pinned.
 * \return CXLT_ERROR_NOT_FOUND (a key not resident), CXLT_ERROR_INVALID_ARGUMENT (NULL keys with
 *         n > 0, a key not pinned, or given more times than it is pinned): nothing unpinned.
 */
CXLT_NODISCARD CXLT_API cxlt_result_t cxlt_block_unpin_batch(cxlt_runtime_t *rt, const cxlt_key_t *keys, size_t n) CXLT_NOEXCEPT;

/**
 * The block's policy state, resident or not.
 * \return CXLT_ERROR_NOT_FOUND if never seen (or forgotten); CXLT_ERROR_INVALID_ARGUMENT for a
 *         NULL out; CXLT_ERROR_CLOSED for a closed handle.
 */
CXLT_NODISCARD CXLT_API cxlt_result_t cxlt_runtime_policy_state(cxlt_runtime_t *rt, cxlt_key_t key,
                                                                cxlt_policy_state_t *out) CXLT_NOEXCEPT;

/** Advance the decode clock by one step. \return CXLT_ERROR_CLOSED for a closed handle. */
CXLT_NODISCARD CXLT_API cxlt_result_t cxlt_runtime_step(cxlt_runtime_t *rt) CXLT_NOEXCEPT;
/**
 * The current decode step into *out.
 * \return CXLT_ERROR_INVALID_ARGUMENT for a NULL out; CXLT_ERROR_CLOSED for a closed handle.
 */
CXLT_NODISCARD CXLT_API cxlt_result_t cxlt_runtime_current_step(cxlt_runtime_t *rt, uint64_t *out) CXLT_NOEXCEPT;

/*
 * Deprecated names of the three calls above, from before the calls on a runtime as a whole were
 * all named cxlt_runtime_*. They stay exported, and behave exactly as the new names, for the 0.1
 * series so that engines built against 0.1.0 keep loading; they are removed in 0.2.0.
 */
/** Deprecated (removed in 0.2.0): use cxlt_runtime_policy_state. */
CXLT_NODISCARD CXLT_DEPRECATED("use cxlt_runtime_policy_state") CXLT_API cxlt_result_t
cxlt_policy_state(cxlt_runtime_t *rt, cxlt_key_t key, cxlt_policy_state_t *out) CXLT_NOEXCEPT;
/** Deprecated (removed in 0.2.0): use cxlt_runtime_step. */
CXLT_NODISCARD CXLT_DEPRECATED("use cxlt_runtime_step") CXLT_API cxlt_result_t
cxlt_step(cxlt_runtime_t *rt) CXLT_NOEXCEPT;
/** Deprecated (removed in 0.2.0): use cxlt_runtime_current_step. */
CXLT_NODISCARD CXLT_DEPRECATED("use cxlt_runtime_current_step") CXLT_API cxlt_result_t
cxlt_current_step(cxlt_runtime_t *rt, uint64_t *out) CXLT_NOEXCEPT;

/**
 * Wait until no migration is queued or in flight (timeout_ms < 0: forever).
 * \return CXLT_ERROR_TIMEOUT when migrations are still in flight at the deadline;
 *         CXLT_ERROR_CLOSED for a closed handle.
 */
CXLT_NODISCARD CXLT_API cxlt_result_t cxlt_runtime_wait_idle(cxlt_runtime_t *rt, int64_t timeout_ms) CXLT_NOEXCEPT;
/**
 * Write the score-store checkpoint now (atomic: write, fsync, rename).
 * \return CXLT_ERROR_IO when it could not be written (the previous file is intact);
 *         CXLT_ERROR_CLOSED for a closed handle.
 */
CXLT_NODISCARD CXLT_API cxlt_result_t cxlt_runtime_checkpoint(cxlt_runtime_t *rt) CXLT_NOEXCEPT;

/** Number of tiers of the runtime. \return CXLT_ERROR_INVALID_ARGUMENT (NULL out), CXLT_ERROR_CLOSED. */
CXLT_NODISCARD CXLT_API cxlt_result_t cxlt_runtime_tier_count(cxlt_runtime_t *rt, size_t *out) CXLT_NOEXCEPT;
/**
 * Description and occupancy of tier `rank`.
 * \return CXLT_ERROR_INVALID_ARGUMENT (NULL out, no such tier), CXLT_ERROR_CLOSED.
 */
CXLT_NODISCARD CXLT_API cxlt_result_t cxlt_runtime_tier_info(cxlt_runtime_t *rt, size_t rank, cxlt_tier_info_t *out) CXLT_NOEXCEPT;

/* --- Stats -------------------------------------------------------------------------------- */
/** The version of cxlt_stats_t's layout that cxlt_stats_get fills. */
#define CXLT_STATS_VERSION 1

typedef struct cxlt_tier_stats_s {
  uint64_t budget_bytes;  /**< configured budget */
  uint64_t used_bytes;    /**< bytes of resident blocks */
  uint64_t blocks;        /**< resident blocks */
  uint64_t hits;          /**< accesses that found the block in this tier (higher is better) */
  uint64_t admissions;    /**< blocks admitted straight into this tier */
} cxlt_tier_stats_t;

/** Counters since open. Set `size` to sizeof(cxlt_stats_t) and `version` to CXLT_STATS_VERSION. */
typedef struct cxlt_stats_s {
  size_t size;
  uint32_t version;
  uint32_t tier_count;
  cxlt_tier_stats_t tier[CXLT_MAX_TIERS];
  uint64_t accesses;              /**< block accesses recorded */
  uint64_t misses;                /**< accesses or admissions of blocks resident nowhere */
  uint64_t promotions;            /**< blocks moved to a faster tier */
  uint64_t demotions;             /**< blocks moved to a slower tier */
  uint64_t drops;                 /**< blocks dropped from the last tier (state kept) */
  uint64_t readmissions_restored; /**< admissions that restored a stored state */
  uint64_t migration_failures;    /**< copies that failed (blocks left where they were) */
  uint64_t pair_bytes[CXLT_MAX_TIERS][CXLT_MAX_TIERS];  /**< bytes moved from tier i to tier j */
  uint64_t pair_blocks[CXLT_MAX_TIERS][CXLT_MAX_TIERS]; /**< blocks moved from tier i to tier j */
  uint64_t pair_ns[CXLT_MAX_TIERS][CXLT_MAX_TIERS];     /**< copy time from i to j, ns */
  uint64_t store_entries;         /**< policy states in the score store */
  uint64_t store_forgotten;       /**< states forgotten because the store was full */
  /* The remote tier (docs/remote.md), in what were reserved[0..5]: zero when it is off. */
  uint64_t remote_hits;           /**< admissions served by a verified remote copy (not misses) */
  uint64_t remote_misses;         /**< remote fetches that found nothing usable (absent, failed, corrupt) */
  uint64_t remote_writeouts;      /**< blocks dropped from the last tier and written out */
  uint64_t remote_failures;       /**< remote operations that failed (timeout, server down, error reply) */
  uint64_t remote_bytes_out;      /**< block bytes written to the remote tier */
  uint64_t remote_bytes_in;       /**< block bytes fetched from it (verified) */
  uint64_t reserved[2];
  /* Placement quality (docs/runtime.md, "Placement quality"), measured by every cxlt_stats_get
   * at the full size and every cxlt_stats_json: appended after reserved[], so a caller built against the header without
   * them passes the smaller size (offsetof(cxlt_stats_t, inversions)) and gets every field
   * before them. */
  uint64_t inversions;            /**< pairs of unpinned, not-moving blocks out of the promotion rule's order
                                       across tiers (a slower one to keep more than a faster one); lower is
                                       better, 0 after cxlt_runtime_wait_idle is the goal */
  double inversion_max_gap;       /**< the largest keep-value gap of such a pair, in the rule's units
                                       (LRFU: effective score); lower is better, 0 when none */
  uint64_t steps_since_no_inversion; /**< decode steps since a measurement last found none (all steps since
                                          open if none did); lower is better */
  uint64_t placement_blocks;      /**< resident blocks the measurement compared (unpinned, not moving) */
} cxlt_stats_t;

/**
 * Fill *out. out->size is sizeof(cxlt_stats_t) or, for a caller built before the placement
 * fields, offsetof(cxlt_stats_t, inversions): only that many bytes are written, and the smaller
 * size skips the placement measure. The measure scans every remembered state under the
 * runtime's lock (engine threads' calls wait for it: about 4 ms at 1M states), then sorts the
 * resident blocks' keep values with no lock held, in the calling thread (about 70 ms at 1M
 * resident blocks; docs/runtime.md, "Placement quality"). The counters and inversions are as of
 * the scan; steps_since_no_inversion is read when the call returns.
 * \return CXLT_ERROR_INVALID_ARGUMENT if out is NULL, or out->size or out->version is not one
 *         this library knows; CXLT_ERROR_CLOSED for a closed handle.
 */
CXLT_NODISCARD CXLT_API cxlt_result_t cxlt_stats_get(cxlt_runtime_t *rt, cxlt_stats_t *out) CXLT_NOEXCEPT;
/**
 * The same counters as a JSON object, NUL-terminated, into buf; *needed (may be NULL) always gets
 * the size with the NUL.
 * \return CXLT_ERROR_INVALID_ARGUMENT for a buf that is NULL or smaller than that size (nothing
 *         written to it); CXLT_ERROR_CLOSED for a closed handle.
 */
CXLT_NODISCARD CXLT_API cxlt_result_t cxlt_stats_json(cxlt_runtime_t *rt, char *buf, size_t cap, size_t *needed) CXLT_NOEXCEPT;

/* --- GPUs (CUDA) -------------------------------------------------------------------------- */
/*
 * The CUDA driver is loaded at run time (dlopen of libcuda.so.1), never linked: these functions
 * exist in every build. They return CXLT_ERROR_NOT_SUPPORTED, with the reason in
 * cxlt_last_error(), when the build has no CUDA tier, the driver cannot be loaded, or it
 * reports no device. See docs/gpu.md.
 */
/** One CUDA device, as the driver reports it. */
typedef struct cxlt_gpu_info_s {
  int device;              /**< CUDA device ordinal (after CUDA_VISIBLE_DEVICES) */
  char name[96];           /**< e.g. "NVIDIA H200" */
  char pci_bus_id[32];     /**< e.g. "0000:3b:00.0" */
  int numa_node;           /**< nearest host NUMA node, -1 if unknown */
  uint64_t total_bytes;    /**< device memory, bytes */
  int compute_major;       /**< compute capability */
  int compute_minor;
  int copy_engines;        /**< asynchronous copy engines (2 or more: both directions at once) */
} cxlt_gpu_info_t;

/** Number of CUDA devices. \return CXLT_ERROR_NOT_SUPPORTED (see above), CXLT_ERROR_INVALID_ARGUMENT for NULL. */
CXLT_NODISCARD CXLT_API cxlt_result_t cxlt_gpu_count(int *out) CXLT_NOEXCEPT;
/** Describe device `device`. \return CXLT_ERROR_NOT_SUPPORTED, or CXLT_ERROR_INVALID_ARGUMENT (NULL, no such device). */
CXLT_NODISCARD CXLT_API cxlt_result_t cxlt_gpu_info(int device, cxlt_gpu_info_t *out) CXLT_NOEXCEPT;

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* CXLTIER_CXLTIER_H */
