// SPDX-License-Identifier: Apache-2.0
// libcxltier.so exports what lib/cxltier.map lets through, and that list is the committed one
// (tests/c_api/exports.txt, demangled names, one a line): a new or lost export shows up in a
// review as a change to that file. No std::, __gnu_cxx, nlohmann, toml++ or CLI11 template
// instance is ever exported, in any build.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <set>
#include <sstream>
#include <string>

namespace {

std::string env(const char *name) {
  const char *v = std::getenv(name);
  return v ? v : "";
}

// Demangled names of the dynamic symbols `lib` defines; *error says why when nm failed.
std::set<std::string> exported(const std::string &lib, std::string *error) {
  std::set<std::string> names;
  FILE *p = popen(("nm -D --defined-only -C '" + lib + "' 2>&1").c_str(), "r");
  if (p == nullptr) {
    *error = "popen failed";
    return names;
  }
  std::string out;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  if (pclose(p) != 0) {
    *error = "nm failed on " + lib + ": " + out;
    return names;
  }
  std::istringstream lines(out);
  for (std::string line; std::getline(lines, line);) {
    // "<address> <type> <name, which may hold blanks>"
    const size_t a = line.find(' '), b = a == std::string::npos ? a : line.find(' ', a + 1);
    if (b != std::string::npos) names.insert(line.substr(b + 1));
  }
  return names;
}

}  // namespace

TEST(Exports, NoTemplateInstanceOfTheStandardLibraryOrAThirdParty) {
  const std::string build = env("CXLT_BUILD_ROOT");
  if (build.empty()) GTEST_SKIP() << "CXLT_BUILD_ROOT not set (run through meson test)";
  std::string error;
  const std::set<std::string> names = exported(build + "/libcxltier.so", &error);
  ASSERT_TRUE(error.empty()) << error;
  ASSERT_GT(names.size(), 30u) << "too few exports read";
  for (const std::string &n : names) {
    // What the symbol is (parameter types may name std:: types): before the parameter list.
    const std::string what = n.substr(0, n.find('('));
    for (const char *bad : {"std::", "__gnu_cxx", "nlohmann::", "toml::", "CLI::"})
      EXPECT_EQ(what.find(bad), std::string::npos) << "exported: " << n;
    bool ours = what.rfind("cxlt_", 0) == 0 || what.rfind("cxltier::", 0) == 0;
    for (const char *prefix : {"typeinfo for cxltier::", "typeinfo name for cxltier::", "vtable for cxltier::"})
      ours = ours || what.rfind(prefix, 0) == 0;
    EXPECT_TRUE(ours) << "exported: " << n;
    EXPECT_EQ(what.find("::Impl::"), std::string::npos) << "an implementation class is exported: " << n;
    EXPECT_EQ(n.find("cxltier::fail"), std::string::npos) << "the internal fail() is exported: " << n;
  }
}

TEST(Exports, TheListIsTheCommittedOne) {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__) || defined(__clang__)
  // The committed list is GCC's at -O2: out-of-line copies of inline API functions differ by
  // compiler and optimisation level. The plain build compares; the test above runs everywhere.
  GTEST_SKIP() << "the committed list is the plain GCC build's";
#endif
  const std::string build = env("CXLT_BUILD_ROOT"), src = env("CXLT_SOURCE_ROOT");
  if (build.empty() || src.empty()) GTEST_SKIP() << "CXLT_BUILD_ROOT / CXLT_SOURCE_ROOT not set (run through meson test)";
  std::string error;
  const std::set<std::string> names = exported(build + "/libcxltier.so", &error);
  ASSERT_TRUE(error.empty()) << error;
  std::ifstream in(src + "/tests/c_api/exports.txt");
  ASSERT_TRUE(in) << "cannot read tests/c_api/exports.txt";
  std::set<std::string> committed;
  for (std::string line; std::getline(in, line);)
    if (!line.empty() && line[0] != '#') committed.insert(line);
  for (const std::string &n : names)
    EXPECT_TRUE(committed.count(n)) << "exported but not in tests/c_api/exports.txt: " << n;
  for (const std::string &n : committed)
    EXPECT_TRUE(names.count(n)) << "in tests/c_api/exports.txt but not exported: " << n;
  if (::testing::Test::HasFailure())
    ADD_FAILURE() << "if the change is intended: nm -D --defined-only -C libcxltier.so | cut -d' ' -f3- | sort -u "
                     "(after the header lines of tests/c_api/exports.txt)";
}
