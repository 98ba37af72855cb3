// Secrets tollgated reads from files (the admin tokens, the identity hash key)
// and how it compares them.
//
// Admin tokens are named and scoped (admin.tokens; docs/operations.md, "Admin
// tokens"): a `read` token serves every admin read, a `write` token also what
// changes state. AdminTokens::Match finds the token a request presents by
// comparing it with every configured token, so the time it takes says nothing
// about which token matched or how much of one. A token's name, never its
// value, is what audit lines and errors show.
//
// ReadSecretFile() is the one strict reader for both: the file must hold
// exactly one non-empty line, optionally ended by "\n" or "\r\n"; an empty
// file, a blank first line or a second line is an error that says why. What
// the line may contain is CheckSecret()'s job (the same rules for a secret
// given inline in the config), so a token is accepted or refused alike from
// the flag, the config file or the config's inline value.
//
// Thread safety: free functions without state. Errors: returned reasons,
// never the secret itself.
#ifndef TOLLGATE_SERVER_SECRETS_H_
#define TOLLGATE_SERVER_SECRETS_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tollgate/secret_file.h"

namespace tollgate::server {

// Shorter secrets are refused: a bearer token or a hash key must not be guessable.
inline constexpr size_t kMinSecretBytes = 16;
inline constexpr size_t kMaxSecretBytes = kMaxSecretFileBytes;

// Reads the single line of `path` into *secret (tollgate/secret_file.h, which
// the etcd policy source's password file is read with too).
using ::tollgate::ReadSecretFile;

// "" when `secret` is acceptable: kMinSecretBytes..kMaxSecretBytes of visible
// ASCII (no spaces, tabs or control bytes). Otherwise the reason.
std::string CheckSecret(std::string_view secret);

// True for a listen host only this machine can reach: 127.0.0.0/8, ::1,
// ::ffff:127.x.x.x and "localhost". Any other name counts as reachable.
bool IsLoopbackHost(std::string_view host);

// Compares two secrets in time independent of where they differ and of their
// lengths (SHA-256 of each, then a constant-time compare of the digests).
bool SecretEquals(std::string_view presented, std::string_view expected);

// What an admin token may do. kRead: every admin read (GET and HEAD routes,
// POST /v1/keys/get). kWrite: also what changes state (reload, PUT
// /v1/policy, key set and reset, rollback trip and clear), per-item limits on
// /v1/decide, and identities shown raw (?raw=1).
enum class AdminScope : uint8_t { kRead, kWrite };
std::string_view AdminScopeName(AdminScope scope);
bool ParseAdminScope(std::string_view name, AdminScope* scope);

// One admin token. `name`: 1-64 of [A-Za-z0-9_.-], unique; the legacy single
// token (admin.token, admin.token_file, --admin-token-file) is named "admin"
// with scope write.
struct AdminToken {
  std::string name;
  AdminScope scope = AdminScope::kRead;
  std::string file;    // where `secret` was read from; "" when given inline
  std::string secret;  // the token itself (CheckSecret's rules)
};
bool IsAdminTokenName(std::string_view name);

// The admin tokens a listener accepts. Immutable once built; shared by the
// snapshots that use it.
class AdminTokens {
 public:
  AdminTokens() = default;
  explicit AdminTokens(std::vector<AdminToken> tokens);

  bool empty() const { return tokens_.empty(); }
  const std::vector<AdminToken>& tokens() const { return tokens_; }
  // The token whose "Bearer <secret>" is `authorization` (an Authorization
  // field value), or null (none sent, or no match). Every token is compared
  // (SecretEquals), whatever matched first.
  const AdminToken* Match(std::optional<std::string_view> authorization) const;

 private:
  std::vector<AdminToken> tokens_;
  std::vector<std::string> bearers_;  // "Bearer <secret>", by index
};

// "" when `tokens` can serve together: names unique, secrets distinct (a
// secret two names share would make the audit's name a guess). Otherwise why.
std::string CheckAdminTokenSet(const std::vector<AdminToken>& tokens);

// Reads every token's file again (a rotation on reload): true with *tokens
// holding the new secrets, or false with *why naming the file and the reason
// (then *tokens is unchanged). Inline tokens are kept as they are.
bool RereadAdminTokens(std::vector<AdminToken>* tokens, std::string* why);

}  // namespace tollgate::server

#endif  // TOLLGATE_SERVER_SECRETS_H_
