// SPDX-License-Identifier: Apache-2.0
// Checks of the bitmap attributes of an hwloc XML text (cpuset, nodeset and the like) before
// hwloc reads it. Debian's hwloc 2.9 does not refuse every malformed one: it aborts the process
// on a failed assert() for some values (",x00000001", for one), and dereferences a NULL bitmap
// when an object has a cpuset but no complete_cpuset (or the same for nodesets). A topology
// file like that must be refused with an error, not kill the engine that opened it.
// Internal to lib/topology.
#pragma once

#include <string>
#include <string_view>

namespace cxltier::topo {

// "" when every attribute whose name ends in "cpuset" or "nodeset", in every element of `xml`,
// has a value of the form hwloc writes (hwloc_bitmap_asprintf): an optional "0xf...f" (all bits
// from there on set), then words of 1 to 16 hexadecimal digits each prefixed by "0x" and
// separated by commas, where a word after the first may be empty (a zero word); or "0xf...f"
// alone. Otherwise one line naming the line and the first attribute that is not, with its
// value (at most 40 characters of each), e.g. "line 14: nodeset=\",x00000001\" is not an hwloc
// bitmap (...)".
// Also one line when an <object> has exactly one of cpuset and complete_cpuset, or of nodeset
// and complete_nodeset (hwloc writes both or neither; hwloc 1.7.2 and older wrote a Group or a
// Misc object with a cpuset alone, which is accepted in a v1 file), e.g. "line 9: <object
// type=\"PU\"> has cpuset but no complete_cpuset (...)".
// The text is read as both of hwloc's parsers (libxml2, and its own without the libxml2
// plugin) would read it, and a text they could read differently from this scanner is refused
// too: a NUL byte, an encoding other than UTF-8, US-ASCII or ISO-8859-1, a comment, CDATA
// section, processing instruction, declaration, end tag or attribute value that does not end,
// a raw '<' or '>' in an attribute value (hwloc writes them escaped; its own parser ends a tag
// at the first '>'), markup after an XML declaration or a DOCTYPE on its line (its own parser
// skips that line), an internal DTD subset, and a root <topology> whose version is not digits,
// a dot and digits (the format's version is the root's, as hwloc reads it). Namespace prefixes
// are ignored, as hwloc reads local names. Other text
// that is not well-formed is left for hwloc to refuse.
std::string find_malformed_bitmap(std::string_view xml);

}  // namespace cxltier::topo
