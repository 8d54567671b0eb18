// SPDX-License-Identifier: Apache-2.0
// Small ASCII text helpers (text.hpp).
#include "lib/core/text.hpp"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>

namespace cxltier::text {

bool iequal(std::string_view a, std::string_view b) noexcept {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    char x = a[i], y = b[i];
    if (x >= 'A' && x <= 'Z') x = static_cast<char>(x - 'A' + 'a');
    if (y >= 'A' && y <= 'Z') y = static_cast<char>(y - 'A' + 'a');
    if (x != y) return false;
  }
  return true;
}

std::string upper(std::string_view s) {
  std::string out(s);
  for (char &c : out)
    if (c >= 'a' && c <= 'z') c = static_cast<char>(c - 'a' + 'A');
  return out;
}

std::string_view trim(std::string_view s) noexcept {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

std::string lower(std::string_view s) {
  std::string out(s);
  for (char &c : out)
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  return out;
}

std::string shortest(double v) {
  char buf[40];
  for (int prec = 1; prec <= 17; ++prec) {
    std::snprintf(buf, sizeof buf, "%.*g", prec, v);
    if (std::strtod(buf, nullptr) == v) break;
  }
  return buf;
}

// Edit distance with adjacent transpositions counting one edit (optimal string alignment):
// "alpah" is one edit from "alpha", as a typist would count it.
size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<std::vector<size_t>> d(a.size() + 1, std::vector<size_t>(b.size() + 1));
  for (size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
  for (size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
  for (size_t i = 1; i <= a.size(); ++i)
    for (size_t j = 1; j <= b.size(); ++j) {
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1)});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
    }
  return d[a.size()][b.size()];
}

// The closest candidate when it is close enough to be a typo (at most 2 edits, and less than
// a third of the word), else "".
std::string closest(std::string_view word, const std::vector<std::string> &candidates) {
  std::string best;
  size_t best_d = SIZE_MAX;
  const std::string w = upper(word);
  for (const std::string &c : candidates) {
    // The distance is at least the length difference, and only 2 edits count as a typo: skip
    // the O(length^2) table for the others (a mistyped 4 KiB name used to cost seconds of
    // tables against every key; found by fuzz_config, docs/reliability.md).
    if (std::max(w.size(), c.size()) - std::min(w.size(), c.size()) > 2) continue;
    size_t d = edit_distance(w, upper(c));
    if (d < best_d) {
      best_d = d;
      best = c;
    }
  }
  if (best_d == 0 || best_d > 2 || best_d * 3 > std::max<size_t>(word.size(), 3)) return "";
  return best;
}

std::string did_you_mean(std::string_view word, const std::vector<std::string> &candidates) {
  std::string c = closest(word, candidates);
  return c.empty() ? std::string() : " (did you mean '" + c + "'?)";
}

}  // namespace cxltier::text
