// SPDX-License-Identifier: Apache-2.0
// libFuzzer target: the geometry-and-configuration space of `cxltier run`. The input's bytes
// choose a geometry (every field from 1 up to a few thousand, k_and_v), two or three emulated
// or null tiers with budgets of 1-64 blocks, extents, the policy, watermarks and promotion;
// the target writes that as a TOML file and runs `cxltier run --config FILE` for 3 decode
// steps in-process (run_cli, tools/cli.cpp). Every configuration must either run with no
// integrity error (exit 0) or be refused naming the problem (exit 2); a crash, exit 1 (an
// integrity error) or exit 3 is a finding. Blocks over 1 MiB are skipped: they are valid, but
// too slow for a fuzzer's thousands of runs.
#include "fuzz_util.hpp"

#include "commands.hpp"

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include <fcntl.h>
#include <unistd.h>

namespace {

struct Bytes {
  const uint8_t *p;
  size_t n;
  size_t at = 0;
  uint8_t next() { return at < n ? p[at++] : 0; }
};

// 1-255 most of the time; otherwise a larger value (up to 16 bits), to reach the edges.
uint32_t field(Bytes &b) {
  uint8_t x = b.next();
  if (x != 0) return x;
  return 256u + (static_cast<uint32_t>(b.next()) << 8 | b.next());
}

std::string g_dir;

}  // namespace

extern "C" int LLVMFuzzerInitialize(int *, char ***) {
  char tmpl[] = "/tmp/cxlt-fuzz-run-XXXXXX";
  if (mkdtemp(tmpl) != nullptr) g_dir = tmpl;
  const int null = ::open("/dev/null", O_WRONLY | O_CLOEXEC);
  if (null >= 0) {
    ::dup2(null, 2);
    ::close(null);
  }
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (g_dir.empty()) return 0;
  Bytes b{data, size};
  const uint32_t layers = field(b), heads = field(b), dim = field(b), bpe = b.next() % 8 + 1,
                 tokens = field(b);
  const bool k_and_v = b.next() & 1;
  const uint64_t block = uint64_t{layers} * heads * dim * bpe * tokens * (k_and_v ? 2 : 1);
  if (block > (1u << 20)) return 0;
  static const char *const kinds[] = {"hbm", "dram", "cxl"};
  static const char *const backends[] = {"emulated", "null", "auto"};
  static const char *const policies[] = {"lrfu", "lru", "fifo", "lfu", "arc"};
  static const char *const promotions[] = {"never", "score-above-victim", "always"};
  std::string toml = "topology = \"emulated\"\n[geometry]\nlayers = " + std::to_string(layers) +
                     "\nkv_heads = " + std::to_string(heads) + "\nhead_dim = " + std::to_string(dim) +
                     "\nbytes_per_element = " + std::to_string(bpe) + "\ntokens_per_block = " +
                     std::to_string(tokens) + "\nk_and_v = " + (k_and_v ? "true" : "false") + "\n";
  toml += "[policy]\nkind = \"" + std::string(policies[b.next() % 5]) + "\"\n";
  const uint8_t high = b.next() % 100 + 1, low = b.next() % 100 + 1;
  toml += "[runtime]\nhuge_pages = \"none\"\nextent_blocks = " + std::to_string(b.next() % 8 + 1) +
          "\nhigh_watermark = " + std::to_string(high / 100.0) + "\nlow_watermark = " + std::to_string(low / 100.0) +
          "\npromotion = \"" + promotions[b.next() % 3] + "\"\nmigration_threads = " + std::to_string(b.next() % 4 + 1) +
          "\n";
  const unsigned tiers = 2 + b.next() % 2;
  for (unsigned t = 0; t < tiers; ++t)
    toml += "[[tiers]]\nkind = \"" + std::string(kinds[t]) + "\"\nbackend = \"" + backends[b.next() % 3] +
            "\"\nbudget = " + std::to_string(block * (b.next() % 64 + 1)) + "\n";
  const std::string path = g_dir + "/run.toml";
  std::FILE *f = std::fopen(path.c_str(), "w");
  if (f == nullptr) return 0;
  std::fwrite(toml.data(), 1, toml.size(), f);
  std::fclose(f);

  // The summary goes to /dev/null (libFuzzer may have closed stdout; a closed one is exit 2).
  std::fflush(stdout);
  const int null = ::open("/dev/null", O_WRONLY | O_CLOEXEC);
  if (null >= 0) {
    ::dup2(null, 1);
    ::close(null);
  }
  std::clearerr(stdout);
  std::vector<std::string> words{"cxltier", "run", "--config", path, "--steps", "3", "--sequences", "8",
                                 "--active", "3", "--quiet"};
  std::vector<char *> argv;
  for (std::string &w : words) argv.push_back(w.data());
  argv.push_back(nullptr);
  const int rc = cxltier::cli::run_cli(static_cast<int>(words.size()), argv.data(), cxltier::cli::Mode::run);
  FUZZ_CHECK(rc == cxltier::cli::kExitOk || rc == cxltier::cli::kExitBadInput, "exit status %d for\n%s", rc,
             toml.c_str());
  return 0;
}
