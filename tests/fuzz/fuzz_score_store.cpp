// SPDX-License-Identifier: Apache-2.0
// libFuzzer target: the score-store checkpoint reader (ScoreStore::parse_checkpoint, the part
// of ScoreStore::load after the file is read). Any bytes must be accepted or refused with
// CXLT_ERROR_CORRUPT, never crash. Because every byte is under a checksum, random bytes are
// refused at the first one; so each input is also tried with its header, chunk and file
// checksums recomputed, which lets the fuzzer reach the record checks and the loaded states.
// A checkpoint that loads must go into a store (replace_with) unchanged, and the store must
// then validate.
#include "fuzz_util.hpp"

#include "lib/store/score_store.hpp"

#include <cxltier/error.hpp>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

using namespace cxltier;

namespace {

// The format (lib/store/checkpoint.cpp): 64-byte header with an XXH32 of bytes 0..59 at 60,
// 48-byte records in chunks of 4096 each followed by its XXH3-64, a 32-byte footer
// ("CXLTEND1", count, XXH3-64 of everything before the footer, 0).
constexpr size_t kHeader = 64, kRecord = 48, kChunk = 4096, kFooter = 32;

template <typename T>
T get(const std::string &b, size_t at) {
  T v;
  std::memcpy(&v, b.data() + at, sizeof v);
  return v;
}
template <typename T>
void set(std::string &b, size_t at, T v) {
  std::memcpy(b.data() + at, &v, sizeof v);
}

// Recompute every checksum the layout says is there; false if the size does not follow from
// the count (nothing to fix: the reader refuses it on size).
bool fix_checksums(std::string &b) {
  if (b.size() < kHeader + kFooter) return false;
  set<uint32_t>(b, 60, XXH32(b.data(), 60, 0));
  const uint64_t count = get<uint64_t>(b, 16);
  if (count > (1ull << 32)) return false;
  const uint64_t chunks = (count + kChunk - 1) / kChunk;
  if (b.size() != kHeader + count * kRecord + chunks * 8 + kFooter) return false;
  size_t at = kHeader;
  for (uint64_t done = 0; done < count;) {
    const uint64_t n = std::min<uint64_t>(kChunk, count - done);
    set<uint64_t>(b, at + n * kRecord, XXH3_64bits(b.data() + at, n * kRecord));
    at += n * kRecord + 8;
    done += n;
  }
  set<uint64_t>(b, b.size() - kFooter + 16, XXH3_64bits(b.data(), b.size() - kFooter));
  return true;
}

void check(const std::string &bytes) {
  LoadedCheckpoint cp;
  try {
    cp = ScoreStore::parse_checkpoint(bytes, "<fuzz>");
  } catch (const Error &e) {
    FUZZ_CHECK(e.code() == CXLT_ERROR_CORRUPT, "code %d: %s", static_cast<int>(e.code()), e.what());
    return;
  }
  // Accepted: the states go into a store, which must then be consistent.
  StoreOptions opt;
  opt.capacity = 1u << 14;
  ScoreStore store(opt);
  try {
    store.replace_with(cp);
  } catch (const Error &e) {
    FUZZ_CHECK(cp.states.size() > opt.capacity, "replace_with refused %zu states: %s", cp.states.size(), e.what());
    return;
  }
  const std::string v = store.validate();
  FUZZ_CHECK(v.empty(), "store invalid after loading %zu states: %s", cp.states.size(), v.c_str());
  FUZZ_CHECK(store.size() == cp.states.size(), "%zu states loaded, store holds %zu", cp.states.size(), store.size());
  for (const auto &[key, st] : cp.states) {
    NodeId id = store.find(key);
    FUZZ_CHECK(id != kNoNode, "loaded key %s not found", key.hex().c_str());
    FUZZ_CHECK(std::memcmp(&store[id].st, &st, sizeof st) == 0, "state of %s changed on the way in", key.hex().c_str());
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  std::string bytes(reinterpret_cast<const char *>(data), size);
  check(bytes);
  if (fix_checksums(bytes)) {
    check(bytes);
  }
  return 0;
}
