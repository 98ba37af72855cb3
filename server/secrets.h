// Secrets tollgated reads from files (the admin token, the identity hash key)
// and how it compares them.
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
#include <string>
#include <string_view>

namespace tollgate::server {

// Shorter secrets are refused: a bearer token or a hash key must not be guessable.
inline constexpr size_t kMinSecretBytes = 16;
inline constexpr size_t kMaxSecretBytes = 1024;

// Reads the single line of `path` into *secret. False with *why ("the first
// line is blank", "has more than one line", ...) when the file is not one line.
bool ReadSecretFile(const std::string& path, std::string* secret, std::string* why);

// "" when `secret` is acceptable: kMinSecretBytes..kMaxSecretBytes of visible
// ASCII (no spaces, tabs or control bytes). Otherwise the reason.
std::string CheckSecret(std::string_view secret);

// True for a listen host only this machine can reach: 127.0.0.0/8, ::1,
// ::ffff:127.x.x.x and "localhost". Any other name counts as reachable.
bool IsLoopbackHost(std::string_view host);

// Compares two secrets in time independent of where they differ and of their
// lengths (SHA-256 of each, then a constant-time compare of the digests).
bool SecretEquals(std::string_view presented, std::string_view expected);

}  // namespace tollgate::server

#endif  // TOLLGATE_SERVER_SECRETS_H_
