// SPDX-License-Identifier: Apache-2.0
// Test helper: a fresh directory under the system's temporary directory, removed with all its
// contents when the object goes (also after a test made the directory or files in it
// read-only).
#pragma once

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>
#include <system_error>

namespace cxlt_test {

class TempDir {
public:
  // The directory is named cxlt-<tag>-XXXXXX.
  explicit TempDir(const std::string &tag = "test") {
    std::string tmpl = (std::filesystem::temp_directory_path() / ("cxlt-" + tag + "-XXXXXX")).string();
    if (mkdtemp(tmpl.data()) == nullptr) throw std::runtime_error("mkdtemp failed for " + tmpl);
    path_ = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::permissions(path_, std::filesystem::perms::owner_all, std::filesystem::perm_options::add, ec);
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir &) = delete;
  TempDir &operator=(const TempDir &) = delete;

  const std::filesystem::path &path() const { return path_; }

  // The path of `name` inside the directory.
  std::string operator/(const std::string &name) const { return (path_ / name).string(); }

  // Writes `content` (bytes as they are) to `name` inside the directory; returns its path.
  std::string write(const std::string &name, const std::string &content) const {
    std::filesystem::path p = path_ / name;
    std::ofstream(p, std::ios::binary) << content;
    return p.string();
  }

private:
  std::filesystem::path path_;
};

}  // namespace cxlt_test
