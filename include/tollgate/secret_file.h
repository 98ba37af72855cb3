// ReadSecretFile: the one strict reader of a secret kept in a file (tollgated's
// admin tokens and identity hash key, the etcd policy source's password).
//
// The file must hold exactly one non-empty line of at most kMaxSecretFileBytes,
// optionally ended by "\n" or "\r\n"; an empty file, a blank first line, a
// second line or a larger file is an error that says why. What the line may
// contain is the caller's rule (tollgated's CheckSecret for its tokens).
//
// Implemented in tollgate_base (src/base/secret_file.cc).
//
// Thread safety: a free function without state. Errors: returned reasons,
// never the secret itself.
#ifndef TOLLGATE_SECRET_FILE_H_
#define TOLLGATE_SECRET_FILE_H_

#include <cstddef>
#include <string>

namespace tollgate {

inline constexpr size_t kMaxSecretFileBytes = 1024;

// Reads the single line of `path` into *secret. False with *why ("the first
// line is blank", "has more than one line", ...) when the file is not one line.
bool ReadSecretFile(const std::string& path, std::string* secret, std::string* why);

}  // namespace tollgate

#endif  // TOLLGATE_SECRET_FILE_H_
