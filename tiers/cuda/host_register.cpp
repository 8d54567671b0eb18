// SPDX-License-Identifier: Apache-2.0
// Chunked, threaded registration of host memory for DMA: the plan and the executor (see
// host_register.hpp). Independent of CUDA; built in every configuration.
#include "tiers/cuda/host_register.hpp"

#include <cxltier/error.hpp>
#include <cxltier/tools/units.hpp>

#include <numa.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <mutex>
#include <numeric>
#include <thread>

namespace cxltier::cuda {

uint64_t register_alignment(uint64_t page_bytes, uint64_t block_bytes) {
  if (page_bytes == 0 || block_bytes == 0)
    fail(CXLT_ERROR_INVALID_ARGUMENT, "registration alignment: page size ", page_bytes, " and block size ",
         block_bytes, " must both be positive");
  const uint64_t g = std::gcd(page_bytes, block_bytes);
  const uint64_t a = page_bytes / g;
  if (a > (uint64_t{1} << 63) / block_bytes)
    fail(CXLT_ERROR_INVALID_ARGUMENT, "registration alignment: lcm of page size ", page_bytes, " and block size ",
         block_bytes, " overflows");
  return a * block_bytes;
}

std::vector<RegisterChunk> plan_register_chunks(uint64_t bytes, uint64_t max_chunk_bytes, uint64_t align_bytes) {
  if (bytes == 0) fail(CXLT_ERROR_INVALID_ARGUMENT, "registration plan: the extent is empty (0 bytes)");
  if (align_bytes == 0) fail(CXLT_ERROR_INVALID_ARGUMENT, "registration plan: alignment is 0");
  if (max_chunk_bytes == 0) fail(CXLT_ERROR_INVALID_ARGUMENT, "registration plan: the chunk limit is 0");
  if (align_bytes > max_chunk_bytes && bytes > max_chunk_bytes)
    fail(CXLT_ERROR_INVALID_ARGUMENT, "registration plan: chunks of at most ", format_bytes(max_chunk_bytes),
         " cannot keep blocks whole (boundaries must fall on multiples of ", format_bytes(align_bytes),
         "); raise the chunk limit");
  const uint64_t chunk = std::max<uint64_t>(align_bytes, max_chunk_bytes - max_chunk_bytes % align_bytes);
  std::vector<RegisterChunk> plan;
  plan.reserve(static_cast<size_t>(bytes / chunk + 1));
  for (uint64_t off = 0; off < bytes; off += chunk) plan.push_back({off, std::min(chunk, bytes - off)});
  return plan;
}

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// Run `work` on n threads (each first moved to `node` when node >= 0). Returns false if a
// thread could not be moved (the work still runs, wherever the kernel puts it).
bool run_threads(unsigned n, int node, const std::function<void()> &work) {
  std::atomic<bool> binding_failed{false};
  std::vector<std::thread> threads;
  threads.reserve(n);
  for (unsigned i = 0; i < n; ++i)
    threads.emplace_back([&] {
      if (node >= 0 && (numa_available() < 0 || numa_run_on_node(node) != 0)) binding_failed = true;
      work();
    });
  for (std::thread &t : threads) t.join();
  return !binding_failed.load();
}

}  // namespace

RegisterResult register_in_chunks(void *base, const std::vector<RegisterChunk> &plan, const RegisterOptions &options,
                                  const RegisterChunkFn &do_register, const UnregisterChunkFn &undo) {
  RegisterResult res;
  const Clock::time_point t0 = Clock::now();
  if (plan.empty()) return res;
  uint64_t total = 0;
  for (const RegisterChunk &c : plan) total += c.bytes;

  std::atomic<size_t> next{0};
  std::atomic<bool> stop{false};
  std::mutex mu;  // guards everything below and serialises progress calls
  std::vector<bool> registered(plan.size(), false);
  RegisterProgress prog;
  prog.total_bytes = total;
  prog.total_chunks = plan.size();
  cxlt_result_t first_error = CXLT_OK;
  std::string first_message;
  bool out_of_time = false;

  auto work = [&] {
    char *b = static_cast<char *>(base);
    while (!stop.load(std::memory_order_relaxed)) {
      if (options.time_budget_s <= 0 || seconds_since(t0) >= options.time_budget_s) {
        // Only chunks not yet taken are refused; a call in progress finishes.
        if (next.load() < plan.size()) {
          std::lock_guard lk(mu);
          out_of_time = true;
        }
        stop = true;
        break;
      }
      const size_t i = next.fetch_add(1);
      if (i >= plan.size()) break;
      std::string message;
      cxlt_result_t r = CXLT_ERROR_UNKNOWN;
      try {
        r = do_register(b + plan[i].offset, static_cast<size_t>(plan[i].bytes), &message);
      } catch (...) {
        message = "the register operation threw";
      }
      std::lock_guard lk(mu);
      if (r != CXLT_OK) {
        if (first_error == CXLT_OK) {
          first_error = r;
          first_message = "chunk " + std::to_string(i + 1) + " of " + std::to_string(plan.size()) + " (" +
                          format_bytes(plan[i].bytes) + " at offset " + format_bytes(plan[i].offset) + "): " + message;
        }
        stop = true;
        break;
      }
      registered[i] = true;
      prog.done_bytes += plan[i].bytes;
      ++prog.done_chunks;
      prog.elapsed_s = seconds_since(t0);
      if (options.progress) {
        try {
          options.progress(prog);
        } catch (...) {
          // A progress callback must not break registration.
        }
      }
    }
  };
  const unsigned n = static_cast<unsigned>(std::min<size_t>(std::max(1u, options.threads), plan.size()));
  res.node_binding_failed = !run_threads(n, options.numa_node, work);
  res.elapsed_s = seconds_since(t0);
  res.chunks_done = prog.done_chunks;
  if (first_error == CXLT_OK && !out_of_time) return res;

  for (size_t i = 0; i < plan.size(); ++i)
    if (registered[i]) undo(static_cast<char *>(base) + plan[i].offset, static_cast<size_t>(plan[i].bytes));
  char secs[32];
  std::snprintf(secs, sizeof secs, "%.1f s", res.elapsed_s);
  std::string done = format_bytes(prog.done_bytes) + " of " + format_bytes(total) + " (" +
                     std::to_string(prog.done_chunks) + " of " + std::to_string(plan.size()) +
                     " chunks) were registered in " + secs + " and have been unregistered again";
  if (first_error != CXLT_OK) {
    res.result = first_error;
    res.message = "registering " + format_bytes(total) + " for DMA failed at " + first_message + "; " + done;
  } else {
    char budget[32];
    std::snprintf(budget, sizeof budget, "%.1f s", options.time_budget_s);
    res.result = CXLT_ERROR_TIMEOUT;
    res.message = "registering " + format_bytes(total) + " for DMA ran out of its time budget (" + budget + "); " + done;
  }
  res.chunks_done = 0;
  return res;
}

void unregister_chunks(void *base, const std::vector<RegisterChunk> &plan, unsigned threads,
                       const UnregisterChunkFn &undo) {
  std::atomic<size_t> next{0};
  auto work = [&] {
    for (size_t i; (i = next.fetch_add(1)) < plan.size();)
      undo(static_cast<char *>(base) + plan[i].offset, static_cast<size_t>(plan[i].bytes));
  };
  if (plan.size() <= 1) {
    work();
    return;
  }
  run_threads(static_cast<unsigned>(std::min<size_t>(std::max(1u, threads), plan.size())), -1, work);
}

}  // namespace cxltier::cuda
