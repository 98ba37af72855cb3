// Fuzz target: the URL parsers of the peers tollgate connects to, and the one
// redaction every message about them goes through: ParseRedisUrl
// (src/redis/redis_url.cc), ParseRedisClusterUrl (redis_cluster_store.cc),
// CheckStoreSpec / StoreSchemeOf (src/runtime/store_spec.cc), ParseEtcdUrl
// (src/runtime/etcd_watch.cc), ParseCollectorUrl (src/trace/exporter.cc) and
// base::RedactUrl / RedactUrlPiece (src/base/redact.cc).
//
// Input: a parser byte (redis, rediss, redis-cluster, etcd, collector, store
// spec), a placement byte, 6 secret bytes, then the URL's text: user info up
// to a NUL, and the rest. Placement 0 puts the secret as the password
// ("scheme://USER:SECRET@REST"), 1 as a sensitive query value
// ("scheme://REST&token=SECRET"), otherwise there is none
// ("scheme://USER@REST" or the text as it is).
// Properties:
//   - the secret appears in no error message of any parser and not in
//     RedactUrl's form of the URL (unless the rest of the URL spells it);
//   - RedactUrl is printable ASCII and at most its bound plus "...";
//   - a collector URL that parses prints back ("http://" + Host + path) to the
//     same parts; an etcd URL that parses prints back (endpoints joined, key)
//     to the same endpoints and key.
#include <cstdint>
#include <string>
#include <string_view>

#include "base/redact.h"
#include "fuzz_input.h"
#include "runtime/etcd_watch.h"
#include "tollgate/redis_cluster_store.h"
#include "tollgate/redis_store.h"
#include "tollgate/store_spec.h"
#include "trace/exporter.h"

namespace {

using tollgate::fuzz::Quote;

void CheckHidden(const std::string& text, const std::string& secret, const std::string& url,
                 const char* where) {
  FUZZ_CHECK(text.find(secret) == std::string::npos,
             std::string(where) + " shows the secret of " + Quote(url) + ": " + Quote(text));
}

void CheckRedactedForm(std::string_view url) {
  const std::string shown = tollgate::base::RedactUrl(url, 100);
  FUZZ_CHECK(shown.size() <= 103, "RedactUrl longer than its bound: " + Quote(shown));
  for (char c : shown)
    FUZZ_CHECK(c >= 0x20 && c < 0x7f, "RedactUrl not printable: " + Quote(shown));
}

void CheckCollectorRoundTrip(std::string_view url) {
  auto parsed = tollgate::trace::ParseCollectorUrl(url);
  if (!parsed.ok()) return;
  auto again = tollgate::trace::ParseCollectorUrl("http://" + parsed->host_header + parsed->path);
  FUZZ_CHECK(again.ok() && again->host == parsed->host && again->port == parsed->port &&
                 again->path == parsed->path && again->host_header == parsed->host_header,
             "a collector URL does not print back: " + Quote(url));
}

void CheckEtcdRoundTrip(std::string_view url) {
  auto parsed = tollgate::etcd::ParseEtcdUrl(url);
  if (!parsed.ok()) return;
  std::string printed = "etcd://";
  for (size_t i = 0; i < parsed->endpoints.size(); ++i) {
    // An IPv6 host prints in brackets, as it must be written (issue 35's endpoints).
    const std::string& host = parsed->endpoints[i].first;
    const bool v6 = host.find(':') != std::string::npos;
    printed += (i ? "," : "") + (v6 ? "[" + host + "]" : host) + ":" +
               std::to_string(parsed->endpoints[i].second);
  }
  auto again = tollgate::etcd::ParseEtcdUrl(printed + parsed->key);
  FUZZ_CHECK(again.ok() && again->endpoints == parsed->endpoints && again->key == parsed->key,
             "an etcd URL does not print back: " + Quote(url));
}

// Every parser's error for `url` (those that apply to its parser byte).
std::string Errors(uint8_t parser, const std::string& url) {
  std::string out;
  auto add = [&out](const tollgate::Status& s) {
    if (!s.ok()) out += s.message() + "\n";
  };
  switch (parser) {
    case 0:
    case 1:
      add(tollgate::ParseRedisUrl(url).status());
      break;
    case 2:
      add(tollgate::ParseRedisClusterUrl(url).status());
      break;
    case 3:
      add(tollgate::etcd::ParseEtcdUrl(url).status());
      CheckEtcdRoundTrip(url);
      break;
    case 4:
      add(tollgate::trace::ParseCollectorUrl(url).status());
      CheckCollectorRoundTrip(url);
      break;
    default: {
      add(tollgate::StoreSchemeOf(url).status());
      tollgate::StoreSpec spec;
      spec.url = url;
      add(tollgate::CheckStoreSpec(spec));
    }
  }
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  tollgate::fuzz::Input in(data, size);
  const uint8_t parser = in.Byte() % 6;
  const uint8_t placement = in.Byte() % 3;
  // "ZZ" and six of [A-Z0-9]: text no message spells by itself.
  std::string secret = "ZZ";
  for (int i = 0; i < 6; ++i) secret += "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"[in.Byte() % 36];
  const std::string user(in.Until('\0'));
  const std::string rest(in.Rest());
  static constexpr std::string_view kSchemes[] = {"redis://", "rediss://", "redis-cluster://",
                                                  "etcd://",  "http://",   ""};
  const std::string scheme(kSchemes[parser]);
  std::string url;
  if (placement == 0) {
    url = scheme + user + ":" + secret + "@" + rest;
  } else if (placement == 1) {
    url = scheme + rest + (rest.find('?') == std::string::npos ? "?" : "&") + "token=" + secret;
  } else {
    url = scheme + user + (user.empty() ? "" : "@") + rest;
  }
  CheckRedactedForm(url);
  CheckRedactedForm(std::string(user) + "\n" + rest);  // any bytes at all
  const std::string errors = Errors(parser, url);
  if (placement == 2 || (user + rest).find(secret) != std::string::npos) return 0;
  CheckHidden(tollgate::base::RedactUrl(url), secret, url, "RedactUrl");
  CheckHidden(errors, secret, url, "an error message");
  return 0;
}
