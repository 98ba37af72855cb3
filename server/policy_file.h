// Internal: writing a policy back to its file, as the admin API's PUT does.
//
// ReplaceFileAtomically writes `text` to a new file beside the target and
// renames it over the target, so a reader (this server's file watch, another
// tollgated sharing the file, an editor) sees the old bytes or the new ones,
// never a mix. Symbolic links in `path` are resolved first: the file they point
// to is replaced and the links stay (an operator's /etc/tollgate/policy.json ->
// /srv/policies/v7.json keeps pointing where it did). A Kubernetes ConfigMap
// volume is read-only: the write fails, and the error says so.
//
// Thread safety: a free function; concurrent calls for one path must be
// serialised by the caller (the server's reload mutex).
#ifndef TOLLGATE_SERVER_POLICY_FILE_H_
#define TOLLGATE_SERVER_POLICY_FILE_H_

#include <string>
#include <string_view>

#include "tollgate/status.h"

namespace tollgate::server {

// kInternal naming the step and the OS error ("cannot create
// /etc/tollgate/.policy.json.tmp-123: Read-only file system").
Status ReplaceFileAtomically(const std::string& path, std::string_view text);

}  // namespace tollgate::server

#endif  // TOLLGATE_SERVER_POLICY_FILE_H_
