// Reading a file a policy names (a value file, a tenant table), confined to
// one directory.
//
// A policy is text an attacker may write (PUT /v1/policy, an etcd key), and
// its {"file": ...} names are hostile until checked (issue 29: a cidr file
// /proc/self/environ echoed the Redis password). ReadConfinedFile reads
// `name` only from inside `dir` (the policy file's directory, or the server's
// policy_value_dir):
//   - `name` is relative to `dir` (an absolute name is taken only when it
//     starts with `dir/`); an empty component, "." or ".." is refused, so a
//     name cannot climb out;
//   - `dir` is resolved once (realpath), then every component is opened with
//     openat(O_NOFOLLOW) from there: a symbolic link anywhere below `dir`,
//     to a file or a directory, is refused, never followed;
//   - the opened descriptor is checked with fstat (a regular file, at most
//     kMaxValueFileBytes) and fstatfs (never procfs or sysfs, even bind
//     mounted inside `dir`); a FIFO is opened non-blocking and refused;
//   - the read stops at kMaxValueFileBytes + 1 bytes.
// Errors name the file as the policy wrote it and say why; they never hold
// the file's bytes (callers report lines by number, not by content).
//
// Thread safety: a free function; no state.
#ifndef TOLLGATE_SRC_POLICY_VALUE_FILE_H_
#define TOLLGATE_SRC_POLICY_VALUE_FILE_H_

#include <string>

namespace tollgate {

// Reads `name` under `dir` ("" is the current directory) into *out. On
// failure returns false and sets *why ("<name>: is a symbolic link (not
// followed)", "<name>: is outside the policy's directory <dir>", ...).
bool ReadConfinedFile(const std::string& dir, const std::string& name, std::string* out,
                      std::string* why);

}  // namespace tollgate

#endif  // TOLLGATE_SRC_POLICY_VALUE_FILE_H_
