// SPDX-License-Identifier: Apache-2.0
// Loading hwloc topologies on our own handle (live machine, XML file, XML buffer), with errors
// that name the file and the reason. hwloc itself prints nothing about a bad XML file unless the
// user set HWLOC_XML_VERBOSE, so our one-line error is the only output.
#include "lib/topology/hwloc_load.hpp"
#include "lib/topology/xml_precheck.hpp"

#include "lib/core/read_upto.hpp"

#include <cxltier/error.hpp>

#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <sstream>
#include <sys/stat.h>
#include <unistd.h>

namespace cxltier::topo {

HwlocTopology &HwlocTopology::operator=(HwlocTopology &&o) noexcept {
  if (this != &o) {
    if (t_) hwloc_topology_destroy(t_);
    t_ = o.t_;
    o.t_ = nullptr;
  }
  return *this;
}

HwlocTopology::~HwlocTopology() {
  if (t_) hwloc_topology_destroy(t_);
}

namespace {

// The filters every load uses: memory-side caches are evidence (Optane Memory Mode, KNL
// hybrid), and the important I/O objects carry DAX devices and CXL memory devices that are not
// onlined as NUMA nodes, which we report. Everything else about I/O is left out.
HwlocTopology new_handle(const std::string &what) {
  hwloc_topology_t t = nullptr;
  if (hwloc_topology_init(&t) != 0)
    fail(CXLT_ERROR_TOPOLOGY, "cannot load topology ", what, ": hwloc_topology_init failed: ", std::strerror(errno));
  HwlocTopology h(t);
  hwloc_topology_set_type_filter(t, HWLOC_OBJ_MEMCACHE, HWLOC_TYPE_FILTER_KEEP_ALL);
  hwloc_topology_set_io_types_filter(t, HWLOC_TYPE_FILTER_KEEP_IMPORTANT);
  return h;
}

std::string quoted(const std::string &path) { return "'" + path + "'"; }

// hwloc 2.9 aborts, crashes or allocates hundreds of MiB on some malformed files instead of
// refusing them (xml_precheck.hpp), so they are refused here first.
void refuse_unsafe_xml(std::string_view xml, const std::string &what) {
  const std::string bad = find_unsafe_xml(xml);
  if (!bad.empty()) fail(CXLT_ERROR_TOPOLOGY, "cannot load topology ", what, ": malformed hwloc XML: ", bad);
}

}  // namespace

std::string xml_format_version(std::string_view head) {
  size_t at = head.find("<topology");
  if (at == std::string_view::npos) return {};
  size_t end = head.find('>', at);
  std::string_view tag = head.substr(at, end == std::string_view::npos ? std::string_view::npos : end - at);
  size_t v = tag.find("version=");
  if (v == std::string_view::npos) return "1.0";  // hwloc 1.x files have no version attribute
  v += 8;
  if (v >= tag.size() || (tag[v] != '"' && tag[v] != '\'')) return {};
  char q = tag[v];
  size_t close = tag.find(q, v + 1);
  if (close == std::string_view::npos) return {};
  return std::string(tag.substr(v + 1, close - v - 1));
}

const std::string &hwloc_runtime_version() {
  static const std::string version = [] {
    std::string v;
    hwloc_topology_t t = nullptr;
    if (hwloc_topology_init(&t) == 0) {
      if (hwloc_topology_set_synthetic(t, "pu:1") == 0 && hwloc_topology_load(t) == 0) {
        const char *s = hwloc_obj_get_info_by_name(hwloc_get_root_obj(t), "hwlocVersion");
        if (s) v = s;
      }
      hwloc_topology_destroy(t);
    }
    if (v.empty()) {  // fall back to the API version, which is what the library promises
      unsigned api = hwloc_get_api_version();
      std::ostringstream os;
      os << "api " << (api >> 16) << '.' << ((api >> 8) & 0xff) << '.' << (api & 0xff);
      v = os.str();
    }
    return v;
  }();
  return version;
}

HwlocTopology load_live() {
  // GPU memory NUMA nodes (POWER9+V100, Grace-Hopper) are hidden by hwloc unless asked for; a
  // value the user set wins.
  setenv("HWLOC_KEEP_NVIDIA_GPU_NUMA_NODES", "1", 0);
  HwlocTopology h = new_handle("of this machine");
  // On the live machine, OS devices (DAX, CXL memory devices) come from the Linux backend; the
  // PCI tree would add nothing we use, costs a PCI scan, and hwloc's PCI plugin (libpciaccess)
  // leaks at exit, which fails sanitizer builds of every program that discovers tiers.
  hwloc_topology_set_type_filter(h.get(), HWLOC_OBJ_PCI_DEVICE, HWLOC_TYPE_FILTER_KEEP_NONE);
  hwloc_topology_set_type_filter(h.get(), HWLOC_OBJ_BRIDGE, HWLOC_TYPE_FILTER_KEEP_NONE);
  if (hwloc_topology_load(h.get()) != 0)
    fail(CXLT_ERROR_TOPOLOGY, "cannot load the topology of this machine: hwloc_topology_load failed: ",
         std::strerror(errno));
  if (!hwloc_topology_is_thissystem(h.get())) {
    // hwloc reads these at load time whatever we ask; say which one so the user can unset it.
    std::string which;
    for (const char *var : {"HWLOC_XMLFILE", "HWLOC_SYNTHETIC", "HWLOC_FSROOT", "HWLOC_THISSYSTEM"}) {
      if (const char *val = std::getenv(var)) {
        which = std::string(var) + "=" + val;
        break;
      }
    }
    fail(CXLT_ERROR_TOPOLOGY, "cannot load the topology of this machine: hwloc loaded another topology instead",
         which.empty() ? std::string() : " because " + which + " is set",
         " (unset it and pass the file with --topology FILE; HWLOC_XMLFILE also steers memkind)");
  }
  return h;
}

HwlocTopology load_xml_file(const std::string &path) {
  const std::string name = quoted(path);
  // Opened first and checked on the descriptor (a check of the path before opening it could
  // see another file than the one opened). O_NONBLOCK: a FIFO opens at once, without waiting
  // for a writer (forever, from a shell typo), and is refused below; hwloc reads our copy of
  // the text, so a pipe or a device could not be read twice anyway.
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) {
    if (errno == ENOENT) fail(CXLT_ERROR_TOPOLOGY, "cannot load topology ", name, ": no such file");
    fail(CXLT_ERROR_TOPOLOGY, "cannot load topology ", name, ": cannot be read: ", std::strerror(errno));
  }
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  struct stat st {};
  if (::fstat(fd, &st) != 0) fail(CXLT_ERROR_TOPOLOGY, "cannot load topology ", name, ": ", std::strerror(errno));
  if (S_ISDIR(st.st_mode)) fail(CXLT_ERROR_TOPOLOGY, "cannot load topology ", name, ": is a directory, not an hwloc XML file");
  if (!S_ISREG(st.st_mode))
    fail(CXLT_ERROR_TOPOLOGY, "cannot load topology ", name,
         ": not a regular file (a pipe or a device; write the XML to a file)");
  std::string text;
  const auto read_to = [&](size_t upto) {
    if (const int err = read_upto(fd, text, upto); err != 0)
      fail(CXLT_ERROR_TOPOLOGY, "cannot load topology ", name, ": read error: ", std::strerror(err));
  };
  read_to(4096);  // the head: a file that is no hwloc XML is refused before the rest is read
  const std::string head = text;
  if (head.empty()) fail(CXLT_ERROR_TOPOLOGY, "cannot load topology ", name, ": the file is empty");
  size_t first = head.find_first_not_of(" \t\r\n");
  if (first == std::string::npos) fail(CXLT_ERROR_TOPOLOGY, "cannot load topology ", name, ": the file holds only blanks");
  if (head[first] != '<' && !(head.size() >= 3 && head.compare(0, 3, "\xEF\xBB\xBF") == 0))
    fail(CXLT_ERROR_TOPOLOGY, "cannot load topology ", name, ": not an XML file (it does not start with '<')");
  const std::string version = xml_format_version(head);
  if (version.empty()) fail(CXLT_ERROR_TOPOLOGY, "cannot load topology ", name, ": not an hwloc XML topology (no <topology> element)");
  const int major = std::atoi(version.c_str());
  if (major > 2) {
    fail(CXLT_ERROR_TOPOLOGY, "cannot load topology ", name, ": hwloc XML format version ", version,
         " cannot be read by the hwloc ", hwloc_runtime_version(),
         " this program runs with (it reads formats 1.x and 2.x; export the file as v2 XML)");
  }

  // The whole file: checked here (the check below), then given to hwloc as a buffer, so
  // that hwloc reads the text that was checked, not whatever the file holds by then. hwloc
  // wants the terminating NUL counted in an int length.
  if (static_cast<uint64_t>(st.st_size) >= static_cast<uint64_t>(INT_MAX))
    fail(CXLT_ERROR_TOPOLOGY, "cannot load topology ", name, ": ", static_cast<long long>(st.st_size),
         " bytes is more than hwloc reads");
  read_to(static_cast<size_t>(INT_MAX));
  if (text.size() != static_cast<size_t>(st.st_size))
    fail(CXLT_ERROR_TOPOLOGY, "cannot load topology ", name, ": read ", text.size(), " of its ",
         static_cast<long long>(st.st_size), " bytes (a read error, or the file changed while it was read)");
  refuse_unsafe_xml(text, name);

  HwlocTopology h = new_handle(name);  // text.size() is st.st_size, below INT_MAX
  if (hwloc_topology_set_xmlbuffer(h.get(), text.c_str(), static_cast<int>(text.size() + 1)) != 0 ||
      hwloc_topology_load(h.get()) != 0) {
    fail(CXLT_ERROR_TOPOLOGY, "cannot load topology ", name, ": malformed or truncated hwloc XML (hwloc ",
         hwloc_runtime_version(), " refused it: ", std::strerror(errno),
         "; HWLOC_XML_VERBOSE=1 makes hwloc say where)");
  }
  return h;
}

HwlocTopology load_xml_buffer(std::string_view xml, const std::string &what) {
  if (xml.empty()) fail(CXLT_ERROR_TOPOLOGY, "cannot load topology ", what, ": the buffer is empty");
  const std::string version = xml_format_version(xml.substr(0, 4096));
  if (version.empty()) fail(CXLT_ERROR_TOPOLOGY, "cannot load topology ", what, ": not an hwloc XML topology (no <topology> element)");
  if (std::atoi(version.c_str()) > 2)
    fail(CXLT_ERROR_TOPOLOGY, "cannot load topology ", what, ": hwloc XML format version ", version,
         " cannot be read by hwloc ", hwloc_runtime_version());
  refuse_unsafe_xml(xml, what);
  HwlocTopology h = new_handle(what);
  // hwloc wants the terminating NUL counted in the length.
  if (xml.size() >= static_cast<size_t>(INT_MAX))
    fail(CXLT_ERROR_TOPOLOGY, "cannot load topology ", what, ": ", xml.size(), " bytes is more than hwloc reads");
  std::string copy(xml);
  if (hwloc_topology_set_xmlbuffer(h.get(), copy.c_str(), static_cast<int>(copy.size() + 1)) != 0 ||
      hwloc_topology_load(h.get()) != 0)
    fail(CXLT_ERROR_TOPOLOGY, "cannot load topology ", what, ": malformed or truncated hwloc XML (hwloc refused it: ",
         std::strerror(errno), ")");
  return h;
}

}  // namespace cxltier::topo
