// SPDX-License-Identifier: Apache-2.0
// The score store's checkpoints: the file format, writing one atomically (temporary file,
// fsync, rename, directory fsync) and reading one back with every check made before anything
// is replaced (score_store.hpp says what each call guarantees).
#include "lib/store/score_store.hpp"

#include "lib/core/assert.hpp"
#include "lib/core/read_upto.hpp"

#include <cxltier/error.hpp>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <dirent.h>
#include <fcntl.h>
#include <limits>
#include <signal.h>
#include <sstream>
#include <sys/stat.h>
#include <unistd.h>
#include <unordered_set>

namespace cxltier {

// --- Checkpoints ------------------------------------------------------------------------------
// Format v1, little-endian (x86-64 and aarch64 hosts):
//   header, 64 bytes: "CXLTSTOR", u32 version=1, u32 header size=64, u64 count, u64 step,
//       u64 tick, f64 alpha, f64 beta, u32 flags (bit 0: decay mode), u32 XXH32 of bytes 0..59
//   records in chunks of up to 4096: 48 bytes each (key hi, key lo, f64 score, u64 last access,
//       u64 accesses, u64 tick), each chunk followed by the u64 XXH3-64 of its bytes
//   footer, 32 bytes: "CXLTEND1", u64 count, u64 XXH3-64 of every byte before the footer, u64 0
// The file size follows from the count, so truncation is always detected.

namespace {
constexpr char kMagic[8] = {'C', 'X', 'L', 'T', 'S', 'T', 'O', 'R'};
constexpr char kEndMagic[8] = {'C', 'X', 'L', 'T', 'E', 'N', 'D', '1'};
constexpr uint32_t kVersion = 1;
constexpr size_t kHeader = 64, kRecord = 48, kChunk = 4096, kFooter = 32;
constexpr uint64_t kMaxClock = uint64_t{1} << 62;  // step and tick bound (parse_checkpoint)

template <typename T>
void put(std::string &b, T v) {
  b.append(reinterpret_cast<const char *>(&v), sizeof v);
}
template <typename T>
T get(const char *p) {
  T v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

uint64_t expected_size(uint64_t count) {
  uint64_t chunks = (count + kChunk - 1) / kChunk;
  return kHeader + count * kRecord + chunks * 8 + kFooter;
}

bool pid_alive(long pid) { return pid > 0 && (kill(static_cast<pid_t>(pid), 0) == 0 || errno == EPERM); }

// True for a name of the exact form write_checkpoint() gives its temporary files:
// <prefix><pid>.<n>, both decimal without a sign or leading zero; *pid gets the pid.
bool temp_name(const std::string &name, const std::string &prefix, long *pid) {
  if (name.compare(0, prefix.size(), prefix) != 0) return false;
  auto number = [](const std::string &s, size_t from, size_t to) {
    if (to <= from || to - from > 19 || (s[from] == '0' && to - from > 1)) return false;
    for (size_t i = from; i < to; ++i)
      if (s[i] < '0' || s[i] > '9') return false;
    return true;
  };
  const size_t dot = name.find('.', prefix.size());
  if (dot == std::string::npos || !number(name, prefix.size(), dot) || !number(name, dot + 1, name.size())) return false;
  *pid = std::strtol(name.c_str() + prefix.size(), nullptr, 10);
  return true;
}

// Remove temporary files that a killed writer left beside `path` (<path>.tmp.<pid>.<n>, regular
// files whose writer is gone). Any other name, however close, is the user's and stays.
void remove_stale_temps(const std::string &path) {
  std::string dir = ".", base = path;
  if (size_t slash = path.rfind('/'); slash != std::string::npos) {
    dir = slash == 0 ? "/" : path.substr(0, slash);
    base = path.substr(slash + 1);
  }
  std::string prefix = base + ".tmp.";
  DIR *d = opendir(dir.c_str());
  if (!d) return;
  while (dirent *de = readdir(d)) {
    std::string name = de->d_name;
    long pid = 0;
    if (!temp_name(name, prefix, &pid) || pid_alive(pid)) continue;
    struct stat st {};
    if (fstatat(dirfd(d), name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode))
      unlinkat(dirfd(d), name.c_str(), 0);
  }
  closedir(d);
}

void write_all(int fd, const char *p, size_t n, const std::string &tmp) {
  while (n) {
    ssize_t w = ::write(fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) fail(CXLT_ERROR_IO, "score store checkpoint: writing ", tmp, " failed: ", std::strerror(errno));
    p += w;
    n -= static_cast<size_t>(w);
  }
}
}  // namespace

std::vector<std::pair<Key, PolicyState>> ScoreStore::snapshot() const {
  std::vector<std::pair<Key, PolicyState>> out;
  out.reserve(size_);
  for_each([&](NodeId, const StoreEntry &e) { out.emplace_back(e.key, e.st); });
  return out;
}

void ScoreStore::save(const std::string &path, const CheckpointMeta &meta) const {
  write_checkpoint(path, meta, snapshot());
}

void ScoreStore::write_checkpoint(const std::string &path, const CheckpointMeta &meta,
                                  const std::vector<std::pair<Key, PolicyState>> &states) {
  const size_t count = states.size();
  if (path.empty()) fail(CXLT_ERROR_IO, "score store checkpoint: empty path");
  struct stat st {};
  if (lstat(path.c_str(), &st) == 0 && S_ISLNK(st.st_mode))
    fail(CXLT_ERROR_IO, "score store checkpoint: ", path, " is a symbolic link; refusing to write through it");
  remove_stale_temps(path);

  std::string buf;
  buf.reserve(expected_size(count));
  buf.append(kMagic, 8);
  put<uint32_t>(buf, kVersion);
  put<uint32_t>(buf, kHeader);
  put<uint64_t>(buf, count);
  put<uint64_t>(buf, meta.current_step);
  put<uint64_t>(buf, meta.current_tick);
  put<double>(buf, meta.alpha);
  put<double>(buf, meta.beta);
  put<uint32_t>(buf, meta.mode == ScoreMode::decay ? 1u : 0u);
  put<uint32_t>(buf, XXH32(buf.data(), 60, 0));
  size_t in_chunk = 0, chunk_start = buf.size();
  for (const auto &[key, state] : states) {
    put<uint64_t>(buf, key.hi);
    put<uint64_t>(buf, key.lo);
    put<double>(buf, state.score);
    put<uint64_t>(buf, state.last_access);
    put<uint64_t>(buf, state.accesses);
    put<uint64_t>(buf, state.tick);
    if (++in_chunk == kChunk) {
      put<uint64_t>(buf, XXH3_64bits(buf.data() + chunk_start, buf.size() - chunk_start));
      in_chunk = 0;
      chunk_start = buf.size();
    }
  }
  if (in_chunk) put<uint64_t>(buf, XXH3_64bits(buf.data() + chunk_start, buf.size() - chunk_start));
  uint64_t whole = XXH3_64bits(buf.data(), buf.size());
  buf.append(kEndMagic, 8);
  put<uint64_t>(buf, count);
  put<uint64_t>(buf, whole);
  put<uint64_t>(buf, 0);
  cxlt_assert(buf.size() == expected_size(count));

  static std::atomic<unsigned> counter{0};
  std::string tmp = path + ".tmp." + std::to_string(getpid()) + "." + std::to_string(counter++);
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) fail(CXLT_ERROR_IO, "score store checkpoint: cannot create ", tmp, ": ", std::strerror(errno));
  try {
    write_all(fd, buf.data(), buf.size(), tmp);
    if (::fsync(fd) != 0) fail(CXLT_ERROR_IO, "score store checkpoint: fsync of ", tmp, " failed: ", std::strerror(errno));
  } catch (...) {
    ::close(fd);
    ::unlink(tmp.c_str());
    throw;
  }
  ::close(fd);
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    int err = errno;
    ::unlink(tmp.c_str());
    fail(CXLT_ERROR_IO, "score store checkpoint: rename to ", path, " failed: ", std::strerror(err));
  }
  std::string dir = ".";
  if (size_t slash = path.rfind('/'); slash != std::string::npos) dir = slash == 0 ? "/" : path.substr(0, slash);
  int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    ::fsync(dfd);  // make the rename itself durable
    ::close(dfd);
  }
}

LoadedCheckpoint ScoreStore::load(const std::string &path) {
  // O_NONBLOCK: opening a FIFO must not wait for a writer; fstat then refuses it.
  int fd = ::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ELOOP) fail(CXLT_ERROR_IO, "score store ", path, " is a symbolic link; refusing to read through it");
    fail(CXLT_ERROR_IO, "score store ", path, ": cannot open: ", std::strerror(errno));
  }
  struct stat st {};
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    fail(CXLT_ERROR_IO, "score store ", path, " is not a regular file");
  }
  // A failed read leaves the buffer short, which is refused below as a short read.
  // The header first: a foreign or mis-sized file is refused before its bulk is read.
  const uint64_t size = static_cast<uint64_t>(st.st_size);
  const size_t head = static_cast<size_t>(std::min<uint64_t>(size, kHeader));
  std::string buf;
  (void)read_upto(fd, buf, head);
  const bool whole_head = buf.size() == head;
  if (whole_head && (size < kHeader || std::memcmp(buf.data(), kMagic, 8) != 0)) {
    ::close(fd);
    parse_checkpoint(buf, path);  // throws: bad magic or truncated header
  }
  if (whole_head && get<uint32_t>(buf.data() + 60) == XXH32(buf.data(), 60, 0)) {
    const uint64_t count = get<uint64_t>(buf.data() + 16);
    if (count <= (1ull << 32) && size != expected_size(count)) {
      ::close(fd);
      fail(CXLT_ERROR_CORRUPT, "score store ", path, ": size ", size, " bytes, expected ", expected_size(count), " for ",
           count, " states (truncated or padded)");
    }
  }
  if (whole_head) (void)read_upto(fd, buf, static_cast<size_t>(size));
  ::close(fd);
  remove_stale_temps(path);
  if (buf.size() != (whole_head ? static_cast<size_t>(size) : head))
    fail(CXLT_ERROR_CORRUPT, "score store ", path, ": short read");
  return parse_checkpoint(buf, path);
}

LoadedCheckpoint ScoreStore::parse_checkpoint(std::string_view buf, const std::string &path) {
  auto corrupt = [&](const std::string &why) -> void { fail(CXLT_ERROR_CORRUPT, "score store ", path, ": ", why); };
  if (buf.size() < 8 || std::memcmp(buf.data(), kMagic, 8) != 0) corrupt("not a cxltier score store (bad magic)");
  if (buf.size() < kHeader) corrupt("truncated header");
  uint32_t version = get<uint32_t>(buf.data() + 8);
  if (version > kVersion) corrupt("format version " + std::to_string(version) + " is newer than this library's (" +
                                  std::to_string(kVersion) + ")");
  if (version != kVersion) corrupt("unknown format version " + std::to_string(version));
  if (get<uint32_t>(buf.data() + 60) != XXH32(buf.data(), 60, 0)) corrupt("header checksum mismatch");
  if (get<uint32_t>(buf.data() + 12) != kHeader) corrupt("unexpected header size");
  uint64_t count = get<uint64_t>(buf.data() + 16);
  if (count > (1ull << 32)) corrupt("implausible state count " + std::to_string(count));
  if (buf.size() != expected_size(count))
    corrupt("size " + std::to_string(buf.size()) + " bytes, expected " + std::to_string(expected_size(count)) +
            " for " + std::to_string(count) + " states (truncated or padded)");
  const char *footer = buf.data() + buf.size() - kFooter;
  if (std::memcmp(footer, kEndMagic, 8) != 0) corrupt("footer missing");
  if (get<uint64_t>(footer + 8) != count) corrupt("footer count disagrees with header");
  if (get<uint64_t>(footer + 16) != XXH3_64bits(buf.data(), buf.size() - kFooter)) corrupt("file checksum mismatch");
  if (get<uint64_t>(footer + 24) != 0) corrupt("footer's reserved word is not 0");

  LoadedCheckpoint cp;
  cp.meta.current_step = get<uint64_t>(buf.data() + 24);
  cp.meta.current_tick = get<uint64_t>(buf.data() + 32);
  // A clock this far on would wrap (the step) or stop every later checkpoint (the tick, which
  // only ever grows): 2^62 steps is 146,000 years at a million steps a second.
  if (cp.meta.current_step > kMaxClock) corrupt("step " + std::to_string(cp.meta.current_step) + " is past 2^62");
  if (cp.meta.current_tick > kMaxClock) corrupt("tick " + std::to_string(cp.meta.current_tick) + " is past 2^62");
  cp.meta.alpha = get<double>(buf.data() + 40);
  cp.meta.beta = get<double>(buf.data() + 48);
  uint32_t flags = get<uint32_t>(buf.data() + 56);
  if (flags > 1) corrupt("unknown flags");
  cp.meta.mode = (flags & 1) ? ScoreMode::decay : ScoreMode::touch;
  cp.states.reserve(count);
  std::unordered_set<Key, KeyHash> seen;
  seen.reserve(count);
  const char *p = buf.data() + kHeader;
  for (uint64_t done = 0; done < count;) {
    uint64_t n = std::min<uint64_t>(kChunk, count - done);
    const char *chunk = p;
    if (get<uint64_t>(chunk + n * kRecord) != XXH3_64bits(chunk, n * kRecord))
      corrupt("checksum mismatch in states " + std::to_string(done) + ".." + std::to_string(done + n - 1));
    for (uint64_t i = 0; i < n; ++i, p += kRecord) {
      Key k{get<uint64_t>(p), get<uint64_t>(p + 8)};
      PolicyState s;
      s.score = get<double>(p + 16);
      s.last_access = get<uint64_t>(p + 24);
      s.accesses = get<uint64_t>(p + 32);
      s.tick = get<uint64_t>(p + 40);
      if (!(s.score >= 0.0 && s.score <= 1.0)) corrupt("state " + std::to_string(done + i) + " has score out of [0, 1]");
      if (!seen.insert(k).second) corrupt("key " + k.hex() + " appears twice");
      cp.states.emplace_back(k, s);
    }
    p += 8;
    done += n;
  }
  return cp;
}

void ScoreStore::replace_with(const LoadedCheckpoint &cp) {
  if (opt_.capacity && cp.states.size() > opt_.capacity)
    fail(CXLT_ERROR_CONFIG, "score store checkpoint holds ", cp.states.size(), " states, more than store.capacity = ",
         opt_.capacity);
  for (NodeId id = 0; id < entries_.size(); ++id)
    if (in_use_[id] && entries_[id].res.tier >= 0)
      fail(CXLT_ERROR_INVALID_ARGUMENT, "score store: cannot load a checkpoint while blocks are resident");
  // Build the new content first (may throw bad_alloc), then swap: all or nothing.
  ScoreStore fresh(opt_);
  for (const auto &[k, s] : cp.states) {
    NodeId id = fresh.insert(k, nullptr);
    fresh.entries_[id].st = s;
    fresh.restate(id);  // its place in the forget order, by the state it now has
  }
  // Keep generations increasing across the swap so that old handles stay invalid: those of the
  // ids the fresh store holds, and of the ids past its end, which it issues later from the floor.
  uint32_t gen_base = gen_floor_;
  for (const StoreEntry &e : entries_) gen_base = std::max(gen_base, e.res.generation());
  for (StoreEntry &e : fresh.entries_) e.res.set_generation(e.res.generation() + gen_base + 1);
  fresh.gen_floor_ = gen_base + 1;
  auto moved = std::move(moved_);
  *this = std::move(fresh);
  moved_ = std::move(moved);
  if (moved_) moved_(entries_.data());
}

}  // namespace cxltier
