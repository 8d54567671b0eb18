// SPDX-License-Identifier: Apache-2.0
// Byte sources for the trace readers (a file or memory, optionally gzip, decoded with zlib's
// inflate as it streams) and the line splitter on top of them. Memory is one read buffer that
// grows only to the longest line seen, capped by the caller's line limit.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace cxltier::trace::detail {

// Raw or decoded bytes in order. read() returns 0 at the end; damage() then says whether the
// end was clean ("" ) or a damaged/truncated compressed stream (the reason). I/O errors throw
// Error(CXLT_ERROR_IO) naming the source.
class Input {
public:
  virtual ~Input() = default;
  virtual size_t read(char *buf, size_t n) = 0;
  virtual void rewind() = 0;
  // The bytes read() will deliver, when known (sizes the first buffer); UINT64_MAX if not.
  virtual uint64_t size_hint() const noexcept { return UINT64_MAX; }
  const std::string &damage() const noexcept { return damage_; }
  const std::string &name() const noexcept { return name_; }

protected:
  std::string name_;
  std::string damage_;
};

// Opens a file (gzip when it starts with the gzip magic bytes 1f 8b). Throws CXLT_ERROR_IO.
std::unique_ptr<Input> open_file(const std::string &path, bool &compressed);
// Reads from memory (gzip detected the same way).
std::unique_ptr<Input> open_memory(std::string data, std::string name, bool &compressed);

// Splits an Input into lines (without the '\n').
class LineReader {
public:
  enum class Kind {
    line,         // a complete line
    unterminated, // the last line, at a clean end of input without a final '\n'
    too_long,     // a line longer than the limit: skipped (its number is reported)
    damaged,      // the compressed stream ended damaged; the partial line is dropped
    end,
  };

  LineReader(std::unique_ptr<Input> input, uint64_t max_line_bytes);
  // The next line; `number` is its 1-based line number. The view is valid until the next call.
  Kind next(std::string_view &line, uint64_t &number);
  void rewind();
  uint64_t bytes() const noexcept { return bytes_; }
  const Input &input() const noexcept { return *input_; }

private:
  bool fill();  // reads more at the end of the buffer; false at the end of input

  std::unique_ptr<Input> input_;
  uint64_t max_line_;
  std::vector<char> buf_;
  size_t pos_ = 0;     // start of unconsumed bytes
  size_t len_ = 0;     // end of valid bytes
  size_t scanned_ = 0; // bytes from pos_ already known to hold no '\n'
  size_t min_free_;    // a read asks for at least this much room
  uint64_t line_ = 0;
  uint64_t bytes_ = 0;
  bool eof_ = false;
  bool damage_reported_ = false;
};

}  // namespace cxltier::trace::detail
