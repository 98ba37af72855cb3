// Internal to the Runtime: writing a policy back to its file, as the admin API's PUT does.
//
// ReplaceFileAtomically writes `text` to a new file beside the target, fsyncs
// it, renames it over the target and fsyncs the directory, so a reader (this
// server's file watch, another tollgated sharing the file, an editor) sees the
// old bytes or the new ones, never a mix, and a crash after it returns keeps
// the new ones. The target must be a regular file: a symbolic link is refused
// (checked with fstatat(AT_SYMLINK_NOFOLLOW) in the opened directory, the temp
// file created with O_EXCL | O_NOFOLLOW), never followed to wherever it points
// (an operator who keeps /etc/tollgate/policy.json -> /srv/policies/v7.json
// names the real file as the policy to get write-back). A Kubernetes ConfigMap
// volume is read-only and made of links: the write fails, and the error says
// why. Under the packaged systemd unit (ProtectSystem=strict) the policy's
// directory must be writable (docs/operations.md, "Writing the policy back").
//
// ReadWholeFile reads a file of at most `max_bytes` (the bytes a PUT keeps to
// put back if the reload after the write fails).
//
// Thread safety: free functions; concurrent calls for one path must be
// serialised by the caller (the Runtime's reload mutex).
#ifndef TOLLGATE_SRC_RUNTIME_POLICY_FILE_H_
#define TOLLGATE_SRC_RUNTIME_POLICY_FILE_H_

#include <cstddef>
#include <string>
#include <string_view>

#include "tollgate/status.h"

namespace tollgate::runtime {

// kInvalidArgument for a target that is a symbolic link or not a regular
// file; kInternal naming the step and the OS error ("cannot create
// /etc/tollgate/.policy.json.tmp-123-0: Read-only file system").
Status ReplaceFileAtomically(const std::string& path, std::string_view text);

Result<std::string> ReadWholeFile(const std::string& path, size_t max_bytes);

}  // namespace tollgate::runtime

#endif  // TOLLGATE_SRC_RUNTIME_POLICY_FILE_H_
