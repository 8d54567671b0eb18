// SPDX-License-Identifier: Apache-2.0
// The identity-keyed score store: open-addressing index, stable entry ids, the forget order,
// and checkpoints.
//
// Forget order (when a bounded store is full): among states whose block is resident nowhere,
// forget first the one that can least change a future decision:
//   lrfu (touch mode): the lowest score (restoring it differs least from a fresh state);
//   lrfu (decay mode): the lowest current score (score x (1-alpha)^idle steps, compared in the
//                      log domain so that the order never changes as the clock advances);
//   lfu: the fewest accesses;
//   lru, fifo, arc, opt: the oldest last access;
// then the older last access, then the smaller key. Exact (a heap over non-resident states),
// not sampled.
#include "policy/score_store.hpp"

#include "core/assert.hpp"

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

namespace {
size_t next_pow2(size_t v) {
  size_t p = 16;
  while (p < v) p <<= 1;
  return p;
}
}  // namespace

ScoreStore::ScoreStore(const StoreOptions &opt) : opt_(opt) {
  size_t initial = opt_.capacity ? static_cast<size_t>(opt_.capacity) : 1024;
  if (opt_.capacity > (1ull << 31)) fail(CXLT_ERROR_CONFIG, "store.capacity = ", opt_.capacity, " is larger than 2^31 states");
  entries_.reserve(initial);
  in_use_.reserve(initial);
  rehash(next_pow2(initial * 2));
}

void ScoreStore::rehash(size_t table_size) {
  table_.assign(table_size, Slot{kNoNode, 0});
  mask_ = table_size - 1;
  for (NodeId id = 0; id < entries_.size(); ++id)
    if (in_use_[id]) index_insert(id);
}

void ScoreStore::index_insert(NodeId id) noexcept {
  const Key &k = entries_[id].key;
  size_t i = home(k);
  while (table_[i].id != kNoNode) i = (i + 1) & mask_;
  table_[i] = Slot{id, tag(k)};
}

void ScoreStore::index_erase(NodeId id) noexcept {
  size_t i = home(entries_[id].key);
  while (table_[i].id != id) {
    cxlt_assert(table_[i].id != kNoNode);
    i = (i + 1) & mask_;
  }
  // Backward-shift deletion keeps linear probing tombstone-free.
  size_t j = i;
  while (true) {
    j = (j + 1) & mask_;
    if (table_[j].id == kNoNode) break;
    size_t h = home(entries_[table_[j].id].key);
    // Move j back to i unless its home lies cyclically in (i, j].
    bool in_between = (i <= j) ? (i < h && h <= j) : (i < h || h <= j);
    if (!in_between) {
      table_[i] = table_[j];
      i = j;
    }
  }
  table_[i] = Slot{kNoNode, 0};
}

ScoreStore::ForgetKey ScoreStore::forget_key(const StoreEntry &e) const noexcept {
  double v = 0;
  switch (opt_.forget_by) {
    case PolicyKind::lrfu:
      if (opt_.lrfu.mode == ScoreMode::decay) {
        // score * (1-alpha)^(now - t) orders like log(score) - t * log(1-alpha), for any now.
        v = e.st.score > 0 ? std::log(e.st.score) - static_cast<double>(e.st.last_access) * std::log1p(-opt_.lrfu.alpha)
                           : -std::numeric_limits<double>::infinity();
        if (opt_.lrfu.alpha >= 1.0) v = e.st.score > 0 ? static_cast<double>(e.st.last_access) : -std::numeric_limits<double>::infinity();
      } else {
        v = e.st.score;
      }
      break;
    case PolicyKind::lfu: v = static_cast<double>(e.st.accesses); break;
    default: v = static_cast<double>(e.st.tick); break;
  }
  return ForgetKey{v, e.st.last_access, e.key};
}

void ScoreStore::fheap_sift_up(size_t i) noexcept {
  NodeId id = fheap_[i];
  while (i > 0) {
    size_t p = (i - 1) / 2;
    if (!(fkey_[id] < fkey_[fheap_[p]])) break;
    fheap_[i] = fheap_[p];
    fpos_[fheap_[i]] = static_cast<uint32_t>(i);
    i = p;
  }
  fheap_[i] = id;
  fpos_[id] = static_cast<uint32_t>(i);
}

void ScoreStore::fheap_sift_down(size_t i) noexcept {
  NodeId id = fheap_[i];
  const size_t n = fheap_.size();
  while (true) {
    size_t c = 2 * i + 1;
    if (c >= n) break;
    if (c + 1 < n && fkey_[fheap_[c + 1]] < fkey_[fheap_[c]]) ++c;
    if (!(fkey_[fheap_[c]] < fkey_[id])) break;
    fheap_[i] = fheap_[c];
    fpos_[fheap_[i]] = static_cast<uint32_t>(i);
    i = c;
  }
  fheap_[i] = id;
  fpos_[id] = static_cast<uint32_t>(i);
}

void ScoreStore::fheap_push(NodeId id) noexcept {
  if (opt_.capacity == 0) return;  // unbounded: nothing is ever forgotten
  fkey_[id] = forget_key(entries_[id]);
  fheap_.push_back(id);
  fheap_sift_up(fheap_.size() - 1);
}

void ScoreStore::fheap_remove(NodeId id) noexcept {
  if (opt_.capacity == 0) return;
  size_t i = fpos_[id];
  cxlt_assert(i < fheap_.size() && fheap_[i] == id);
  NodeId last = fheap_.back();
  fheap_.pop_back();
  if (last == id) return;
  fheap_[i] = last;
  fpos_[last] = static_cast<uint32_t>(i);
  fheap_sift_down(i);
  fheap_sift_up(fpos_[last]);
}

void ScoreStore::set_resident(NodeId id, bool resident) noexcept {
  StoreEntry &e = entries_[id];
  const bool was = e.tier >= 0;
  (void)was;
  // The caller sets e.tier; we only track membership in the forget heap.
  if (resident) {
    if (opt_.capacity && fpos_[id] != 0xffffffffu) {
      fheap_remove(id);
      fpos_[id] = 0xffffffffu;
    }
  } else {
    if (opt_.capacity && fpos_[id] == 0xffffffffu) fheap_push(id);
  }
}

NodeId ScoreStore::allocate_id() {
  if (!free_ids_.empty()) {
    NodeId id = free_ids_.back();
    free_ids_.pop_back();
    return id;
  }
  if (entries_.size() >= 0xfffffff0u) fail(CXLT_ERROR_OUT_OF_HOST_MEMORY, "score store: more than 2^32 states");
  entries_.emplace_back();
  in_use_.push_back(0);
  if (opt_.capacity) {
    fkey_.emplace_back();
    fpos_.push_back(0xffffffffu);
  }
  return static_cast<NodeId>(entries_.size() - 1);
}

NodeId ScoreStore::insert(const Key &key, NodeId *forgotten) {
  if (forgotten) *forgotten = kNoNode;
  cxlt_assert_internal(find(key) == kNoNode);
  NodeId id;
  if (opt_.capacity && size_ >= opt_.capacity) {
    if (fheap_.empty())
      fail(CXLT_ERROR_OUT_OF_HOST_MEMORY, "score store is full (", opt_.capacity,
           " states) and every state belongs to a resident block; raise store.capacity");
    id = fheap_.front();
    fheap_remove(id);
    fpos_[id] = 0xffffffffu;
    index_erase(id);
    ++forgotten_total_;
    if (forgotten) *forgotten = id;
    uint32_t gen = entries_[id].generation + 1;
    entries_[id] = StoreEntry{};
    entries_[id].generation = gen;
  } else {
    if (!opt_.capacity && (size_ + 1) * 2 > table_.size()) rehash(table_.size() * 2);
    id = allocate_id();
    uint32_t gen = entries_[id].generation + 1;
    entries_[id] = StoreEntry{};
    entries_[id].generation = gen;
    in_use_[id] = 1;
    ++size_;
  }
  entries_[id].key = key;
  index_insert(id);
  // A fresh state is non-resident until the runtime places it.
  if (opt_.capacity) fheap_push(id);
  return id;
}

void ScoreStore::erase(NodeId id) noexcept {
  cxlt_assert(valid(id) && entries_[id].tier < 0);
  if (opt_.capacity && fpos_[id] != 0xffffffffu) {
    fheap_remove(id);
    fpos_[id] = 0xffffffffu;
  }
  index_erase(id);
  in_use_[id] = 0;
  ++entries_[id].generation;
  free_ids_.push_back(id);
  --size_;
}

std::string ScoreStore::validate(uint8_t resident_flags) const {
  std::ostringstream err;
  size_t n = 0, nonres = 0;
  for (NodeId id = 0; id < entries_.size(); ++id) {
    if (!in_use_[id]) continue;
    ++n;
    if (find(entries_[id].key) != id) err << "id " << id << " not found by its key; ";
    const bool resident = entries_[id].tier >= 0 || (entries_[id].flags & resident_flags) != 0;
    if (!resident) ++nonres;
    if (opt_.capacity) {
      bool in_heap = fpos_[id] != 0xffffffffu;
      if (in_heap == resident) err << "id " << id << " forget-heap membership wrong; ";
    }
  }
  if (n != size_) err << "size " << size_ << " but " << n << " in use; ";
  if (opt_.capacity) {
    if (fheap_.size() != nonres) err << "forget heap holds " << fheap_.size() << ", non-resident " << nonres << "; ";
    for (size_t i = 1; i < fheap_.size(); ++i)
      if (fkey_[fheap_[i]] < fkey_[fheap_[(i - 1) / 2]]) err << "forget heap order violated at " << i << "; ";
    if (size_ > opt_.capacity) err << "over capacity; ";
  }
  size_t slots = 0;
  for (const Slot &s : table_)
    if (s.id != kNoNode) ++slots;
  if (slots != size_) err << "index holds " << slots << " ids for " << size_ << " states; ";
  return err.str();
}

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
  auto read_at = [&](std::string &buf, size_t from) {
    size_t got = from;
    while (got < buf.size()) {
      ssize_t r = ::read(fd, buf.data() + got, buf.size() - got);
      if (r < 0 && errno == EINTR) continue;
      if (r <= 0) break;
      got += static_cast<size_t>(r);
    }
    return got;
  };
  // The header first: a foreign or mis-sized file is refused before its bulk is read.
  const uint64_t size = static_cast<uint64_t>(st.st_size);
  std::string buf(static_cast<size_t>(std::min<uint64_t>(size, kHeader)), '\0');
  size_t got = read_at(buf, 0);
  if (got == buf.size() && (size < kHeader || std::memcmp(buf.data(), kMagic, 8) != 0)) {
    ::close(fd);
    parse_checkpoint(buf, path);  // throws: bad magic or truncated header
  }
  if (got == buf.size() && get<uint32_t>(buf.data() + 60) == XXH32(buf.data(), 60, 0)) {
    const uint64_t count = get<uint64_t>(buf.data() + 16);
    if (count <= (1ull << 32) && size != expected_size(count)) {
      ::close(fd);
      fail(CXLT_ERROR_CORRUPT, "score store ", path, ": size ", size, " bytes, expected ", expected_size(count), " for ",
           count, " states (truncated or padded)");
    }
  }
  if (got == buf.size()) {
    buf.resize(static_cast<size_t>(size));
    got = read_at(buf, got);
  }
  ::close(fd);
  remove_stale_temps(path);
  if (got != buf.size()) fail(CXLT_ERROR_CORRUPT, "score store ", path, ": short read");
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
    if (in_use_[id] && entries_[id].tier >= 0)
      fail(CXLT_ERROR_INVALID_ARGUMENT, "score store: cannot load a checkpoint while blocks are resident");
  // Build the new content first (may throw bad_alloc), then swap: all or nothing.
  ScoreStore fresh(opt_);
  for (const auto &[k, s] : cp.states) {
    NodeId id = fresh.insert(k, nullptr);
    fresh.entries_[id].st = s;
    if (fresh.opt_.capacity) {  // re-key the fresh state's place in the forget order
      fresh.fheap_remove(id);
      fresh.fheap_push(id);
    }
  }
  // Keep generations increasing across the swap so that old handles stay invalid.
  uint32_t gen_base = 0;
  for (const StoreEntry &e : entries_) gen_base = std::max(gen_base, e.generation);
  for (StoreEntry &e : fresh.entries_) e.generation += gen_base + 1;
  *this = std::move(fresh);
}

}  // namespace cxltier
