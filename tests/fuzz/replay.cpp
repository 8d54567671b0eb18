// SPDX-License-Identifier: Apache-2.0
// Replays files through a libFuzzer target without libFuzzer: linked with one fuzz_<target>.cpp,
// this GoogleTest runs LLVMFuzzerTestOneInput on every file under the directories listed in
// $CXLT_FUZZ_DIRS (colon-separated; "?DIR" when DIR may be absent): the target's regression
// inputs (crashes the fuzzer found, tests/fuzz/regressions/<target>/) and its seed corpora. A crash or a failed property aborts
// the process, so the test fails naming the file last started (printed before each run).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
extern "C" __attribute__((weak)) int LLVMFuzzerInitialize(int *argc, char ***argv);

namespace fs = std::filesystem;

namespace {

std::vector<std::string> split_dirs(const char *s) {
  std::vector<std::string> out;
  std::string cur;
  for (const char *p = s; p && *p; ++p) {
    if (*p == ':') {
      if (!cur.empty()) out.push_back(cur);
      cur.clear();
    } else {
      cur += *p;
    }
  }
  if (!cur.empty()) out.push_back(cur);
  return out;
}

bool is_input(const fs::directory_entry &e) {
  if (!e.is_regular_file()) return false;
  const std::string name = e.path().filename().string();
  // Notes kept beside the inputs are not inputs.
  return name != "README.md" && name != "PROVENANCE.md" && name != ".gitkeep";
}

}  // namespace

TEST(FuzzReplay, EveryRegressionAndSeedInputRuns) {
  const char *dirs_env = std::getenv("CXLT_FUZZ_DIRS");
  ASSERT_NE(dirs_env, nullptr) << "CXLT_FUZZ_DIRS is not set (tests/fuzz/meson.build sets it)";
  if (LLVMFuzzerInitialize) {
    int argc = 0;
    char **argv = nullptr;
    LLVMFuzzerInitialize(&argc, &argv);
  }
  size_t files = 0, bytes = 0;
  for (std::string dir : split_dirs(dirs_env)) {
    // "?DIR": optional (a target's regression folder exists once the fuzzer has found something).
    if (dir[0] == '?') {
      dir.erase(0, 1);
      if (!fs::exists(dir)) continue;
    }
    ASSERT_TRUE(fs::is_directory(dir)) << dir << " is not a directory";
    std::vector<fs::path> paths;
    for (const auto &e : fs::recursive_directory_iterator(dir))
      if (is_input(e)) paths.push_back(e.path());
    std::sort(paths.begin(), paths.end());
    for (const fs::path &p : paths) {
      std::ifstream in(p, std::ios::binary);
      ASSERT_TRUE(in) << "cannot read " << p;
      std::string data((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
      std::fprintf(stderr, "replaying %s (%zu bytes)\n", p.c_str(), data.size());
      LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t *>(data.data()), data.size());
      ++files;
      bytes += data.size();
    }
  }
  EXPECT_GT(files, 0u) << "no input found under " << dirs_env;
  std::printf("replayed %zu inputs (%zu bytes) without a crash or a failed property\n", files, bytes);
}
