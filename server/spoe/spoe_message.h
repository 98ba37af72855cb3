// The SPOE agent's two translations, without I/O: an SPOP message (what
// HAProxy's `spoe-message` sends) into the request the Enforcer decides, and
// a decision into the set-var actions of the ACK.
//
// The message's arguments, by name (docs/haproxy.md; unnamed, unknown and
// NULL arguments are ignored):
//   method   string   required: the request's method
//   path     string   required: the request path (normalised as the gateway
//                     normalises it, tollgate/request.h NormalizePath)
//   query    string   the query string, without '?'
//   src      ipv4/ipv6 or string: the client address (the rules' ip:address)
//   headers  binary   the whole header block, as HAProxy's req.hdrs_bin gives it
//   host     string   a Host header (when the block has none)
//   hdr_<name> string one header <name> (when the block is not sent)
// A message that breaks these rules is no decision: RequestFromMessage says
// why, and the agent answers with only the `message_error` variable set.
//
// The variables of an answer (scope txn; HAProxy adds its var-prefix):
//   deny (bool), status (int: 200, 429, 503), retry_after (int, seconds, when
//   sent), rule (the denying rule), delay_ms (int, a shaping rule's wait),
//   and one string h_<name> per response header the decision carries (the
//   name lower case, '-' as '_': h_ratelimit, h_ratelimit_policy,
//   h_retry_after, h_x_ratelimit_reason, h_tollgate_unenforced...).
//
// Views: a SpoeRequest points into the message's bytes (and owns the texts
// it had to build); valid as long as they are. Thread safety: pure functions.
#ifndef TOLLGATE_SERVER_SPOE_SPOE_MESSAGE_H_
#define TOLLGATE_SERVER_SPOE_SPOE_MESSAGE_H_

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "server/spoe/spop.h"
#include "tollgate/policy.h"
#include "tollgate/request.h"

namespace tollgate::spop {

// At most this many header fields in a request, from the block and hdr_ args.
inline constexpr size_t kMaxRequestHeaders = 128;

struct SpoeRequest {
  std::string_view method;
  std::string path;  // normalised
  std::string_view query;
  std::string peer;  // "" when `src` was not sent
  std::vector<HeaderPair> headers;
  RequestView View() const;
};

// Fills *out from `message`; "" when it can be decided, else why not
// ("path: missing", "headers: malformed header block").
std::string RequestFromMessage(const Message& message, SpoeRequest* out);

// The answer's actions for `outcome`, within `budget` payload bytes: the
// verdict's variables always (they take well under 256 bytes), then each
// header's while it fits (a header that does not fit is left out).
void ActionsFromOutcome(const CheckOutcome& outcome, size_t budget, ActionList* out);

// The variable carrying header `name`: "h_" + lower case, '-' as '_'; ""
// when the name has a byte HAProxy refuses in a variable name.
std::string HeaderVariable(std::string_view name);

}  // namespace tollgate::spop

#endif  // TOLLGATE_SERVER_SPOE_SPOE_MESSAGE_H_
