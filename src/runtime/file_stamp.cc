#include "runtime/file_stamp.h"

#include <sys/stat.h>

#include <algorithm>
#include <filesystem>

namespace tollgate::runtime {

FileStamp StampFile(const std::string& path) {
  struct stat st;
  FileStamp f;
  if (::stat(path.c_str(), &st) != 0) return f;
  f.mtime_ns = int64_t(st.st_mtim.tv_sec) * 1'000'000'000 + st.st_mtim.tv_nsec;
  f.size = st.st_size;
  f.inode = st.st_ino;
  return f;
}

FileStamps StampFiles(const std::vector<std::string>& paths) {
  FileStamps out;
  for (const auto& p : paths) {
    std::error_code ec;
    if (!std::filesystem::is_directory(p, ec)) {
      out.emplace_back(p, StampFile(p));
      continue;
    }
    std::vector<std::string> names;
    for (std::filesystem::directory_iterator it(p, ec), end; !ec && it != end; it.increment(ec)) {
      std::string ext = it->path().extension().string();
      if (ext == ".yaml" || ext == ".yml") names.push_back(it->path().string());
    }
    std::sort(names.begin(), names.end());
    for (auto& n : names) {
      FileStamp st = StampFile(n);
      out.emplace_back(std::move(n), st);
    }
  }
  return out;
}

}  // namespace tollgate::runtime
