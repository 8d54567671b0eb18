// SPDX-License-Identifier: Apache-2.0
// A small, strict, streaming JSON scanner for one line of a trace. It validates the whole line
// against RFC 8259 (strings with escapes and UTF-8, numbers, nesting, commas) while extracting
// only the fields a trace reader asks for, so a request costs one pass over its bytes with no
// DOM. Every read is bounds-checked: any input, however damaged, gives a reason, never UB.
#pragma once

#include <bit>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

namespace cxltier::trace::detail {

class Scanner {
public:
  static constexpr int kMaxDepth = 128;

  Scanner(const char *begin, const char *end) noexcept : p_(begin), begin_(begin), end_(end) {}
  explicit Scanner(std::string_view s) noexcept : Scanner(s.data(), s.data() + s.size()) {}
  Scanner() noexcept : Scanner(nullptr, nullptr) {}
  // Starts over on another line; keeps the buffers, so a reader allocates nothing per line.
  void reset(std::string_view s) noexcept {
    p_ = begin_ = s.data();
    end_ = s.data() + s.size();
    error_.clear();
    error_at_ = nullptr;
    open_ = 0;
  }

  // --- Error state: the first failure wins; every method returns false once failed.
  bool ok() const noexcept { return error_.empty(); }
  const std::string &error() const noexcept { return error_; }
  size_t error_column() const noexcept { return static_cast<size_t>(error_at_ - begin_) + 1; }
  bool fail(std::string why) {
    if (error_.empty()) {
      error_ = std::move(why);
      error_at_ = p_;
    }
    return false;
  }
  // The reason with its 1-based byte column, as readers report it.
  std::string reason() const { return error_ + " (column " + std::to_string(error_column()) + ")"; }

  void ws() noexcept {
    while (p_ < end_ && (*p_ == ' ' || *p_ == '\t' || *p_ == '\n' || *p_ == '\r')) ++p_;
  }
  bool at(char c) noexcept {
    ws();
    return p_ < end_ && *p_ == c;
  }
  // Only whitespace left.
  bool finish() {
    ws();
    if (p_ != end_) return fail("unexpected data after the JSON object");
    return ok();
  }

  // --- Objects: begin_object(), then `while (next_key(key)) { ...value... }`, then check ok().
  bool begin_object() {
    ws();
    if (p_ >= end_ || *p_ != '{') return fail(p_ >= end_ ? "expected '{', found the end of the line" : "expected a JSON object");
    if (open_ >= kMaxDepth) return fail("nesting deeper than " + std::to_string(kMaxDepth));
    ++p_;
    first_[open_++] = true;
    return true;
  }
  // The next key of the innermost open object (unescaped into an internal buffer when it had
  // escapes); false at its '}' (consumed) or on an error.
  bool next_key(std::string_view &key) {
    if (!ok() || open_ == 0) return false;
    ws();
    if (p_ >= end_) return fail("unterminated object (missing '}')");
    if (first_[open_ - 1]) {
      first_[open_ - 1] = false;
      if (*p_ == '}') return close_object();
    } else {
      if (*p_ == '}') return close_object();
      if (*p_ != ',') return fail("expected ',' or '}' after an object member");
      ++p_;
      ws();
    }
    if (p_ >= end_) return fail("unterminated object (missing '}')");
    if (*p_ != '"') return fail("expected a quoted member name");
    std::string_view raw;
    bool escaped = false;
    if (!string(raw, escaped)) return false;
    if (escaped) {
      key_buf_.clear();
      if (!unescape(raw, key_buf_)) return false;
      key = key_buf_;
    } else {
      key = raw;
    }
    ws();
    if (p_ >= end_ || *p_ != ':') return fail("expected ':' after a member name");
    ++p_;
    ws();
    return true;
  }

  // --- Values. Each expects the scanner at the value (whitespace allowed before it).
  // Skips any JSON value, checking it.
  bool skip_value() { return skip(0); }

  // A string value, unescaped into `out`.
  bool string_value(std::string &out, std::string_view what) {
    ws();
    if (p_ >= end_ || *p_ != '"') return fail(std::string(what) + ": expected a string");
    std::string_view raw;
    bool escaped = false;
    if (!string(raw, escaped)) return false;
    out.clear();
    if (!escaped) {
      out.assign(raw);
      return true;
    }
    return unescape(raw, out);
  }

  bool null_value() {
    ws();
    if (end_ - p_ >= 4 && std::memcmp(p_, "null", 4) == 0) {
      p_ += 4;
      return true;
    }
    return false;
  }

  // A non-negative integer that fits 64 bits (no fraction, no exponent).
  bool u64_value(uint64_t &v, std::string_view what) {
    ws();
    return u64(v, what, nullptr);
  }
  // A signed integer that fits 64 bits.
  bool i64_value(int64_t &v, std::string_view what) {
    ws();
    const char *start = p_;
    bool neg = p_ < end_ && *p_ == '-';
    if (neg) ++p_;
    uint64_t mag = 0;
    if (!u64(mag, what, nullptr)) return false;
    if (!neg && mag > static_cast<uint64_t>(INT64_MAX)) return fail_at(start, std::string(what) + ": out of the 64-bit range");
    if (neg && mag > static_cast<uint64_t>(INT64_MAX) + 1) return fail_at(start, std::string(what) + ": out of the 64-bit range");
    v = neg ? static_cast<int64_t>(0 - mag) : static_cast<int64_t>(mag);
    return true;
  }
  // Any JSON number, as a double (finite).
  bool f64_value(double &v, std::string_view what) {
    ws();
    const char *start = p_;
    if (!number(what)) return false;
    auto r = std::from_chars(start, p_, v);
    if (r.ec != std::errc() || !std::isfinite(v)) return fail_at(start, std::string(what) + ": number out of range");
    return true;
  }
  // Any JSON number, as the nearest float (finite).
  bool f32_value(float &v, std::string_view what) {
    ws();
    const char *start = p_;
    if (!number(what)) return false;
    auto r = std::from_chars(start, p_, v);
    if (r.ec != std::errc() || !std::isfinite(v)) return fail_at(start, std::string(what) + ": number out of range for a float");
    return true;
  }

  // An array of non-negative 64-bit integers, appended to `out`. The hot loop of every reader:
  // a number of up to 19 digits is read here, eight bytes at a time where the line has eight
  // left (SWAR); anything else (20 digits, a sign, a fraction, a leading zero, an error) goes
  // through u64(), which decides and reports.
  bool u64_array(std::vector<uint64_t> &out, std::string_view what) {
    ws();
    if (p_ >= end_ || *p_ != '[') return fail(std::string(what) + ": expected an array");
    ++p_;
    ws();
    if (p_ < end_ && *p_ == ']') {
      ++p_;
      return true;
    }
    const char *p = p_;
    const char *const e = end_;
    size_t element = 0;
    for (;;) {
      const char *start = p;
      uint64_t x = 0;
      if (!fast_u64(p, e, x)) {
        p_ = start;
        if (!u64(x, what, &element)) return false;
        p = p_;
      }
      out.push_back(x);
      ++element;
      while (p < e && (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r')) ++p;
      if (p < e && *p == ',') {
        ++p;
        while (p < e && (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r')) ++p;
        continue;
      }
      p_ = p;
      if (p < e && *p == ']') {
        ++p_;
        return true;
      }
      return fail(std::string(what) + (p >= e ? ": unterminated array (missing ']')" : ": expected ',' or ']' in the array"));
    }
  }

  // An array of numbers as floats, appended to `out`.
  bool f32_array(std::vector<float> &out, std::string_view what) {
    ws();
    if (p_ >= end_ || *p_ != '[') return fail(std::string(what) + ": expected an array");
    ++p_;
    ws();
    if (p_ < end_ && *p_ == ']') {
      ++p_;
      return true;
    }
    for (;;) {
      float v;
      ws();
      if (!fast_f32(p_, end_, v) && !f32_value(v, what)) return false;
      out.push_back(v);
      ws();
      if (p_ < end_ && *p_ == ',') {
        ++p_;
        continue;
      }
      if (p_ < end_ && *p_ == ']') {
        ++p_;
        return true;
      }
      return fail(std::string(what) + (p_ >= end_ ? ": unterminated array (missing ']')" : ": expected ',' or ']' in the array"));
    }
  }

private:
  bool close_object() {
    ++p_;
    --open_;
    return false;
  }
  bool fail_at(const char *at, std::string why) {
    p_ = at;
    return fail(std::move(why));
  }
  static bool digit(char c) noexcept { return static_cast<unsigned char>(c - '0') < 10; }

  // --- SWAR digits (little-endian loads; on big-endian hosts the byte loop does the work).
  static uint64_t load8(const char *q) noexcept {
    uint64_t v;
    std::memcpy(&v, q, 8);
    return v;
  }
  // How many of the 8 bytes, from the first, are ASCII digits (0-8). A byte >= 0xFA carries
  // into the next one, which only disturbs bytes after a non-digit, which are not counted.
  static unsigned leading_digits(uint64_t v) noexcept {
    uint64_t hi = v & 0xF0F0F0F0F0F0F0F0ull;
    uint64_t hi6 = (v + 0x0606060606060606ull) & 0xF0F0F0F0F0F0F0F0ull;
    uint64_t non = (hi ^ 0x3030303030303030ull) | (hi6 ^ 0x3030303030303030ull);
    return non ? static_cast<unsigned>(__builtin_ctzll(non)) / 8 : 8;
  }
  // The value of the first n (1-8) digit bytes of v.
  static uint64_t digits_value(uint64_t v, unsigned n) noexcept {
    // Move the n digits to the high end and fill the low bytes with '0' (leading zeros).
    if (n < 8) v = (v << (8 * (8 - n))) | (0x3030303030303030ull >> (8 * n));
    v -= 0x3030303030303030ull;
    v = (v * 10) + (v >> 8);
    v = (((v & 0x000000FF000000FFull) * (100 + (1000000ull << 32))) +
         (((v >> 16) & 0x000000FF000000FFull) * (1 + (10000ull << 32)))) >> 32;
    return v;
  }
  // A plain non-negative integer of 1-19 digits at p, not followed by a digit, '.', 'e' or 'E'
  // and without a leading zero; on success p moves past it. false: leave it to u64().
  [[gnu::always_inline]] static bool fast_u64(const char *&p, const char *e, uint64_t &x) noexcept {
    static constexpr uint64_t kPow10[9] = {1, 10, 100, 1000, 10000, 100000, 1000000, 10000000, 100000000};
    const char *q = p;
    uint64_t v = 0;
    unsigned nd = 0;
    if constexpr (std::endian::native == std::endian::little) {
      while (e - q >= 8) {
        uint64_t chunk = load8(q);
        unsigned n = leading_digits(chunk);
        if (n == 0) break;
        if (nd + n > 19) return false;
        v = v * kPow10[n] + digits_value(chunk, n);
        nd += n;
        q += n;
        if (n < 8) break;
      }
    }
    unsigned d;
    while (q < e && (d = static_cast<unsigned char>(*q) - '0') < 10) {
      if (++nd > 19) return false;
      v = v * 10 + d;
      ++q;
    }
    if (nd == 0 || (nd > 1 && *p == '0')) return false;
    if (q < e && (*q == '.' || *q == 'e' || *q == 'E')) return false;
    x = v;
    p = q;
    return true;
  }

  // A JSON number at p as the nearest float, without from_chars in the common case: with at
  // most 19 significant digits w < 2^53 and a decimal exponent q in [-22, 0], w / 10^-q in
  // double is correctly rounded (both operands exact); rounding that double to float is then
  // correct unless it sits exactly on a midpoint between two floats (the only case where
  // rounding twice differs from rounding once), which is left to from_chars. Also left to it:
  // anything else, including every malformed number (so errors are reported in one place).
  [[gnu::always_inline]] static bool fast_f32(const char *&p, const char *e, float &out) noexcept {
    static constexpr double kPow10[23] = {1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,  1e8,  1e9,  1e10, 1e11,
                                          1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};
    const char *q = p;
    bool neg = q < e && *q == '-';
    if (neg) ++q;
    if (q >= e || !digit(*q)) return false;
    uint64_t w = 0;
    int nd = 0, frac = 0;
    if (*q == '0') {
      ++q;
      if (q < e && digit(*q)) return false;
    } else {
      while (q < e && digit(*q)) {
        if (++nd > 19) return false;
        w = w * 10 + static_cast<unsigned>(*q++ - '0');
      }
    }
    if (q < e && *q == '.') {
      ++q;
      if (q >= e || !digit(*q)) return false;
      while (q < e && digit(*q)) {
        if (w == 0 && *q == '0') {  // leading zeros of the fraction are not significant
          ++frac;
          ++q;
          continue;
        }
        if (++nd > 19) return false;
        w = w * 10 + static_cast<unsigned>(*q++ - '0');
        ++frac;
      }
    }
    int exp10 = 0;
    if (q < e && (*q == 'e' || *q == 'E')) {
      ++q;
      bool eneg = q < e && *q == '-';
      if (q < e && (*q == '+' || *q == '-')) ++q;
      if (q >= e || !digit(*q)) return false;
      while (q < e && digit(*q)) {
        if (exp10 > 1000) return false;
        exp10 = exp10 * 10 + (*q++ - '0');
      }
      if (eneg) exp10 = -exp10;
    }
    int k = exp10 - frac;
    if (w >= (uint64_t{1} << 53) || k > 0 || k < -22) return false;
    double d = static_cast<double>(w) / kPow10[-k];
    uint64_t bits;
    std::memcpy(&bits, &d, 8);
    if ((bits & ((uint64_t{1} << 29) - 1)) == (uint64_t{1} << 28)) return false;  // a float midpoint
    float f = static_cast<float>(d);
    out = neg ? -f : f;
    p = q;
    return true;
  }

  // Digits of a non-negative integer at p_. `element`, when set, names the array element.
  bool u64(uint64_t &v, std::string_view what, const size_t *element) {
    const char *start = p_;
    auto where = [&]() {
      std::string w(what);
      if (element) w += " element " + std::to_string(*element);
      return w;
    };
    if (p_ >= end_) return fail(where() + ": expected a number, found the end of the line");
    if (*p_ == '-') {
      if (!number(what)) return false;  // a malformed number is reported as such
      return fail_at(start, where() + ": negative value " + std::string(start, p_));
    }
    if (!digit(*p_)) return fail(where() + ": expected a non-negative integer");
    uint64_t x = static_cast<uint64_t>(*p_ - '0');
    ++p_;
    if (x == 0 && p_ < end_ && digit(*p_)) return fail(where() + ": number with a leading zero");
    int n = 1;
    // 19 digits always fit; the 20th needs an overflow check.
    while (p_ < end_ && digit(*p_)) {
      unsigned d = static_cast<unsigned>(*p_ - '0');
      if (n >= 19) {
        if (n >= 20 || __builtin_mul_overflow(x, 10u, &x) || __builtin_add_overflow(x, d, &x)) {
          while (p_ < end_ && digit(*p_)) ++p_;
          return fail_at(start, where() + ": " + std::string(start, p_) + " exceeds 2^64-1");
        }
      } else {
        x = x * 10 + d;
      }
      ++n;
      ++p_;
    }
    if (p_ < end_ && (*p_ == '.' || *p_ == 'e' || *p_ == 'E')) {
      p_ = start;
      if (!number(what)) return false;
      return fail_at(start, where() + ": " + std::string(start, p_) + " is not an integer");
    }
    v = x;
    return true;
  }

  // Any JSON number at p_ (grammar only).
  bool number(std::string_view what) {
    const char *start = p_;
    if (p_ < end_ && *p_ == '-') ++p_;
    if (p_ >= end_ || !digit(*p_)) return fail_at(start, std::string(what) + ": expected a number");
    if (*p_ == '0') {
      ++p_;
      if (p_ < end_ && digit(*p_)) return fail_at(start, std::string(what) + ": number with a leading zero");
    } else {
      while (p_ < end_ && digit(*p_)) ++p_;
    }
    if (p_ < end_ && *p_ == '.') {
      ++p_;
      if (p_ >= end_ || !digit(*p_)) return fail_at(start, std::string(what) + ": digits expected after '.'");
      while (p_ < end_ && digit(*p_)) ++p_;
    }
    if (p_ < end_ && (*p_ == 'e' || *p_ == 'E')) {
      ++p_;
      if (p_ < end_ && (*p_ == '+' || *p_ == '-')) ++p_;
      if (p_ >= end_ || !digit(*p_)) return fail_at(start, std::string(what) + ": digits expected in the exponent");
      while (p_ < end_ && digit(*p_)) ++p_;
    }
    return true;
  }

  static int hex(char c) noexcept {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  }
  // Four hex digits at q (q + 4 <= end_ checked by the caller).
  static int hex4(const char *q) noexcept {
    int v = 0;
    for (int i = 0; i < 4; ++i) {
      int h = hex(q[i]);
      if (h < 0) return -1;
      v = v * 16 + h;
    }
    return v;
  }

  // A string at p_ (at its opening quote). `raw` is the text between the quotes, still escaped.
  // Checks escapes (surrogates paired), control characters and UTF-8.
  bool string(std::string_view &raw, bool &escaped) {
    const char *start = ++p_;
    escaped = false;
    for (;;) {
      if (p_ >= end_) return fail_at(start - 1, "unterminated string");
      unsigned char c = static_cast<unsigned char>(*p_);
      if (c == '"') break;
      if (c < 0x20) return fail("control character in a string");
      if (c == '\\') {
        escaped = true;
        if (end_ - p_ < 2) return fail("unterminated escape in a string");
        char e = p_[1];
        if (e == 'u') {
          if (end_ - p_ < 6) return fail("truncated \\u escape");
          int u = hex4(p_ + 2);
          if (u < 0) return fail("bad \\u escape");
          p_ += 6;
          if (u >= 0xD800 && u <= 0xDBFF) {
            if (end_ - p_ < 6 || p_[0] != '\\' || p_[1] != 'u') return fail("unpaired surrogate in \\u escape");
            int lo = hex4(p_ + 2);
            if (lo < 0xDC00 || lo > 0xDFFF) return fail("unpaired surrogate in \\u escape");
            p_ += 6;
          } else if (u >= 0xDC00 && u <= 0xDFFF) {
            return fail("unpaired surrogate in \\u escape");
          }
          continue;
        }
        if (e != '"' && e != '\\' && e != '/' && e != 'b' && e != 'f' && e != 'n' && e != 'r' && e != 't')
          return fail("bad escape in a string");
        p_ += 2;
        continue;
      }
      if (c < 0x80) {
        ++p_;
        continue;
      }
      if (!utf8()) return false;
    }
    raw = std::string_view(start, static_cast<size_t>(p_ - start));
    ++p_;
    return true;
  }

  // One multi-byte UTF-8 sequence at p_ (RFC 3629: no overlongs, no surrogates, <= U+10FFFF).
  bool utf8() {
    const unsigned char *q = reinterpret_cast<const unsigned char *>(p_);
    size_t left = static_cast<size_t>(end_ - p_);
    unsigned char c = q[0];
    size_t n;
    unsigned char lo = 0x80, hi = 0xBF;
    if (c >= 0xC2 && c <= 0xDF) n = 2;
    else if (c == 0xE0) n = 3, lo = 0xA0;
    else if (c >= 0xE1 && c <= 0xEC) n = 3;
    else if (c == 0xED) n = 3, hi = 0x9F;
    else if (c >= 0xEE && c <= 0xEF) n = 3;
    else if (c == 0xF0) n = 4, lo = 0x90;
    else if (c >= 0xF1 && c <= 0xF3) n = 4;
    else if (c == 0xF4) n = 4, hi = 0x8F;
    else return fail("invalid UTF-8 in a string");
    if (left < n) return fail("invalid UTF-8 in a string");
    if (q[1] < lo || q[1] > hi) return fail("invalid UTF-8 in a string");
    for (size_t i = 2; i < n; ++i)
      if (q[i] < 0x80 || q[i] > 0xBF) return fail("invalid UTF-8 in a string");
    p_ += n;
    return true;
  }

  static void put_utf8(std::string &out, uint32_t cp) {
    if (cp < 0x80) {
      out.push_back(static_cast<char>(cp));
    } else if (cp < 0x800) {
      out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
      out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    } else if (cp < 0x10000) {
      out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
      out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
      out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    } else {
      out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
      out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
      out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
      out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    }
  }

  // Unescapes text that string() already validated.
  bool unescape(std::string_view raw, std::string &out) {
    for (size_t i = 0; i < raw.size(); ++i) {
      char c = raw[i];
      if (c != '\\') {
        out.push_back(c);
        continue;
      }
      char e = raw[++i];
      switch (e) {
        case 'b': out.push_back('\b'); break;
        case 'f': out.push_back('\f'); break;
        case 'n': out.push_back('\n'); break;
        case 'r': out.push_back('\r'); break;
        case 't': out.push_back('\t'); break;
        case 'u': {
          uint32_t u = static_cast<uint32_t>(hex4(raw.data() + i + 1));
          i += 4;
          if (u >= 0xD800 && u <= 0xDBFF) {
            uint32_t lo = static_cast<uint32_t>(hex4(raw.data() + i + 3));
            i += 6;
            u = 0x10000 + ((u - 0xD800) << 10) + (lo - 0xDC00);
          }
          put_utf8(out, u);
          break;
        }
        default: out.push_back(e);  // '"', '\\', '/'
      }
    }
    return true;
  }

  bool skip(int depth) {
    ws();
    if (p_ >= end_) return fail("expected a value, found the end of the line");
    if (depth >= kMaxDepth) return fail("nesting deeper than " + std::to_string(kMaxDepth));
    switch (*p_) {
      case '{': {
        ++p_;
        ws();
        if (p_ < end_ && *p_ == '}') {
          ++p_;
          return true;
        }
        for (;;) {
          ws();
          if (p_ >= end_ || *p_ != '"') return fail(p_ >= end_ ? "unterminated object (missing '}')" : "expected a quoted member name");
          std::string_view raw;
          bool escaped;
          if (!string(raw, escaped)) return false;
          ws();
          if (p_ >= end_ || *p_ != ':') return fail("expected ':' after a member name");
          ++p_;
          if (!skip(depth + 1)) return false;
          ws();
          if (p_ < end_ && *p_ == ',') {
            ++p_;
            continue;
          }
          if (p_ < end_ && *p_ == '}') {
            ++p_;
            return true;
          }
          return fail(p_ >= end_ ? "unterminated object (missing '}')" : "expected ',' or '}' after an object member");
        }
      }
      case '[': {
        ++p_;
        ws();
        if (p_ < end_ && *p_ == ']') {
          ++p_;
          return true;
        }
        for (;;) {
          if (!skip(depth + 1)) return false;
          ws();
          if (p_ < end_ && *p_ == ',') {
            ++p_;
            continue;
          }
          if (p_ < end_ && *p_ == ']') {
            ++p_;
            return true;
          }
          return fail(p_ >= end_ ? "unterminated array (missing ']')" : "expected ',' or ']' in an array");
        }
      }
      case '"': {
        std::string_view raw;
        bool escaped;
        return string(raw, escaped);
      }
      case 't': return literal("true");
      case 'f': return literal("false");
      case 'n': return literal("null");
      default:
        if (*p_ == '-' || digit(*p_)) return number("value");
        return fail("unexpected character in a JSON value");
    }
  }

  bool literal(const char *word) {
    size_t n = std::strlen(word);
    if (static_cast<size_t>(end_ - p_) < n || std::memcmp(p_, word, n) != 0) return fail("bad literal (expected true, false or null)");
    p_ += n;
    return true;
  }

  const char *p_;
  const char *begin_;
  const char *end_;
  const char *error_at_ = nullptr;
  std::string error_;
  std::string key_buf_;
  int open_ = 0;               // objects opened with begin_object and not closed yet
  bool first_[kMaxDepth] = {};  // per open object, whether no member was read yet
};

}  // namespace cxltier::trace::detail
