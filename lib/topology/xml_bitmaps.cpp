// SPDX-License-Identifier: Apache-2.0
// The bitmap attribute checks (xml_bitmaps.hpp): a small scanner over the XML's tags, which
// reads element names, attribute names and quoted values and nothing else.
#include "lib/topology/xml_bitmaps.hpp"

#include <algorithm>
#include <cstddef>

namespace cxltier::topo {
namespace {

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; }
bool is_hex(char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'); }

bool ends_with(std::string_view s, std::string_view tail) {
  return s.size() >= tail.size() && s.substr(s.size() - tail.size()) == tail;
}

// One comma-separated word: "0x" and 1 to 16 hexadecimal digits.
bool is_word(std::string_view w) {
  if (w.size() < 3 || w.size() > 18 || w[0] != '0' || (w[1] != 'x' && w[1] != 'X')) return false;
  return std::all_of(w.begin() + 2, w.end(), is_hex);
}

// The grammar of xml_bitmaps.hpp.
bool is_bitmap(std::string_view v) {
  constexpr std::string_view kInfinite = "0xf...f";
  if (v.substr(0, kInfinite.size()) == kInfinite) {
    v.remove_prefix(kInfinite.size());
    if (v.empty()) return true;
    if (v.front() != ',') return false;
    v.remove_prefix(1);
  }
  bool first = true;
  for (;;) {
    const size_t comma = v.find(',');
    const std::string_view w = v.substr(0, comma);
    if (!(w.empty() ? !first : is_word(w))) return false;
    first = false;
    if (comma == std::string_view::npos) return true;
    v.remove_prefix(comma + 1);
  }
}

bool is_bitmap_attribute(std::string_view name) { return ends_with(name, "cpuset") || ends_with(name, "nodeset"); }

constexpr std::string_view kPairs[4] = {"cpuset", "complete_cpuset", "nodeset", "complete_nodeset"};

size_t line_of(std::string_view xml, size_t at) {
  return 1 + static_cast<size_t>(std::count(xml.begin(), xml.begin() + static_cast<std::ptrdiff_t>(at), '\n'));
}

}  // namespace

std::string find_malformed_bitmap(std::string_view xml) {
  size_t i = 0;
  const size_t n = xml.size();
  // Skips to just past `close`, or to the end.
  auto skip_past = [&](std::string_view close) {
    const size_t at = xml.find(close, i);
    i = at == std::string_view::npos ? n : at + close.size();
  };
  while (i < n) {
    i = xml.find('<', i);
    if (i == std::string_view::npos) break;
    const std::string_view rest = xml.substr(i);
    if (rest.substr(0, 4) == "<!--") {
      skip_past("-->");
      continue;
    }
    if (rest.substr(0, 9) == "<![CDATA[") {
      skip_past("]]>");
      continue;
    }
    if (rest.substr(0, 2) == "<?") {
      skip_past("?>");
      continue;
    }
    if (rest.substr(0, 2) == "<!" || rest.substr(0, 2) == "</") {
      skip_past(">");
      continue;
    }
    // An element's start tag: its name, then name="value" pairs up to '>' or "/>".
    const size_t tag_at = i++;
    while (i < n && !is_space(xml[i]) && xml[i] != '>' && xml[i] != '/') ++i;
    const std::string_view element = xml.substr(tag_at + 1, i - tag_at - 1);
    bool has[4] = {false, false, false, false};  // cpuset, complete_cpuset, nodeset, complete_nodeset
    bool ended = false;                          // the tag's end was reached: its attributes are all known
    for (;;) {
      while (i < n && is_space(xml[i])) ++i;
      if (i < n && (xml[i] == '>' || xml[i] == '/')) {
        ended = true;
        break;
      }
      if (i >= n || xml[i] == '<') break;
      const size_t name_at = i;
      while (i < n && !is_space(xml[i]) && xml[i] != '=' && xml[i] != '>' && xml[i] != '/' && xml[i] != '<') ++i;
      const std::string_view name = xml.substr(name_at, i - name_at);
      while (i < n && is_space(xml[i])) ++i;
      if (i >= n || xml[i] != '=') break;  // not well-formed: hwloc's parser will say so
      ++i;
      while (i < n && is_space(xml[i])) ++i;
      if (i >= n || (xml[i] != '"' && xml[i] != '\'')) break;
      const char quote = xml[i++];
      const size_t close = xml.find(quote, i);
      if (close == std::string_view::npos) return "";  // an unterminated value: hwloc refuses it
      const std::string_view value = xml.substr(i, close - i);
      if (is_bitmap_attribute(name) && !is_bitmap(value)) {
        std::string shown(value.substr(0, 40));
        for (char &c : shown)
          if (static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) >= 0x7f) c = '?';
        return "line " + std::to_string(line_of(xml, name_at)) + ": " + std::string(name) + "=\"" + shown +
               (value.size() > 40 ? "...\"" : "\"") + " is not an hwloc bitmap (0x-prefixed hexadecimal words separated by commas)";
      }
      for (size_t k = 0; k < 4; ++k) has[k] = has[k] || name == kPairs[k];
      i = close + 1;
    }
    for (size_t k = 0; ended && element == "object" && k < 4; k += 2)
      if (has[k] != has[k + 1])
        return "line " + std::to_string(line_of(xml, tag_at)) + ": <" + std::string(element.substr(0, 40)) + "> has " +
               std::string(kPairs[has[k] ? k : k + 1]) + " but no " + std::string(kPairs[has[k] ? k + 1 : k]) +
               " (hwloc writes both or neither)";
  }
  return "";
}

}  // namespace cxltier::topo
