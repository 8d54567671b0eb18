// SPDX-License-Identifier: Apache-2.0
// Registering (pinning) host memory for DMA in bounded chunks, on several threads, with
// progress and a time budget, from threads running on the NUMA node nearest the GPU.
//
// Why chunks: one cudaHostRegister/cuMemHostRegister call over a huge range is known to fail
// (reported at 512 GiB and more) or to stall a node for minutes while it pins every page; no
// single call here covers more than max_chunk_bytes (64 GiB by default), several run at once,
// and a time budget bounds how long an extent may take (a call already running cannot be
// interrupted: the budget stops new chunks from starting, then what was registered is undone).
// Chunk boundaries fall on multiples of lcm(page size, block size) from the extent's base, so
// no block slot straddles two registrations (a copy of one block then never spans two).
//
// The planning and the threaded executor are independent of CUDA (the register and undo
// operations are passed in), so they are tested on any machine; cuda_host.cpp plugs in
// cuMemHostRegister_v2 / cuMemHostUnregister. Built in every configuration.
#pragma once

#include <cxltier/cxltier.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace cxltier::cuda {

inline constexpr uint64_t kDefaultMaxChunkBytes = uint64_t{64} << 30;  // 64 GiB per call at most
inline constexpr unsigned kDefaultRegisterThreads = 4;
inline constexpr double kDefaultRegisterBudgetSeconds = 600;

struct RegisterChunk {
  uint64_t offset = 0;  // from the extent's base
  uint64_t bytes = 0;
};

// lcm(page_bytes, block_bytes): chunk boundaries are multiples of it. Throws
// Error(CXLT_ERROR_INVALID_ARGUMENT) for a zero argument or an lcm beyond 2^63.
uint64_t register_alignment(uint64_t page_bytes, uint64_t block_bytes);

// Split [0, bytes) into chunks of at most max_chunk_bytes whose boundaries are multiples of
// align_bytes (the last chunk ends at `bytes`, whatever it is). Every chunk but the last has the
// same size: the largest multiple of align_bytes not above max_chunk_bytes. Throws
// Error(CXLT_ERROR_INVALID_ARGUMENT) naming the values when bytes, align_bytes or
// max_chunk_bytes is 0, or when align_bytes > max_chunk_bytes (no chunk could keep blocks whole).
std::vector<RegisterChunk> plan_register_chunks(uint64_t bytes, uint64_t max_chunk_bytes, uint64_t align_bytes);

struct RegisterProgress {
  uint64_t done_bytes = 0, total_bytes = 0;
  size_t done_chunks = 0, total_chunks = 0;
  double elapsed_s = 0;
};

struct RegisterOptions {
  unsigned threads = kDefaultRegisterThreads;   // at most this many calls at once (>= 1)
  double time_budget_s = kDefaultRegisterBudgetSeconds;  // no chunk starts after this (> 0, or 0: none starts)
  int numa_node = -1;                           // run the threads on this node's CPUs (-1: wherever)
  // Called after each chunk, one call at a time (from whichever thread finished it).
  std::function<void(const RegisterProgress &)> progress;
};

// Register one chunk: returns CXLT_OK or an error with *message set.
using RegisterChunkFn = std::function<cxlt_result_t(void *base, size_t bytes, std::string *message)>;
// Undo one registered chunk (best effort; failures are the undo function's to report).
using UnregisterChunkFn = std::function<void(void *base, size_t bytes)>;

struct RegisterResult {
  cxlt_result_t result = CXLT_OK;  // CXLT_OK, the first failing chunk's code, or CXLT_ERROR_TIMEOUT
  std::string message;             // on failure: which chunk, how much was done, in how long
  size_t chunks_done = 0;          // registered when the work stopped (all undone on failure)
  double elapsed_s = 0;
  bool node_binding_failed = false;  // the threads could not be moved to options.numa_node
};

// Run the plan: min(threads, chunks) threads take chunks in order. On the first failure, or
// when the budget runs out with chunks left, the others stop taking chunks, every registered
// chunk is undone, and the result says why. Never throws.
RegisterResult register_in_chunks(void *base, const std::vector<RegisterChunk> &plan, const RegisterOptions &options,
                                  const RegisterChunkFn &do_register, const UnregisterChunkFn &undo);

// Undo a whole plan (free_extent): undo each chunk, on up to `threads` threads.
void unregister_chunks(void *base, const std::vector<RegisterChunk> &plan, unsigned threads,
                       const UnregisterChunkFn &undo);

}  // namespace cxltier::cuda
