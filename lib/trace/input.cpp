// SPDX-License-Identifier: Apache-2.0
// Byte sources (file, memory), a streaming gzip decoder over either, and the line splitter.
#include "lib/trace/input.hpp"

#include <cxltier/error.hpp>

#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace cxltier::trace::detail {

namespace {

constexpr size_t kChunk = 1 << 20;        // bytes asked of a source per read
constexpr size_t kMinFree = 64 << 10;     // a read never asks for less than this

class FileInput final : public Input {
public:
  explicit FileInput(const std::string &path) {
    name_ = path;
    // O_NONBLOCK: opening a FIFO must not wait for a writer before we can refuse it.
    fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd_ < 0) fail(CXLT_ERROR_IO, "cannot open trace ", path, ": ", std::strerror(errno));
    struct stat st;
    int st_rc = ::fstat(fd_, &st);
    if (st_rc != 0 || !S_ISREG(st.st_mode)) {
      int e = st_rc != 0 ? errno : 0;
      bool dir = st_rc == 0 && S_ISDIR(st.st_mode);
      ::close(fd_);
      fd_ = -1;
      if (dir) fail(CXLT_ERROR_IO, "cannot read trace ", path, ": it is a directory");
      fail(CXLT_ERROR_IO, "cannot read trace ", path, ": ",
           e ? std::strerror(e) : "not a regular file (pipes and devices cannot be rewound; write the trace to a file)");
    }
    (void)::fcntl(fd_, F_SETFL, O_RDONLY);
    size_ = static_cast<uint64_t>(st.st_size);
    (void)::posix_fadvise(fd_, 0, 0, POSIX_FADV_SEQUENTIAL);
  }
  ~FileInput() override {
    if (fd_ >= 0) ::close(fd_);
  }
  FileInput(const FileInput &) = delete;
  FileInput &operator=(const FileInput &) = delete;

  size_t read(char *buf, size_t n) override {
    for (;;) {
      ssize_t got = ::read(fd_, buf, n);
      if (got >= 0) return static_cast<size_t>(got);
      if (errno == EINTR) continue;
      fail(CXLT_ERROR_IO, "cannot read trace ", name_, ": ", std::strerror(errno));
    }
  }
  void rewind() override {
    if (::lseek(fd_, 0, SEEK_SET) != 0)
      fail(CXLT_ERROR_IO, "cannot rewind trace ", name_, " (", std::strerror(errno),
           "): traces must be regular files, not pipes");
  }
  // The first bytes, without moving the read position.
  size_t peek(unsigned char *buf, size_t n) {
    ssize_t got = ::pread(fd_, buf, n, 0);
    if (got < 0) fail(CXLT_ERROR_IO, "cannot read trace ", name_, ": ", std::strerror(errno));
    return static_cast<size_t>(got);
  }

  uint64_t size_hint() const noexcept override { return size_; }

private:
  int fd_ = -1;
  uint64_t size_ = UINT64_MAX;
};

class MemoryInput final : public Input {
public:
  MemoryInput(std::string data, std::string name) : data_(std::move(data)) { name_ = std::move(name); }
  size_t read(char *buf, size_t n) override {
    size_t k = std::min(n, data_.size() - pos_);
    std::memcpy(buf, data_.data() + pos_, k);
    pos_ += k;
    return k;
  }
  void rewind() override { pos_ = 0; }
  uint64_t size_hint() const noexcept override { return data_.size(); }

private:
  std::string data_;
  size_t pos_ = 0;
};

// Gzip (RFC 1952) decoded with inflate as bytes are asked for. Several members in a row are
// one stream (as gzip -d treats them). A truncated stream, a bad CRC or bytes after the last
// member that are not another member end the input with damage() set.
class GzipInput final : public Input {
public:
  explicit GzipInput(std::unique_ptr<Input> raw) : raw_(std::move(raw)), in_(256 << 10) {
    name_ = raw_->name();
    std::memset(&z_, 0, sizeof z_);
    if (inflateInit2(&z_, 16 + MAX_WBITS) != Z_OK) fail(CXLT_ERROR_OUT_OF_HOST_MEMORY, "zlib: cannot start inflate for ", name_);
  }
  ~GzipInput() override { inflateEnd(&z_); }
  GzipInput(const GzipInput &) = delete;
  GzipInput &operator=(const GzipInput &) = delete;

  size_t read(char *buf, size_t n) override {
    if (done_ || n == 0) return 0;
    n = std::min<size_t>(n, UINT_MAX);
    z_.next_out = reinterpret_cast<Bytef *>(buf);
    z_.avail_out = static_cast<uInt>(n);
    while (z_.avail_out == n) {
      if (z_.avail_in == 0) {
        size_t got = raw_->read(in_.data(), in_.size());
        if (got == 0) {
          if (in_member_) damage_ = "gzip stream truncated (unexpected end of the compressed data)";
          done_ = true;
          break;
        }
        z_.next_in = reinterpret_cast<Bytef *>(in_.data());
        z_.avail_in = static_cast<uInt>(got);
      }
      if (!in_member_) {
        if (z_.next_in[0] != 0x1f) {
          damage_ = "data after the end of the gzip stream is not gzip (trailing garbage)";
          done_ = true;
          break;
        }
        inflateReset(&z_);
        in_member_ = true;
      }
      int rc = inflate(&z_, Z_NO_FLUSH);
      if (rc == Z_STREAM_END) {
        in_member_ = false;
      } else if (rc != Z_OK && rc != Z_BUF_ERROR) {
        damage_ = std::string("gzip data damaged: ") + (z_.msg ? z_.msg : zError(rc));
        done_ = true;
        break;
      }
    }
    return n - z_.avail_out;
  }
  void rewind() override {
    raw_->rewind();
    inflateReset(&z_);
    z_.avail_in = 0;
    in_member_ = false;
    done_ = false;
    damage_.clear();
  }

private:
  std::unique_ptr<Input> raw_;
  std::vector<char> in_;
  z_stream z_;
  bool in_member_ = false;
  bool done_ = false;
};

bool gzip_magic(const unsigned char *b, size_t n) { return n >= 2 && b[0] == 0x1f && b[1] == 0x8b; }

}  // namespace

std::unique_ptr<Input> open_file(const std::string &path, bool &compressed) {
  auto file = std::make_unique<FileInput>(path);
  unsigned char magic[2];
  compressed = gzip_magic(magic, file->peek(magic, 2));
  if (compressed) return std::make_unique<GzipInput>(std::move(file));
  return file;
}

std::unique_ptr<Input> open_memory(std::string data, std::string name, bool &compressed) {
  compressed = gzip_magic(reinterpret_cast<const unsigned char *>(data.data()), data.size());
  auto mem = std::make_unique<MemoryInput>(std::move(data), std::move(name));
  if (compressed) return std::make_unique<GzipInput>(std::move(mem));
  return mem;
}

// Small inputs (fixtures, fuzzing, one-line strings) get a buffer of their size, not 1 MiB.
LineReader::LineReader(std::unique_ptr<Input> input, uint64_t max_line_bytes)
    : input_(std::move(input)),
      max_line_(std::max<uint64_t>(max_line_bytes, 1)),
      buf_(static_cast<size_t>(std::clamp<uint64_t>(input_->size_hint(), 64, kChunk - 1) + 1)),
      // A buffer that holds the whole input never needs to grow: any room is enough to read on.
      min_free_(input_->size_hint() < kChunk ? 1 : kMinFree) {}

void LineReader::rewind() {
  input_->rewind();
  pos_ = len_ = scanned_ = 0;
  line_ = bytes_ = 0;
  eof_ = damage_reported_ = false;
}

bool LineReader::fill() {
  if (eof_) return false;
  if (buf_.size() - len_ < min_free_) {
    if (pos_ > 0) {
      std::memmove(buf_.data(), buf_.data() + pos_, len_ - pos_);
      len_ -= pos_;
      pos_ = 0;
    }
    if (buf_.size() - len_ < min_free_) {
      buf_.resize(std::max(buf_.size() * 2, len_ + kChunk));
      min_free_ = kMinFree;
    }
  }
  size_t got = input_->read(buf_.data() + len_, std::min(buf_.size() - len_, kChunk * 4));
  if (got == 0) {
    eof_ = true;
    return false;
  }
  len_ += got;
  bytes_ += got;
  return true;
}

LineReader::Kind LineReader::next(std::string_view &line, uint64_t &number) {
  for (;;) {
    char *start = buf_.data() + pos_;
    size_t avail = len_ - pos_;
    if (scanned_ < avail) {
      auto *nl = static_cast<char *>(std::memchr(start + scanned_, '\n', avail - scanned_));
      if (nl) {
        size_t n = static_cast<size_t>(nl - start);
        line = std::string_view(start, n);
        pos_ += n + 1;
        scanned_ = 0;
        number = ++line_;
        return n > max_line_ ? Kind::too_long : Kind::line;
      }
      scanned_ = avail;
    }
    if (eof_) {
      if (!input_->damage().empty()) {
        if (damage_reported_) return Kind::end;
        damage_reported_ = true;
        pos_ = len_;  // the partial line cannot be trusted
        scanned_ = 0;
        number = ++line_;
        return Kind::damaged;
      }
      if (pos_ < len_) {
        line = std::string_view(start, avail);
        pos_ = len_;
        scanned_ = 0;
        number = ++line_;
        return avail > max_line_ ? Kind::too_long : Kind::unterminated;
      }
      return Kind::end;
    }
    if (scanned_ > max_line_) {
      // Drop the line: discard what we hold and read on to its end.
      pos_ = len_ = scanned_ = 0;
      for (;;) {
        if (!fill()) break;
        auto *nl = static_cast<char *>(std::memchr(buf_.data(), '\n', len_));
        if (nl) {
          pos_ = static_cast<size_t>(nl - buf_.data()) + 1;
          break;
        }
        pos_ = len_ = 0;
      }
      number = ++line_;
      return Kind::too_long;
    }
    fill();
  }
}

}  // namespace cxltier::trace::detail
