// IdentityRedactor: how client identities (API keys, IP addresses, JWT
// subjects, any rule's key value) appear in what a front end shows operators:
// tollgated's GET /v1/top, GET /v1/explain, rejection, access and gateway
// failure logs.
//
// By default an identity is shown as "hmac:" + the first 16 hex digits of
// HMAC-SHA256(key, identity): the same identity gives the same text in every
// output (so a log line, /v1/top and explain can be matched up) without
// revealing it. The key is random per process unless configured
// (identities.hash_key_file), which makes the hashes stable across restarts
// and across a fleet. Raw identities are shown only when the operator asks:
// identities.raw in the config, or ?raw=1 on an admin endpoint when the admin
// listener has a token.
//
// Thread safety: immutable after construction; safe to share. Implemented in
// tollgate_base (src/base/identity_redactor.cc).
#ifndef TOLLGATE_IDENTITY_REDACTOR_H_
#define TOLLGATE_IDENTITY_REDACTOR_H_

#include <string>
#include <string_view>

namespace tollgate {

class IdentityRedactor {
 public:
  // `key` empty: a random key for this process. `raw`: show identities as they are.
  IdentityRedactor(std::string_view key, bool raw);
  IdentityRedactor() : IdentityRedactor("", false) {}

  // "hmac:0123456789abcdef" for any identity (the empty one too).
  std::string Hash(std::string_view identity) const;
  // What an output shows: the identity itself when raw (configured, or asked
  // for by `raw_requested`), its hash otherwise.
  std::string Show(std::string_view identity, bool raw_requested = false) const;
  // For log lines: the hash, or (raw) the identity bounded and escaped (ClientLogText,
  // tollgate/log_text.h).
  std::string ShowInLog(std::string_view identity) const;
  bool raw() const { return raw_; }

 private:
  std::string key_;
  bool raw_;
};

}  // namespace tollgate

#endif  // TOLLGATE_IDENTITY_REDACTOR_H_
