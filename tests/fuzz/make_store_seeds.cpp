// SPDX-License-Identifier: Apache-2.0
// Writes the score-store checkpoints that seed fuzz_score_store (tests/fuzz/seeds/score_store/,
// committed; see the PROVENANCE.md there): an empty store, a few states, decay mode, and one
// that spans two checksummed chunks. Usage: make_store_seeds DIR
#include "lib/store/score_store.hpp"

#include <cstdio>
#include <string>
#include <utility>
#include <vector>

using namespace cxltier;

static std::vector<std::pair<Key, PolicyState>> states(size_t n) {
  std::vector<std::pair<Key, PolicyState>> v;
  for (size_t i = 0; i < n; ++i) {
    PolicyState s;
    s.score = static_cast<double>(i % 100) / 100.0;
    s.last_access = 10 + i % 7;
    s.accesses = 1 + i % 13;
    s.tick = 1 + i;
    v.emplace_back(key_from_sequence(7, i), s);
  }
  return v;
}

int main(int argc, char **argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s DIR\n", argv[0]);
    return 2;
  }
  const std::string dir = argv[1];
  CheckpointMeta touch{0, 0, 0.05, 0.001, ScoreMode::touch};
  ScoreStore::write_checkpoint(dir + "/empty.store", touch, states(0));
  CheckpointMeta meta{12, 40, 0.05, 0.001, ScoreMode::touch};
  ScoreStore::write_checkpoint(dir + "/three.store", meta, states(3));
  CheckpointMeta decay{500, 9000, 0.2, 0.01, ScoreMode::decay};
  ScoreStore::write_checkpoint(dir + "/decay-40.store", decay, states(40));
  ScoreStore::write_checkpoint(dir + "/two-chunks.store", meta, states(4100));
  return 0;
}
