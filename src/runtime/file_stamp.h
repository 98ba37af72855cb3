// Internal to the Runtime: what the policy file watch compares between polls
// (Runtime::SourceChanged). A FileStamp is a file's modification time, size
// and inode: a replace by rename (ReplaceFileAtomically, an editor, a
// ConfigMap update) changes the inode even when time and size do not. A file
// that cannot be stat'ed has size -1. StampFiles stamps each listed file, and
// for a listed directory each *.yaml / *.yml in it, by name in order, so an
// added or removed file is a change too.
//
// Thread safety: free functions without state.
#ifndef TOLLGATE_SRC_RUNTIME_FILE_STAMP_H_
#define TOLLGATE_SRC_RUNTIME_FILE_STAMP_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace tollgate::runtime {

struct FileStamp {
  int64_t mtime_ns = 0;
  int64_t size = -1;
  uint64_t inode = 0;
  bool operator==(const FileStamp&) const = default;
};
using FileStamps = std::vector<std::pair<std::string, FileStamp>>;

FileStamp StampFile(const std::string& path);
FileStamps StampFiles(const std::vector<std::string>& paths);

}  // namespace tollgate::runtime

#endif  // TOLLGATE_SRC_RUNTIME_FILE_STAMP_H_
