// SPDX-License-Identifier: Apache-2.0
// libFuzzer target: the files a user names, of every kind. Byte 0 of the input picks what
// stands at the score store's path and byte 1 what stands at the password file's path: missing,
// a regular file holding the rest of the input, empty, a directory, a FIFO, links to /dev/zero
// and /dev/null, a 1 GiB sparse file, a dangling link, a link loop, a file of mode 000, a path
// under a regular file, a link to a FIFO. A runtime opened on that store and the password
// reader must return or throw cxltier::Error, never crash, block (libFuzzer's -timeout) or read
// an unbounded file; a password is read only from a regular file and is at most
// kMaxPasswordFileBytes long.
#include "fuzz_util.hpp"

#include "lib/core/secret_file.hpp"

#include <cxltier/config.hpp>
#include <cxltier/error.hpp>
#include <cxltier/runtime.hpp>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <string>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace fs = std::filesystem;

namespace {

constexpr int kKinds = 13;
std::string g_dir;

// Makes `path` the kind `kind`; true when the kind is a readable regular file.
bool make(const std::string &path, int kind, const std::string &content) {
  const std::string fifo = g_dir + "/a.fifo";
  switch (kind) {
    case 0: return false;  // missing
    case 1:
    case 2:
    case 10: {
      std::FILE *f = std::fopen(path.c_str(), "wb");
      if (f == nullptr) return false;
      if (kind != 2) std::fwrite(content.data(), 1, content.size(), f);
      std::fclose(f);
      if (kind == 10) (void)!::chmod(path.c_str(), 0);
      return kind != 2;
    }
    case 3: (void)!::mkdir(path.c_str(), 0700); return false;
    case 4: (void)!::mkfifo(path.c_str(), 0600); return false;
    case 5: (void)!::symlink("/dev/zero", path.c_str()); return false;
    case 6: (void)!::symlink("/dev/null", path.c_str()); return false;
    case 7: {
      std::FILE *f = std::fopen(path.c_str(), "wb");
      if (f == nullptr) return false;
      std::fwrite(content.data(), 1, content.size(), f);
      std::fclose(f);
      (void)!::truncate(path.c_str(), off_t{1} << 30);
      return false;
    }
    case 8: (void)!::symlink((g_dir + "/nowhere").c_str(), path.c_str()); return false;
    case 9: (void)!::symlink(path.c_str(), path.c_str()); return false;
    case 11: {
      std::FILE *f = std::fopen((path + ".parent").c_str(), "wb");
      if (f != nullptr) std::fclose(f);
      return false;
    }
    case 12:
      (void)!::mkfifo(fifo.c_str(), 0600);
      (void)!::symlink(fifo.c_str(), path.c_str());
      return false;
  }
  return false;
}

// The path used for kind 11 is under a regular file.
std::string path_for(const std::string &name, int kind) {
  return kind == 11 ? g_dir + "/" + name + ".parent/x" : g_dir + "/" + name;
}

void clean() {
  std::error_code ec;
  for (const auto &e : fs::directory_iterator(g_dir, ec)) {
    (void)!::chmod(e.path().c_str(), 0700);
    fs::remove_all(e.path(), ec);
  }
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int *, char ***) {
  char tmpl[] = "/tmp/cxlt-fuzz-files-XXXXXX";
  if (mkdtemp(tmpl) != nullptr) g_dir = tmpl;
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (g_dir.empty() || size < 2) return 0;
  const int store_kind = data[0] % kKinds, pw_kind = data[1] % kKinds;
  const std::string content(reinterpret_cast<const char *>(data) + 2, size - 2);
  clean();

  const std::string pw = path_for("pw", pw_kind);
  const bool pw_regular = make(pw, pw_kind, content);
  try {
    const std::string secret = cxltier::read_password_file(pw, "--password-file");
    FUZZ_CHECK(pw_regular, "a password was read from file kind %d", pw_kind);
    FUZZ_CHECK(!secret.empty() && secret.size() <= cxltier::kMaxPasswordFileBytes, "a %zu-byte password", secret.size());
  } catch (const cxltier::Error &) {
  }

  const std::string store = path_for("s.store", store_kind);
  make(store, store_kind, content);
  cxltier::RuntimeConfig cfg;
  cfg.topology = "emulated";
  cfg.geometry.layers = cfg.geometry.kv_heads = cfg.geometry.head_dim = 1;
  cfg.geometry.bytes_per_element = 1;
  cfg.geometry.tokens_per_block = 64;
  cfg.geometry.k_and_v = false;
  cfg.huge_pages = cxltier::HugePages::none;
  cfg.synchronous = true;
  cfg.store_path = store;
  for (int t = 0; t < 2; ++t) {
    cxltier::TierConfig tier;
    tier.kind = t == 0 ? cxltier::TierKind::hbm : cxltier::TierKind::dram;
    tier.budget_bytes = 64 * 8;
    tier.backend = "emulated";
    cfg.tiers.push_back(tier);
  }
  try {
    auto rt = cxltier::Runtime::open(cfg);
    rt->admit(cxltier::key_from_sequence(1, 1));
    rt->step();
    rt->close();
  } catch (const cxltier::Error &) {
  }
  clean();
  return 0;
}
