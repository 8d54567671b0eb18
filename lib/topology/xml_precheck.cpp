// SPDX-License-Identifier: Apache-2.0
// The check before hwloc reads a topology (xml_precheck.hpp): a small scanner over the XML's
// tags, which reads element names, attribute names and quoted values and nothing else.
#include "lib/topology/xml_precheck.hpp"

#include "lib/core/text.hpp"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <string>
#include <vector>

namespace cxltier::topo {
namespace {

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; }
// Between a tag's attributes: what hwloc's own reader skips there (not '\r').
bool is_tag_space(char c) { return c == ' ' || c == '\t' || c == '\n'; }
bool is_hex(char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'); }

// One comma-separated word: "0x" and 1 to 16 hexadecimal digits.
bool is_word(std::string_view w) {
  if (w.size() < 3 || w.size() > 18 || w[0] != '0' || (w[1] != 'x' && w[1] != 'X')) return false;
  return std::all_of(w.begin() + 2, w.end(), is_hex);
}

// The grammar of xml_precheck.hpp.
bool is_bitmap(std::string_view v) {
  constexpr std::string_view kInfinite = "0xf...f";
  const bool infinite = v.substr(0, kInfinite.size()) == kInfinite;
  if (infinite) {
    v.remove_prefix(kInfinite.size());
    if (v.empty()) return true;
    if (v.front() != ',') return false;
    v.remove_prefix(1);
  }
  bool first = !infinite;
  for (;;) {
    const size_t comma = v.find(',');
    const std::string_view w = v.substr(0, comma);
    if (!(w.empty() ? !first : is_word(w))) return false;
    first = false;
    if (comma == std::string_view::npos) return true;
    v.remove_prefix(comma + 1);
  }
}

bool is_bitmap_attribute(std::string_view name) { return name.ends_with("cpuset") || name.ends_with("nodeset"); }

// The most words a bitmap value may have, and the lowest os_index refused for an object whose
// index is a bit of its sets: hwloc sizes a bitmap to its highest bit, so one index near 2^32
// made it allocate 512 MiB. 2^20 bits is 128 times Linux's largest CPU count (8,192).
constexpr size_t kMaxBitmapWords = 32768;
constexpr uint32_t kMaxBitIndex = uint32_t{1} << 20;

// Object types hwloc writes whose os_index is not a bit of a set (every other type, or a type
// named otherwise, has its index bounded): PU and NUMANode indexes are.
bool index_is_not_a_bit(std::string_view type) {
  constexpr std::string_view kTypes[] = {"Machine", "Package", "Die", "Core", "Group", "Misc", "Bridge", "PCIDev", "OSDev",
                                         "L1Cache", "L2Cache", "L3Cache", "L4Cache", "L5Cache", "L1iCache", "L2iCache",
                                         "L3iCache", "MemCache", "Cache", "Socket", "System"};
  return std::find(std::begin(kTypes), std::end(kTypes), type) != std::end(kTypes);
}

bool is_digits(std::string_view v) {
  return !v.empty() && std::all_of(v.begin(), v.end(), [](char c) { return c >= '0' && c <= '9'; });
}

// os_index as hwloc writes it: decimal digits, below kMaxBitIndex.
bool is_bit_index(std::string_view v) { return is_digits(v) && v.size() <= 7 && std::stoul(std::string(v)) < kMaxBitIndex; }

// The references hwloc's own XML reader decodes in a value (and hwloc's writers write): at any
// other it stops reading the tag's attributes, where libxml2 decodes it and reads on.
bool references_read_alike(std::string_view v) {
  constexpr std::string_view kKnown[] = {"&#10;", "&#13;", "&#9;", "&quot;", "&lt;", "&gt;", "&amp;"};
  for (size_t at = v.find('&'); at != std::string_view::npos; at = v.find('&', at + 1))
    if (std::none_of(std::begin(kKnown), std::end(kKnown), [&](std::string_view k) { return v.substr(at, k.size()) == k; }))
      return false;
  return true;
}

// An attribute name as hwloc's own XML reader reads one (lowercase letters and '_'): at any other
// it stops reading the tag's attributes, where libxml2 reads on, so the two would see different
// attributes (and a namespace declaration, "xmlns:x", is no attribute to libxml2 at all).
bool is_hwloc_attribute_name(std::string_view name) {
  return !name.empty() && std::all_of(name.begin(), name.end(), [](char c) { return (c >= 'a' && c <= 'z') || c == '_'; });
}

constexpr std::string_view kPairs[4] = {"cpuset", "complete_cpuset", "nodeset", "complete_nodeset"};

// The name after its namespace prefix, if any.
std::string_view local_name(std::string_view name) {
  const size_t colon = name.rfind(':');
  return colon == std::string_view::npos ? name : name.substr(colon + 1);
}

// At most 40 characters of `text` for a one-line message, other bytes than printable ASCII as '?'.
std::string printable(std::string_view text) {
  std::string shown(text.substr(0, 40));
  for (char &c : shown)
    if (static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) >= 0x7f) c = '?';
  if (text.size() > 40) shown += "...";
  return shown;
}

size_t line_of(std::string_view xml, size_t at) {
  return 1 + static_cast<size_t>(std::count(xml.begin(), xml.begin() + static_cast<std::ptrdiff_t>(at), '\n'));
}

}  // namespace

std::string find_unsafe_xml(std::string_view xml) {
  const size_t n = xml.size();
  auto at_line = [&](size_t at) { return "line " + std::to_string(line_of(xml, at)) + ": "; };
  if (const size_t nul = xml.find('\0'); nul != std::string_view::npos)
    return at_line(nul) + "a NUL byte (an hwloc XML file is ASCII or UTF-8 text)";
  // Skips to just past `close`; false when there is none.
  size_t i = 0;
  auto skip_past = [&](std::string_view close) {
    const size_t at = xml.find(close, i);
    if (at == std::string_view::npos) return false;
    i = at + close.size();
    return true;
  };
  // hwloc's own XML parser (used without its libxml2 plugin) skips the whole line of an XML
  // declaration or a DOCTYPE: markup after either on its line would be read by one parser only.
  auto rest_of_line_blank = [&] {
    for (size_t k = i; k < n && xml[k] != '\n'; ++k)
      if (!is_space(xml[k])) return false;
    return true;
  };
  // Read from the root element only, as hwloc reads it: a <topology> without a version is hwloc
  // 1.x's format. Another root, or none yet, counts as v2 (the stricter check).
  bool v1 = false;
  bool root_seen = false;
  bool object_seen = false;           // the first <object> (the topology's root object) was read
  std::vector<std::string_view> names;  // the attributes of the tag being read
  while (i < n) {
    i = xml.find('<', i);
    if (i == std::string_view::npos) break;
    const size_t tag_at = i;
    const std::string_view rest = xml.substr(i);
    if (rest.substr(0, 4) == "<!--") {
      i = tag_at + 4;  // "<!-->" does not end the comment it begins
      if (!skip_past("-->")) return at_line(tag_at) + "a comment that does not end";
      continue;
    }
    if (rest.substr(0, 9) == "<![CDATA[") {
      i = tag_at + 9;
      if (!skip_past("]]>")) return at_line(tag_at) + "a CDATA section that does not end";
      continue;
    }
    if (rest.substr(0, 2) == "<?") {
      i = tag_at + 2;  // nor does "<?>" end its processing instruction
      if (!skip_past("?>")) return at_line(tag_at) + "a processing instruction that does not end";
      const std::string_view pi = xml.substr(tag_at, i - tag_at);
      if (pi.size() > 5 && pi.substr(0, 5) == "<?xml" && is_space(pi[5])) {
        if (!rest_of_line_blank()) return at_line(tag_at) + "markup after the XML declaration on its line";
        // hwloc's own parser skips the declaration's first line, and reads what follows as markup.
        if (pi.find('\n') != std::string_view::npos) return at_line(tag_at) + "an XML declaration on more than one line";
        const size_t enc = pi.find("encoding");
        if (enc != std::string_view::npos) {
          size_t q = pi.find_first_of("\"'", enc);
          const size_t e = q == std::string_view::npos ? q : pi.find(pi[q], q + 1);
          const std::string_view name = q == std::string_view::npos || e == std::string_view::npos ? "" : pi.substr(q + 1, e - q - 1);
          if (!text::iequal(name, "UTF-8") && !text::iequal(name, "US-ASCII") && !text::iequal(name, "ASCII") && !text::iequal(name, "ISO-8859-1") &&
              !text::iequal(name, "LATIN1"))
            return at_line(tag_at) + "an encoding other than UTF-8, US-ASCII or ISO-8859-1";
        }
      }
      continue;
    }
    if (rest.substr(0, 2) == "<!") {  // a declaration (DOCTYPE), its quoted literals skipped
      const bool doctype = rest.substr(0, 9) == "<!DOCTYPE";
      char quote = 0;
      for (++i; i < n; ++i) {
        const char c = xml[i];
        if (quote != 0) {
          if (c == quote) quote = 0;
        } else if (c == '"' || c == '\'') {
          quote = c;
        } else if (c == '[') {  // comments and literals inside one would need a DTD parser
          return at_line(i) + "an internal DTD subset (hwloc writes none)";
        } else if (c == '>') {
          break;
        }
      }
      if (i >= n) return at_line(tag_at) + "a declaration that does not end";
      ++i;
      if (doctype && !rest_of_line_blank()) return at_line(tag_at) + "markup after the DOCTYPE on its line";
      if (doctype && xml.substr(tag_at, i - tag_at).find('\n') != std::string_view::npos)
        return at_line(tag_at) + "a DOCTYPE on more than one line";
      // hwloc 2.9's libxml2 reader compares the DTD's system identifier with strcmp and
      // crashes on a DOCTYPE that has none (<!DOCTYPE topology>): hwloc writes SYSTEM "...".
      if (doctype) {
        const std::string_view decl = xml.substr(tag_at, i - tag_at);
        const size_t sys = decl.find("SYSTEM");
        size_t q = sys == std::string_view::npos ? sys : sys + 6;
        while (q != std::string_view::npos && q < decl.size() && is_space(decl[q])) ++q;
        if (q == std::string_view::npos || q == sys + 6 || q >= decl.size() || (decl[q] != '"' && decl[q] != '\''))
          return at_line(tag_at) + "a DOCTYPE without SYSTEM and its identifier (hwloc writes SYSTEM \"hwloc2.dtd\")";
      }
      continue;
    }
    if (rest.substr(0, 2) == "</") {
      if (!skip_past(">")) return at_line(tag_at) + "an end tag that does not end";
      continue;
    }
    // An element's start tag: its name, then name="value" pairs up to '>' or "/>". Names are
    // compared without a namespace prefix (hwloc reads local names).
    ++i;
    while (i < n && !is_space(xml[i]) && xml[i] != '>' && xml[i] != '/') ++i;
    const std::string_view element = local_name(xml.substr(tag_at + 1, i - tag_at - 1));
    bool has[4] = {false, false, false, false};  // cpuset, complete_cpuset, nodeset, complete_nodeset
    bool ended = false;                          // the tag's end was reached: its attributes are all known
    names.clear();
    std::string_view type;
    bool has_type = false;
    std::string_view os_index;
    size_t os_index_at = std::string_view::npos;
    bool version_given = false;
    for (;;) {
      while (i < n && is_tag_space(xml[i])) ++i;
      if (i < n && (xml[i] == '>' || xml[i] == '/')) {
        ended = true;
        break;
      }
      if (i >= n || xml[i] == '<') break;
      const size_t name_at = i;
      while (i < n && !is_tag_space(xml[i]) && xml[i] != '=' && xml[i] != '>' && xml[i] != '/' && xml[i] != '<') ++i;
      const std::string_view name = xml.substr(name_at, i - name_at);
      // Written as hwloc writes it (name="value", nothing between), or the two parsers could
      // read this tag's attributes differently.
      if (!is_hwloc_attribute_name(name) || i + 1 >= n || xml[i] != '=' || xml[i + 1] != '"')
        return at_line(name_at) + "attribute \"" + printable(name) +
               "\" is not written as hwloc writes attributes (name=\"value\", the name in lowercase letters and '_')";
      i += 2;
      const char quote = '"';
      const size_t close = xml.find(quote, i);
      if (close == std::string_view::npos) return at_line(name_at) + "an attribute value that does not end";
      const std::string_view value = xml.substr(i, close - i);
      // hwloc writes '<' and '>' escaped; its own parser ends a tag at the first '>'.
      if (value.find_first_of("<>") != std::string_view::npos)
        return at_line(name_at) + printable(name) + "=\"" + printable(value) + "\" holds a raw '<' or '>'";
      if (!references_read_alike(value))
        return at_line(name_at) + printable(name) + "=\"" + printable(value) +
               "\" holds a reference other than &quot; &lt; &gt; &amp; &#9; &#10; &#13; (hwloc's own reader stops at it)";
      // libxml2 refuses a repeated attribute; hwloc's own reader keeps the last, and asserts on
      // some (a v1 Cache's type given again).
      if (std::find(names.begin(), names.end(), name) != names.end())
        return at_line(name_at) + "attribute \"" + printable(name) + "\" given twice in one tag";
      names.push_back(name);
      if (is_bitmap_attribute(name) && !is_bitmap(value))
        return at_line(name_at) + printable(name) + "=\"" + printable(value) +
               "\" is not an hwloc bitmap (0x-prefixed hexadecimal words separated by commas)";
      if (is_bitmap_attribute(name) && static_cast<size_t>(std::count(value.begin(), value.end(), ',')) >= kMaxBitmapWords)
        return at_line(name_at) + printable(name) + "=\"" + printable(value) + "\" has more than " +
               std::to_string(kMaxBitmapWords) + " words (bits past " + std::to_string(kMaxBitIndex - 1) + ")";
      if (name == "os_index") {
        os_index = value;
        os_index_at = name_at;
      }
      // A distance matrix's objects: hwloc allocates nbobjs^2 values (the product wraps at
      // 2^32) before it reads one, and each takes at least two bytes of the text.
      if (name == "nbobjs" && (element == "distances2" || element == "distances2hetero" || element == "distances") &&
          (!is_digits(value) || value.size() > 9 || std::stoull(std::string(value)) * std::stoull(std::string(value)) > n / 2))
        return at_line(name_at) + "<" + printable(element) + "> has nbobjs=\"" + printable(value) +
               "\": more values than the file's " + std::to_string(n) + " bytes can hold";
      for (size_t k = 0; k < 4; ++k) has[k] = has[k] || name == kPairs[k];
      if (name == "type") {
        type = value;
        has_type = true;
      }
      if (!root_seen && element == "topology" && name == "version") {
        // hwloc writes "2.0" (or no version, 1.x); anything else could be read otherwise by it.
        const size_t dot = value.find('.');
        if (dot == std::string_view::npos || !is_digits(value.substr(0, dot)) || !is_digits(value.substr(dot + 1)))
          return at_line(name_at) + "version=\"" + printable(value) + "\" is not a version hwloc writes";
        std::string_view major = value.substr(0, dot);
        while (major.size() > 1 && major[0] == '0') major.remove_prefix(1);  // as sscanf("%u") reads it
        v1 = major == "0" || major == "1";
        version_given = true;
      }
      i = close + 1;
    }
    if (!ended)
      return at_line(tag_at) + "a start tag that does not end as hwloc writes one (name=\"value\" attributes, then '>' or '/>')";
    if (!root_seen) {
      root_seen = true;
      if (element == "topology" && !version_given) v1 = true;
    }
    // hwloc 1.7.2 and older wrote I/O Groups and Misc objects with a cpuset alone, and hwloc 2.9
    // reads those v1 files on purpose; every other object has both sets of a pair or neither.
    const bool lone_sets_allowed = v1 && (type == "Group" || type == "Misc");
    for (size_t k = 0; element == "object" && !lone_sets_allowed && k < 4; k += 2)
      if (has[k] != has[k + 1])
        return at_line(tag_at) + "<object type=\"" + printable(type) + "\"> has " +
               std::string(kPairs[has[k] ? k : k + 1]) + " but no " + std::string(kPairs[has[k] ? k + 1 : k]) +
               " (hwloc writes both or neither)";
    if (element == "object" && !has_type) return at_line(tag_at) + "<object> has no type (hwloc writes one for every object)";
    if (element == "object" && !index_is_not_a_bit(type) && !is_bit_index(os_index))
      return at_line(os_index_at == std::string_view::npos ? tag_at : os_index_at) + "<object type=\"" + printable(type) +
             "\"> has " + (os_index_at == std::string_view::npos ? std::string("no os_index") : "os_index=\"" + printable(os_index) + "\"") +
             ": a PU's or a NUMA node's index must be a decimal number below " + std::to_string(kMaxBitIndex) +
             " (hwloc would size its sets to it; with none, to 4294967295)";
    // hwloc 2.9 asserts when it drops the root object (a Group or an I/O object there).
    if (element == "object" && !object_seen) {
      object_seen = true;
      if (type != "Machine" && !(v1 && (type == "System" || type == "NUMANode")))
        return at_line(tag_at) + "the first <object> is a \"" + printable(type) +
               "\": the root of a topology is a Machine (a System or a NUMANode in a v1 file)";
    }
  }
  return "";
}

}  // namespace cxltier::topo
