// SPDX-License-Identifier: Apache-2.0
// The check of an hwloc XML text before hwloc reads it: its bitmap attributes (cpuset, nodeset
// and the like), the indexes and sizes hwloc allocates by, its root object, and text that
// hwloc's two readers would read differently. Debian's hwloc 2.9 does not refuse every
// malformed file: it aborts the process on a failed assert() for some values (",x00000001",
// for one), dereferences a NULL bitmap when an object has a cpuset but no complete_cpuset (or
// the same for nodesets), and allocates 512 MiB for a NUMA node at index 4294967294. A topology
// file like that must be refused with an error, not kill or bloat the engine that opened it.
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
// Also one line when a number in the text would make hwloc allocate far more than the text:
// a bitmap value of more than 32,768 words (bits from 2^20 up); an <object> without a type, or
// one whose type is not one whose index hwloc keeps apart from its sets (Machine, Package, Die,
// Core, the caches, MemCache, Group, Misc, the I/O objects: so PU, NUMANode and any type named
// otherwise) without an os_index that is a decimal number below 2^20 (hwloc sizes a set to the
// highest bit it names, and one it is not given is 4294967295: a PU or a NUMA node at index
// 4294967294 made it allocate 512 MiB, and keep it while the topology was loaded); a distance
// matrix (<distances2>, <distances2hetero>, v1's <distances>) whose nbobjs is not decimal or
// names more values (nbobjs^2) than half the text's bytes, which hwloc allocates before it
// reads one.
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
// skips that line), an internal DTD subset, a DOCTYPE without SYSTEM and a quoted identifier
// (hwloc's libxml2 reader crashes on one), a root <topology> whose version is not digits, a
// dot and digits (the format's version is the root's, as hwloc reads it), an XML declaration or
// DOCTYPE on more than one line (its own parser skips one line), an attribute not written as
// hwloc writes one (name="value", the name in lowercase letters and '_', spaces, tabs or
// newlines between: its own parser stops reading a tag's attributes at any other, and to
// libxml2 "xmlns:x" is a namespace declaration, no attribute), an attribute given twice in a
// tag, a value holding a reference other than &quot; &lt; &gt; &amp; &#9; &#10; &#13; (its own
// parser stops at any other, libxml2 decodes it), and a start tag that does not end after its
// attributes. Also refused: a first <object> (the root) that is not a Machine (a System or a
// NUMANode in a v1 file): hwloc 2.9 asserts when it drops the root. An element's namespace
// prefix is ignored (as strict as libxml2, which gives hwloc the local name of a declared one).
// Other text that is not well-formed is left for hwloc to refuse.
std::string find_unsafe_xml(std::string_view xml);

}  // namespace cxltier::topo
