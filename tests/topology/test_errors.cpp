// SPDX-License-Identifier: Apache-2.0
// Bad topology input, through the API (Error CXLT_ERROR_TOPOLOGY naming the file and the
// reason) and through `cxltier topo` (exit status 2, exactly one line on stderr, nothing on
// stdout): never a crash and never an empty success.
#include "lib/topology/hwloc_load.hpp"
#include "lib/topology/xml_precheck.hpp"
#include "test_util.hpp"

#include <cxltier/error.hpp>

#include <sys/stat.h>
#include <unistd.h>

using namespace cxltier;
using namespace cxltier::test;

namespace {

struct BadCase {
  const char *label;
  const char *reason;  // a fragment the message must hold
};

// Makes the file (or directory) for a case in `dir`; returns its path.
fs::path make_case(const TempDir &dir, const std::string &label) {
  if (label == "missing") return dir.path() / "no-such-topology.xml";
  if (label == "directory") {
    fs::create_directory(dir.path() / "a-directory.xml");
    return dir.path() / "a-directory.xml";
  }
  if (label == "empty") return dir.write("empty.xml", "");
  if (label == "blanks") return dir.write("blanks.xml", "  \n\t\n");
  if (label == "garbage") return dir.write("garbage.xml", "this is not XML at all\n\x01\x02\x03");
  if (label == "not_a_topology") return dir.write("other.xml", "<?xml version=\"1.0\"?>\n<html><body/></html>\n");
  if (label == "truncated") {
    std::string full = read_file(topology_data_dir() / "64intel64-fakeKNL-SNC4-hybrid.xml");
    return dir.write("truncated.xml", full.substr(0, full.size() / 2));
  }
  if (label == "broken_tags") {
    std::string full = read_file(topology_data_dir() / "8intel64-4n2t-memattrs.xml");
    size_t at = full.find("<object type=\"NUMANode\"");
    full.replace(at, 7, "<object<");
    return dir.write("broken.xml", full);
  }
  if (label == "bad_bitmap") {  // hwloc 2.9 would abort the process on this value
    std::string full = read_file(topology_data_dir() / "8intel64-4n2t-memattrs.xml");
    const std::string from = "nodeset=\"0x00000001\"";
    size_t at = full.find("<object type=\"PU\"");
    at = full.find(from, at);
    full.replace(at, from.size(), "nodeset=\",x00000001\"");
    return dir.write("bad-bitmap.xml", full);
  }
  if (label == "xml_v3") return topology_data_dir() / "64intel64-heteromem.xml";
  if (label == "fifo") {  // must be refused at once, not block waiting for a writer
    fs::path p = dir.path() / "a-pipe.xml";
    if (mkfifo(p.c_str(), 0600) != 0) throw std::runtime_error("mkfifo failed");
    return p;
  }
  throw std::logic_error("unknown case " + label);
}

const BadCase kCases[] = {
    {"missing", "no such file"},
    {"directory", "is a directory"},
    {"empty", "the file is empty"},
    {"blanks", "only blanks"},
    {"garbage", "not an XML file"},
    {"not_a_topology", "no <topology> element"},
    {"truncated", "malformed or truncated"},
    {"broken_tags", "malformed or truncated"},
    {"bad_bitmap", "nodeset=\",x00000001\" is not an hwloc bitmap"},
    {"xml_v3", "format version 3.0"},
    {"fifo", "not a regular file"},
};

}  // namespace

class BadTopologyInput : public ::testing::TestWithParam<BadCase> {};

TEST_P(BadTopologyInput, ApiThrowsTopologyErrorNamingTheFile) {
  TempDir dir;
  fs::path p = make_case(dir, GetParam().label);
  try {
    Topology t = load_topology_xml(p.string());
    FAIL() << "accepted " << p << " with " << t.tiers.size() << " tiers";
  } catch (const Error &e) {
    EXPECT_EQ(e.code(), CXLT_ERROR_TOPOLOGY);
    std::string msg = e.what();
    EXPECT_NE(msg.find(p.string()), std::string::npos) << msg;
    EXPECT_NE(msg.find(GetParam().reason), std::string::npos) << msg;
    EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
  }
  // discover_topology treats any other spec as a file, with the same error.
  EXPECT_THROW(discover_topology(p.string()), Error);
}

TEST_P(BadTopologyInput, CliExitsTwoWithOneLine) {
  if (!std::getenv("CXLT_TOOL")) GTEST_SKIP() << "CXLT_TOOL is not set (run through meson test)";
  TempDir dir;
  fs::path p = make_case(dir, GetParam().label);
  for (const bool json : {false, true}) {
    std::vector<std::string> args{"topo", "--topology", p.string()};
    if (json) args.push_back("--json");
    ToolRun r = run_tool(args);
    EXPECT_EQ(r.status, 2) << r.err;
    EXPECT_TRUE(r.out.empty()) << r.out;
    ASSERT_FALSE(r.err.empty());
    EXPECT_EQ(r.err.find('\n'), r.err.size() - 1) << "more than one line:\n" << r.err;
    EXPECT_NE(r.err.find(p.string()), std::string::npos) << r.err;
    EXPECT_NE(r.err.find(GetParam().reason), std::string::npos) << r.err;
  }
}

INSTANTIATE_TEST_SUITE_P(Cases, BadTopologyInput, ::testing::ValuesIn(kCases),
                         [](const ::testing::TestParamInfo<BadCase> &p) { return std::string(p.param.label); });

TEST(BadTopologyInputExtra, UnreadableFile) {
  if (geteuid() == 0) GTEST_SKIP() << "root reads files whatever their mode";
  TempDir dir;
  fs::path p = dir.write("secret.xml", read_file(topology_data_dir() / "8intel64-4n2t-memattrs.xml"));
  fs::permissions(p, fs::perms::none);
  try {
    load_topology_xml(p.string());
    FAIL() << "read an unreadable file";
  } catch (const Error &e) {
    EXPECT_EQ(e.code(), CXLT_ERROR_TOPOLOGY);
    EXPECT_NE(std::string(e.what()).find("cannot be read"), std::string::npos) << e.what();
  }
}

TEST(BadTopologyInputExtra, XmlBufferErrors) {
  EXPECT_THROW(topo::load_xml_buffer("", "buf"), Error);
  EXPECT_THROW(topo::load_xml_buffer("<topology version=\"2.0\"><object", "buf"), Error);
  try {
    topo::load_xml_buffer("<topology version=\"3.0\"></topology>", "the-buffer");
    FAIL();
  } catch (const Error &e) {
    EXPECT_EQ(e.code(), CXLT_ERROR_TOPOLOGY);
    EXPECT_NE(std::string(e.what()).find("the-buffer"), std::string::npos);
  }
}

TEST(BadTopologyInputExtra, FormatVersionIsReadFromTheTopologyElement) {
  EXPECT_EQ(topo::xml_format_version("<?xml version=\"1.0\"?>\n<topology version=\"3.0\">"), "3.0");
  EXPECT_EQ(topo::xml_format_version("<topology version='2.0'>"), "2.0");
  EXPECT_EQ(topo::xml_format_version("<topology>"), "1.0");
  EXPECT_EQ(topo::xml_format_version("<html/>"), "");
}

TEST(BadTopologyInputExtra, UnknownCliOptionIsBadInput) {
  if (!std::getenv("CXLT_TOOL")) GTEST_SKIP() << "CXLT_TOOL is not set (run through meson test)";
  ToolRun r = run_tool({"topo", "--no-such-flag"});
  EXPECT_EQ(r.status, 2);
}

// The bitmap check before hwloc reads a file (lib/topology/xml_precheck.hpp): every topology
// in tests/data passes it, and the malformed values a fuzzer found (and hwloc 2.9 would abort
// on) are named with their line.
TEST(BadTopologyInputExtra, BitmapCheckPassesEveryKnownTopology) {
  size_t files = 0;
  for (const auto &e : fs::recursive_directory_iterator(topology_data_dir())) {
    if (!e.is_regular_file() || e.path().extension() != ".xml") continue;
    EXPECT_EQ(topo::find_unsafe_xml(read_file(e.path())), "") << e.path();
    ++files;
  }
  EXPECT_GE(files, 10u);
  // hwloc 1.x files (tests/data/topologies-v1): the check's v1 rules, and each loads.
  size_t v1 = 0;
  for (const auto &e : fs::directory_iterator(topology_data_dir().parent_path() / "topologies-v1")) {
    if (!e.is_regular_file() || e.path().extension() != ".xml") continue;
    const std::string text = read_file(e.path());
    EXPECT_EQ(text.find("<topology version"), std::string::npos) << e.path() << ": not a v1 file";
    EXPECT_EQ(topo::find_unsafe_xml(text), "") << e.path();
    EXPECT_FALSE(load_topology_xml(e.path().string()).tiers.empty()) << e.path();
    ++v1;
  }
  EXPECT_EQ(v1, 3u);
}

TEST(BadTopologyInputExtra, BitmapCheckNamesTheValue) {
  const auto check = [](const std::string &value) {
    return topo::find_unsafe_xml("<topology version=\"2.0\">\n<object type=\"Machine\" cpuset=\"0x3\" complete_cpuset=\"0x3\"\n  complete_nodeset=\"0x1\" nodeset=\"" +
                                       value + "\"/>\n</topology>\n");
  };
  for (const char *good : {"0x00000001", "0x0", "0xf...f", "0xf...f,0x00000003", "0x000000ff,,0x0000ffff",
                           "0xfc000000,,,,,,,0x00000101", "0xFFFFFFFFFFFFFFFF"})
    EXPECT_EQ(check(good), "") << good;
  for (const char *bad : {",x00000001", "5x00000001", "0x0  0000001", "0:x00000003", "0x00000osdev_t004", "",
                          "0x", ",0x1", "0xf...f0x1", "0x11111111111111111", "0xf...f,,x1"}) {
    const std::string msg = check(bad);
    EXPECT_NE(msg.find("line 3: nodeset=\"" + std::string(bad) + "\" is not an hwloc bitmap"), std::string::npos)
        << bad << ": " << msg;
  }
  // A cpuset without its complete_cpuset, and the same for nodesets (hwloc 2.9 dereferences a
  // NULL bitmap there); both or neither is fine, and a v1 Group or Misc object may have a cpuset
  // alone (hwloc 1.7.2 and older wrote I/O Groups so).
  const auto has = [](const std::string &xml, const std::string &fragment) {
    const std::string msg = topo::find_unsafe_xml(xml);
    EXPECT_NE(msg.find(fragment), std::string::npos) << xml << " -> " << msg;
  };
  has("<topology version=\"2.0\">\n<object type=\"PU\" cpuset=\"0x1\"/>",
      "line 2: <object type=\"PU\"> has cpuset but no complete_cpuset");
  has("<object complete_nodeset=\"0x1\">", "has complete_nodeset but no nodeset");
  has("<object nodeset=\"0x1\" complete_nodeset=\"0x1\">", "line 1: <object> has no type");
  EXPECT_EQ(topo::find_unsafe_xml("<object type=\"Machine\" nodeset=\"0x1\" complete_nodeset=\"0x1\"><object type=\"OSDev\"/>"), "");
  EXPECT_EQ(topo::find_unsafe_xml(
                "<topology>\n<object type=\"Machine\"><object type=\"Group\" cpuset=\"0x3\"/><object type=\"Misc\" cpuset=\"0x1\"/>"),
            "");
  has("<topology version=\"2.0\">\n<object type=\"Group\" cpuset=\"0x3\"/>", "has cpuset but no complete_cpuset");
  has("<topology>\n<object type=\"NUMANode\" nodeset=\"0x1\"/>", "has nodeset but no complete_nodeset");
  // Element names are read without a prefix (libxml2 gives hwloc the local name of a declared
  // one: so the check is as strict or stricter); attributes only as hwloc
  // writes them: a namespace declaration is no attribute to libxml2, a prefixed name one that
  // hwloc's own reader stops at, and so are other names, quotes and spacing.
  has("<x:object type=\"PU\" cpuset=\"0x1\"/>", "has cpuset but no complete_cpuset");
  has("<object type=\"PU\" x:nodeset=\"0x1\"/>", "attribute \"x:nodeset\" is not written as hwloc writes attributes");
  has("<object type=\"PU\" os_index=\"4294967294\" xmlns:type=\"Core\"/>", "attribute \"xmlns:type\" is not written");
  has("<object type=\"Core\" os_index=\"0\" cpuset='0x1' complete_cpuset=\"0x1\"/>", "attribute \"cpuset\" is not written");
  has("<object type = \"Core\"/>", "attribute \"type\" is not written");
  has("<object Type=\"Core\"/>", "attribute \"Type\" is not written");
  has("<object type=\"Core\"\r os_index=\"1\"/>", "is not written as hwloc writes attributes");
  // A start tag hwloc's own reader could read further than the check (it ends a tag at '>').
  has("<topology>\n<object type=\"PU\" os_index=\"1\" junk/>", "line 2: attribute \"junk\" is not written");
  has("<topology>\n<object type=\"PU\" os_index=\"1\" <a/>", "line 2: a start tag that does not end as hwloc writes one");
  has("<object type=\"PU\" os_index=\"1\"", "a start tag that does not end");
  // Comments and other tags' text are read as XML reads them.
  EXPECT_NE(topo::find_unsafe_xml("<a nodeset=\"x\"/>"), "");
  EXPECT_EQ(topo::find_unsafe_xml("<!-- <a nodeset='x'/> --><a name=\"nodeset='x'\"/>"), "");
  EXPECT_EQ(topo::find_unsafe_xml("<a info=\"cpuset\" value=\"x\"/>"), "");
  EXPECT_EQ(topo::find_unsafe_xml("<a cpuset=\"0xf...f,,0x0\"/>"), "");
  // Text that a parser could read differently from the check is refused, not skipped.
  has("<?xml version=\"1.0\"?>\n<!DOCTYPE topology SYSTEM \"><!--\">\n<topology version=\"2.0\"><a nodeset=\",x1\"/>",
      "nodeset=\",x1\" is not an hwloc bitmap");  // the '>' in the literal ends nothing
  has("<!DOCTYPE topology SYSTEM \"hwloc2.dtd\"><!--\n<a nodeset=\",x1\"/>\n-->", "markup after the DOCTYPE on its line");
  has("<?xml version=\"1.0\"?><!--\n-->", "markup after the XML declaration on its line");
  has("<?xml version=\"1.0\" encoding=\"UTF-7\"?>\n<topology/>", "an encoding other than UTF-8");
  EXPECT_EQ(topo::find_unsafe_xml("<?xml version=\"1.0\" encoding=\"utf-8\"?>\n<topology/>"), "");
  has("<topology>\n<!-- no end", "line 2: a comment that does not end");
  has("<topology>\n<a b=\"x", "line 2: an attribute value that does not end");
  has("<object type=\"Machine\" subtype=\"><object type=\"PU\" cpuset=\",x1\"/>", "holds a raw '<' or '>'");
  has(std::string("<topology>\0<a/>", 15), "a NUL byte");
  // The format's version is the root's, as hwloc reads it, in the form hwloc writes.
  const std::string lone_group = "\n<object type=\"Machine\"><object type=\"Group\" cpuset=\"0x3\"/></object>";
  has("<topology version=\" 2.0\">" + lone_group, "is not a version hwloc writes");
  has("<topology version=\"&#50;.0\">" + lone_group, "holds a reference other than &quot;");
  has("<topology version=\"2.0\"><info name=\"a\" value=\"b\"><topology version=\"1.0\"/></info>" + lone_group,
      "has cpuset but no complete_cpuset");
  EXPECT_EQ(topo::find_unsafe_xml("<topology version=\"01.0\">" + lone_group), "");
  // "<!-->" opens a comment and does not close it; an internal DTD subset is refused.
  has("<topology version=\"2.0\"><!--> <topology version=\"1.0\"/> -->" + lone_group, "has cpuset but no complete_cpuset");
  has("<?xml version=\"1.0\"?>\n<!DOCTYPE topology [<!-- it's -->]>\n<topology/>", "an internal DTD subset");
  EXPECT_EQ(topo::find_unsafe_xml("<?xml-stylesheet href=\"a\"?><topology/>"), "");
}

// Indexes and bitmaps that would make hwloc size a set to billions of bits (a PU or a NUMA node
// at os_index 4294967294 took 512 MiB) are refused, naming the line; other objects' indexes are
// not bits and are left alone, and the largest index and bitmap allowed still pass.
TEST(BadTopologyInputExtra, BitmapCheckRefusesHugeIndexes) {
  const auto object = [](const std::string &type, const std::string &os_index) {
    return topo::find_unsafe_xml("<topology version=\"2.0\"><object type=\"Machine\">\n<object type=\"" + type + "\" os_index=\"" +
                                       os_index + "\" cpuset=\"0x1\" complete_cpuset=\"0x1\"/>\n</object></topology>\n");
  };
  for (const char *type : {"PU", "NUMANode", "pu", "Node", "Unknown"})
    for (const char *index : {"4294967294", "1048576", "-2", "+1", " 1", "0x10", "", "99999999"}) {
      const std::string msg = object(type, index);
      EXPECT_NE(msg.find(std::string("line 2: <object type=\"") + type + "\"> has os_index=\"" + index + "\""), std::string::npos)
          << type << " " << index << ": " << msg;
    }
  for (const char *type : {"PU", "NUMANode"})
    for (const char *index : {"0", "1048575", "2068"}) EXPECT_EQ(object(type, index), "") << type << " " << index;
  for (const char *type : {"Core", "Package", "Group", "L3Cache", "OSDev"}) EXPECT_EQ(object(type, "4294967294"), "") << type;
  // The type may come after the index; a PU or NUMA node without one gets 4294967295 from hwloc.
  EXPECT_NE(topo::find_unsafe_xml("<object type=\"Machine\"><object os_index=\"4294967294\" type=\"PU\"/>")
                .find("has os_index=\"4294967294\""),
            std::string::npos);
  for (const char *type : {"PU", "NUMANode"}) {
    const std::string msg = topo::find_unsafe_xml(std::string("<topology version=\"2.0\">\n<object type=\"") + type +
                                                        "\" cpuset=\"0x1\" complete_cpuset=\"0x1\"/>");
    EXPECT_NE(msg.find(std::string("line 2: <object type=\"") + type + "\"> has no os_index"), std::string::npos) << msg;
  }
  EXPECT_EQ(topo::find_unsafe_xml("<object type=\"Machine\"><object type=\"Core\" cpuset=\"0x1\" complete_cpuset=\"0x1\"/>"), "");
  // A distance matrix of more values than the text could hold (hwloc allocates them first).
  const auto distances = [](const std::string &element, const std::string &nbobjs) {
    return topo::find_unsafe_xml("<topology version=\"2.0\">\n<" + element + " type=\"NUMANode\" nbobjs=\"" + nbobjs +
                                       "\" kind=\"5\" indexing=\"os\">\n<indexes length=\"4\">0 1 </indexes>\n<u64values length=\"12\">10 21 21 10 </u64values>\n</" +
                                       element + ">\n" + std::string(200, ' ') + "</topology>\n");
  };
  EXPECT_EQ(distances("distances2", "2"), "");
  for (const char *element : {"distances2", "distances2hetero", "distances"})
    for (const char *nbobjs : {"8192", "65537", "-1", "", "1e3"}) {
      const std::string msg = distances(element, nbobjs);
      EXPECT_NE(msg.find(std::string("line 2: <") + element + "> has nbobjs=\"" + nbobjs + "\""), std::string::npos) << msg;
    }
  // 32,768 words (bits up to 2^20 - 1) pass; one more is refused.
  std::string words = "0x1";
  for (int i = 1; i < 32768; ++i) words += ",";
  const auto nodeset = [](const std::string &value) {
    return topo::find_unsafe_xml("<object type=\"Machine\"\n nodeset=\"" + value + "\" complete_nodeset=\"0x1\"/>");
  };
  EXPECT_EQ(nodeset(words), "");
  const std::string msg = nodeset(words + ",");
  EXPECT_NE(msg.find("line 2: nodeset=\"0x1,,,"), std::string::npos) << msg;
  EXPECT_NE(msg.find("has more than 32768 words"), std::string::npos) << msg;
}

// Text that hwloc's own reader (without the libxml2 plugin) reads otherwise than libxml2 and the
// check, or on which hwloc 2.9 asserts, found by a review of its import: a reference it does not
// decode (it stops reading the tag's attributes there, so an os_index after it is never read),
// an XML declaration or DOCTYPE over several lines (it skips one line), an attribute given
// twice (a v1 Cache that is also a PU made it assert), and a root object it drops (it asserts).
TEST(BadTopologyInputExtra, BitmapCheckRefusesWhatHwlocsReadersReadApart) {
  const auto has = [](const std::string &xml, const std::string &fragment) {
    const std::string msg = topo::find_unsafe_xml(xml);
    EXPECT_NE(msg.find(fragment), std::string::npos) << xml << " -> " << msg;
  };
  const std::string machine = "<topology version=\"2.0\">\n<object type=\"Machine\">\n";
  has(machine + "<object type=\"NUMANode\" nodeset=\"0x1\" complete_nodeset=\"0x1\" name=\"&#65;\" os_index=\"0\"/>",
      "line 3: name=\"&#65;\" holds a reference other than");
  for (const char *ref : {"&#x41;", "&apos;", "&", "&amp", "a&b;"})
    has(machine + "<info name=\"n\" value=\"" + ref + "\"/>", "holds a reference other than");
  EXPECT_EQ(topo::find_unsafe_xml(machine + "<info name=\"n\" value=\"&quot;&lt;&gt;&amp;&#9;&#10;&#13;\"/>"), "");
  has("<?xml version=\"1.0\" encoding=\"UTF-8\"\n<topology version=\"2.0\">\n?>", "line 1: an XML declaration on more than one line");
  has("<!DOCTYPE topology SYSTEM \"hwloc2.dtd\n<topology version=\"2.0\">\n\">", "line 1: a DOCTYPE on more than one line");
  // hwloc 2.9's libxml2 reader crashed (strcmp of a NULL system identifier) on these.
  for (const char *dt : {"<!DOCTYPE topology>", "<!DOCTYPE topolog>", "<!DOCTYPE topology SYSTEM>", "<!DOCTYPE topology SYSTEMx \"a\">",
                         "<!DOCTYPE topology PUBLIC \"a\" \"b\">"})
    has(std::string(dt) + "\n" + machine, "line 1: a DOCTYPE without SYSTEM and its identifier");
  EXPECT_EQ(topo::find_unsafe_xml("<!DOCTYPE topology SYSTEM 'hwloc.dtd'>\n" + machine), "");
  EXPECT_EQ(topo::find_unsafe_xml("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<!DOCTYPE topology SYSTEM \"hwloc2.dtd\">\n" + machine), "");
  has("<topology>\n<object type=\"Machine\">\n<object type=\"Cache\" type=\"PU\" os_index=\"0\"/>", "line 3: attribute \"type\" given twice");
  has(machine + "<object type=\"Core\" os_index=\"0\" os_index=\"1\"/>", "attribute \"os_index\" given twice");
  // The root object: a Machine (a System or a NUMANode in a v1 file).
  has("<topology>\n<object type=\"Group\" cpuset=\"0x1\"/>\n</topology>", "line 2: the first <object> is a \"Group\"");
  has("<topology version=\"2.0\">\n<object type=\"PCIDev\" pci_busid=\"zz\"/>", "the first <object> is a \"PCIDev\"");
  has("<topology version=\"2.0\">\n<object type=\"System\"/>", "the first <object> is a \"System\"");
  for (const char *root : {"Machine", "System", "NUMANode"}) {
    const std::string os_index = std::string(root) == "NUMANode" ? " os_index=\"0\"" : "";
    EXPECT_EQ(topo::find_unsafe_xml(std::string("<topology>\n<object type=\"") + root + "\"" + os_index + "/>"), "") << root;
  }
}
