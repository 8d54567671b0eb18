// SPDX-License-Identifier: Apache-2.0
// The shared library's exported C symbols are exactly what include/cxltier/cxltier.h declares,
// in every build (with or without the CUDA tier): `nm -D --defined-only libcxltier.so` against
// the CXLT_API declarations of the header. A missing export (a declared function nobody
// defined, or one defined only in CUDA builds) or an extra one (an internal helper left
// visible) fails. In CUDA builds the whole export list (C++ too) equals that of a probe linked
// as without CUDA. Also: libcxltier.so never needs a CUDA library (the driver is dlopen'ed).
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <string>

namespace {

std::string run(const std::string &cmd, int *status) {
  std::string out;
  FILE *p = popen(cmd.c_str(), "r");
  if (p == nullptr) {
    *status = -1;
    return out;
  }
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  *status = pclose(p);
  return out;
}

std::string env_or_skip(const char *name) {
  const char *v = std::getenv(name);
  return v ? v : "";
}

std::set<std::string> declared_in_header(const std::string &path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string text = ss.str();
  std::set<std::string> names;
  // CXLT_API <return type, possibly over lines> cxlt_name(  -- [^;(] crosses newlines.
  static const std::regex decl(R"(CXLT_API[^;(#]*?\b(cxlt_[A-Za-z0-9_]+)\s*\()");
  for (auto it = std::sregex_iterator(text.begin(), text.end(), decl); it != std::sregex_iterator(); ++it)
    names.insert((*it)[1].str());
  return names;
}

}  // namespace

TEST(Symbols, ExportedCSymbolsAreExactlyTheHeaders) {
  const std::string src = env_or_skip("CXLT_SOURCE_ROOT"), build = env_or_skip("CXLT_BUILD_ROOT");
  if (src.empty() || build.empty()) GTEST_SKIP() << "CXLT_SOURCE_ROOT / CXLT_BUILD_ROOT not set (run through meson test)";
  const std::set<std::string> declared = declared_in_header(src + "/include/cxltier/cxltier.h");
  ASSERT_GT(declared.size(), 30u) << "the header parser found too few declarations";
  EXPECT_TRUE(declared.count("cxlt_gpu_count") && declared.count("cxlt_gpu_info"));
  EXPECT_TRUE(declared.count("cxlt_runtime_open") && declared.count("cxlt_version"));

  int status = 0;
  const std::string out = run("nm -D --defined-only '" + build + "/libcxltier.so' 2>&1", &status);
  ASSERT_EQ(status, 0) << "nm failed: " << out;
  std::set<std::string> exported;
  std::istringstream lines(out);
  for (std::string line; std::getline(lines, line);) {
    std::istringstream f(line);
    std::string addr, type, name;
    if (!(f >> addr >> type >> name)) continue;
    if (name.rfind("cxlt_", 0) == 0) exported.insert(name);
  }
  for (const std::string &n : declared) EXPECT_TRUE(exported.count(n)) << n << " is declared in cxltier.h but not exported";
  for (const std::string &n : exported) EXPECT_TRUE(declared.count(n)) << n << " is exported but cxltier.h does not declare it";
}

// Every dynamic symbol a library defines (C and mangled C++ names alike).
static std::set<std::string> exported_names(const std::string &lib, std::string *error) {
  int status = 0;
  const std::string out = run("nm -D --defined-only '" + lib + "' 2>&1", &status);
  std::set<std::string> names;
  if (status != 0) {
    *error = "nm failed on " + lib + ": " + out;
    return names;
  }
  std::istringstream lines(out);
  for (std::string line; std::getline(lines, line);) {
    std::istringstream f(line);
    std::string addr, type, name;
    if (f >> addr >> type >> name) names.insert(name);
  }
  return names;
}

// The CUDA build links, next to libcxltier.so, a probe made of the same core objects with
// gpu_off.cpp in place of the CUDA-only files (tests/gpu/meson.build): what a -Dcuda=disabled
// build exports. Both lists must be equal, C++ symbols included, not only the cxlt_* ones.
TEST(Symbols, TheExportsAreTheSameWithoutTheCudaTier) {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  // Sanitizer builds (at -O1) inline differently, so which std:: template instances the two
  // libraries export differs by build; the plain builds compare them (both CI build kinds).
  GTEST_SKIP() << "export sets of template instances depend on inlining in sanitizer builds";
#endif
  const std::string build = env_or_skip("CXLT_BUILD_ROOT"), probe = env_or_skip("CXLT_TEST_NOCUDA_PROBE");
  if (build.empty()) GTEST_SKIP() << "CXLT_BUILD_ROOT not set (run through meson test)";
  if (probe.empty())
    GTEST_SKIP() << "this build has no CUDA tier: it is the reference; the CUDA build compares itself with a library "
                    "linked like this one";
  std::string error;
  const std::set<std::string> with = exported_names(build + "/libcxltier.so", &error);
  ASSERT_TRUE(error.empty()) << error;
  const std::set<std::string> without = exported_names(probe, &error);
  ASSERT_TRUE(error.empty()) << error;
  ASSERT_GT(with.size(), 30u) << "too few exports read from libcxltier.so";
  for (const std::string &n : with) EXPECT_TRUE(without.count(n)) << n << " is exported only with the CUDA tier";
  for (const std::string &n : without) EXPECT_TRUE(with.count(n)) << n << " is exported only without the CUDA tier";
}

TEST(Symbols, TheLibraryNeedsNoCudaLibrary) {
  const std::string build = env_or_skip("CXLT_BUILD_ROOT");
  if (build.empty()) GTEST_SKIP() << "CXLT_BUILD_ROOT not set (run through meson test)";
  int status = 0;
  const std::string out = run("readelf -d '" + build + "/libcxltier.so' 2>&1", &status);
  ASSERT_EQ(status, 0) << "readelf failed: " << out;
  EXPECT_NE(out.find("(NEEDED)"), std::string::npos) << out;
  for (const char *lib : {"libcuda", "libcudart", "libnvidia"})
    EXPECT_EQ(out.find(lib), std::string::npos) << "libcxltier.so needs " << lib << ":\n" << out;
}
