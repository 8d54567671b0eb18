// SPDX-License-Identifier: Apache-2.0
// Helper for test_crash_restart: a deterministic runtime (runtime.synchronous: no threads, every
// move inside the call) driven by a seeded workload, checkpointing its score store every N
// steps. Killed at a random moment by the test, then run again from an empty store for exactly
// the checkpoint's number of steps: the two checkpoints must hold the same states.
// Usage: crash_writer STORE STEPS EVERY [SEED]   (prints "step N" after each checkpoint step)
#include "../runtime/runtime_test_util.hpp"

#include <cxltier/error.hpp>
#include <cxltier/runtime.hpp>

#include <cstdio>
#include <cstdlib>
#include <random>

using namespace cxltier;

int main(int argc, char **argv) {
  if (argc < 4) {
    std::fprintf(stderr, "usage: %s STORE STEPS EVERY [SEED]\n", argv[0]);
    return 2;
  }
  try {
    RuntimeConfig cfg = cxlt_test::three_tier_config(16, 32, 64);
    cfg.synchronous = true;
    cfg.store_path = argv[1];
    cfg.checkpoint_every_steps = std::strtoull(argv[3], nullptr, 10);
    const uint64_t steps = std::strtoull(argv[2], nullptr, 10);
    std::mt19937_64 rng(argc > 4 ? std::strtoull(argv[4], nullptr, 10) : 1);
    auto rt = Runtime::open(cfg);
    for (uint64_t s = 0; s < steps; ++s) {
      for (int j = 0; j < 24; ++j) {
        const Key k = key_from_sequence(rng() % 8, rng() % 64);
        const float a = static_cast<float>(rng() % 1001) / 1000.0f;
        rt->admit(k);
        rt->access(&k, &a, 1);
      }
      rt->step();
      if (cfg.checkpoint_every_steps && rt->current_step() % cfg.checkpoint_every_steps == 0) {
        std::printf("step %llu\n", static_cast<unsigned long long>(rt->current_step()));
        std::fflush(stdout);
      }
    }
    return 0;
  } catch (const Error &e) {
    std::fprintf(stderr, "crash_writer: %s\n", e.what());
    return 1;
  }
}
