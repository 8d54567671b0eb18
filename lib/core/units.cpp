// SPDX-License-Identifier: Apache-2.0
// Parsers for sizes, numbers and lists typed by users (CLI flags, config values, environment).
#include <cxltier/tools/units.hpp>
#include <cxltier/error.hpp>

#include "lib/core/text.hpp"

#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace cxltier {

namespace {

using text::iequal;
using text::trim;

[[noreturn]] void bad(std::string_view what, std::string_view text, const char *why) {
  fail(CXLT_ERROR_INVALID_ARGUMENT, what, ": '", text, "' ", why);
}

}  // namespace

uint64_t parse_u64(std::string_view text, std::string_view what) {
  std::string_view t = trim(text);
  if (t.empty()) bad(what, text, "is empty");
  if (t.front() == '-') bad(what, text, "must not be negative");
  if (t.front() == '+') t.remove_prefix(1);
  uint64_t v = 0;
  auto [p, ec] = std::from_chars(t.data(), t.data() + t.size(), v, 10);
  if (ec == std::errc::result_out_of_range) bad(what, text, "is too large");
  if (ec != std::errc() || p != t.data() + t.size()) bad(what, text, "is not a whole number");
  return v;
}

int64_t parse_i64(std::string_view text, std::string_view what) {
  std::string_view t = trim(text);
  if (t.empty()) bad(what, text, "is empty");
  if (t.front() == '+') t.remove_prefix(1);
  int64_t v = 0;
  auto [p, ec] = std::from_chars(t.data(), t.data() + t.size(), v, 10);
  if (ec == std::errc::result_out_of_range) bad(what, text, "is out of range");
  if (ec != std::errc() || p != t.data() + t.size()) bad(what, text, "is not a whole number");
  return v;
}

double parse_double(std::string_view text, std::string_view what) {
  std::string t(trim(text));
  if (t.empty()) bad(what, text, "is empty");
  // strtod accepts hex floats, "inf" and "nan"; we accept decimal numbers only.
  for (char c : t)
    if (!((c >= '0' && c <= '9') || c == '.' || c == 'e' || c == 'E' || c == '-' || c == '+'))
      bad(what, text, "is not a number");
  errno = 0;
  char *end = nullptr;
  double v = std::strtod(t.c_str(), &end);
  if (end != t.c_str() + t.size()) bad(what, text, "is not a number");
  if (errno == ERANGE || !std::isfinite(v)) bad(what, text, "is out of range");
  return v;
}

bool parse_bool(std::string_view text, std::string_view what) {
  std::string_view t = trim(text);
  for (const char *y : {"1", "true", "yes", "on"})
    if (iequal(t, y)) return true;
  for (const char *n : {"0", "false", "no", "off"})
    if (iequal(t, n)) return false;
  bad(what, text, "is not a boolean (1/true/yes/on or 0/false/no/off)");
}

uint64_t parse_size(std::string_view text, std::string_view what) {
  std::string_view t = trim(text);
  if (t.empty()) bad(what, text, "is empty");
  if (t.front() == '-') bad(what, text, "must not be negative");
  size_t i = 0;
  while (i < t.size() && ((t[i] >= '0' && t[i] <= '9') || t[i] == '.')) ++i;
  std::string_view num = t.substr(0, i);
  std::string_view suffix = trim(t.substr(i));
  if (num.empty()) bad(what, text, "does not start with a number");
  struct Unit { const char *name; double mult; };
  static constexpr Unit units[] = {
      {"", 1.0}, {"b", 1.0},
      {"k", 1024.0}, {"kib", 1024.0}, {"m", 1048576.0}, {"mib", 1048576.0},
      {"g", 1073741824.0}, {"gib", 1073741824.0}, {"t", 1099511627776.0}, {"tib", 1099511627776.0},
      {"kb", 1e3}, {"mb", 1e6}, {"gb", 1e9}, {"tb", 1e12},
  };
  double mult = -1;
  for (const Unit &u : units)
    if (iequal(suffix, u.name)) mult = u.mult;
  if (mult < 0) bad(what, text, "has an unknown unit (use B, KiB, MiB, GiB, TiB, or kB, MB, GB, TB)");
  if (num.find('.') == std::string_view::npos) {
    uint64_t whole = parse_u64(num, what);
    uint64_t m = static_cast<uint64_t>(mult), r = 0;
    if (__builtin_mul_overflow(whole, m, &r)) bad(what, text, "is too large");
    return r;
  }
  double v = parse_double(num, what) * mult;
  if (!(v < 18446744073709549568.0)) bad(what, text, "is too large");
  double whole = std::floor(v);
  if (v != whole) bad(what, text, "is not a whole number of bytes");
  return static_cast<uint64_t>(whole);
}

std::vector<std::string> split_list(std::string_view text, std::string_view what) {
  std::vector<std::string> out;
  std::string_view t = trim(text);
  if (t.empty()) bad(what, text, "is an empty list");
  size_t start = 0;
  while (true) {
    size_t comma = t.find(',', start);
    std::string_view item = trim(t.substr(start, comma == std::string_view::npos ? std::string_view::npos : comma - start));
    if (item.empty()) bad(what, text, "has an empty item");
    out.emplace_back(item);
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  return out;
}

std::vector<double> parse_double_list(std::string_view text, std::string_view what) {
  std::vector<double> out;
  for (const std::string &s : split_list(text, what)) out.push_back(parse_double(s, what));
  return out;
}

std::vector<uint64_t> parse_size_list(std::string_view text, std::string_view what) {
  std::vector<uint64_t> out;
  for (const std::string &s : split_list(text, what)) out.push_back(parse_size(s, what));
  return out;
}

std::string format_bytes(uint64_t bytes) {
  static constexpr const char *names[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  char buf[48];
  if (bytes < 1024) {
    std::snprintf(buf, sizeof buf, "%llu B", static_cast<unsigned long long>(bytes));
    return buf;
  }
  double v = static_cast<double>(bytes);
  int u = 0;
  while (v >= 1024.0 && u < 6) { v /= 1024.0; ++u; }
  std::snprintf(buf, sizeof buf, v >= 100 ? "%.0f %s" : (v >= 10 ? "%.1f %s" : "%.2f %s"), v, names[u]);
  return buf;
}

}  // namespace cxltier
