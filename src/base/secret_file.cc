#include "tollgate/secret_file.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <string_view>

namespace tollgate {

bool ReadSecretFile(const std::string& path, std::string* secret, std::string* why) {
  errno = 0;
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    *why = std::string("cannot open: ") + std::strerror(errno ? errno : ENOENT);
    return false;
  }
  // One byte more than the longest accepted line and its CRLF tells "too long".
  std::string text;
  text.resize(kMaxSecretFileBytes + 3);
  in.read(text.data(), std::streamsize(text.size()));
  text.resize(size_t(in.gcount()));
  if (in.bad()) {
    *why = "cannot read (not a regular file?)";
    return false;
  }
  if (text.size() > kMaxSecretFileBytes + 2) {
    *why = "larger than " + std::to_string(kMaxSecretFileBytes) + " bytes";
    return false;
  }
  if (text.empty()) {
    *why = "is empty";
    return false;
  }
  std::string_view line(text);
  if (line.ends_with("\r\n")) {
    line.remove_suffix(2);
  } else if (line.ends_with('\n')) {
    line.remove_suffix(1);
  }
  const size_t eol = line.find_first_of("\r\n");
  if (line.empty() || eol == 0) {
    *why = "the first line is blank (the token must be on the first line)";
    return false;
  }
  if (eol != std::string_view::npos) {
    *why = "has more than one line (expected exactly one line: the secret)";
    return false;
  }
  *secret = std::string(line);
  return true;
}

}  // namespace tollgate
