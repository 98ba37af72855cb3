// Fuzz target: tollgated's config file (server/config.cc ParseServerConfig and
// ValidateServerConfig), with the listener and upstream address parsers.
//
// Input: the config JSON. Inputs that set a file field ("..._file") to a
// non-empty name are skipped: the parser reads those files, and a fuzzer must
// not read /dev/zero.
// Properties: every error has a path or a message; a config that validates
// yields enforcer options; ParseHostPort of HostPort::ToString() gives the same
// address back; an upstream URL that parses gives a Host field value and a
// base path that cannot break the request line or the header (no CTL, space).
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "fuzz_input.h"
#include "server/config.h"
#include "tollgate/store_spec.h"

namespace {

using tollgate::fuzz::Quote;

bool Clean(std::string_view s) {
  for (unsigned char c : s) {
    if (c <= 0x20 || c == 0x7f) return false;
  }
  return true;
}

void CheckHostPort(std::string_view text) {
  tollgate::server::HostPort hp;
  std::string why;
  if (!tollgate::server::ParseHostPort(text, &hp, &why)) {
    FUZZ_CHECK(!why.empty(), "refused without a reason: " + Quote(text));
    return;
  }
  tollgate::server::HostPort again;
  FUZZ_CHECK(tollgate::server::ParseHostPort(hp.ToString(), &again, &why),
             "ToString does not parse: " + Quote(hp.ToString()));
  FUZZ_CHECK(again.host == hp.host && again.port == hp.port,
             "round trip changed " + Quote(text) + " -> " + Quote(hp.ToString()));
}

void CheckUpstream(std::string_view text) {
  tollgate::server::UpstreamUrl u;
  std::string why;
  if (!tollgate::server::ParseUpstreamUrl(text, &u, &why)) return;
  FUZZ_CHECK(!u.host_header.empty() && Clean(u.host_header),
             "Host value that breaks the header block: " + Quote(u.host_header));
  FUZZ_CHECK(u.base_path.empty() || (u.base_path.front() == '/' && Clean(u.base_path)),
             "base path that breaks the request line: " + Quote(u.base_path));
  FUZZ_CHECK(u.address.port != 0, "upstream port 0");
  FUZZ_CHECK(u.tls == text.starts_with("https://"), "TLS not as the scheme says: " + Quote(text));
}

// (Deeper than any config: skipped too, rather than recursing far.)
bool NamesAFile(const nlohmann::json& j, int depth = 0) {
  if (depth > 32) return true;
  if (j.is_array()) {
    for (const auto& v : j) {
      if (NamesAFile(v, depth + 1)) return true;
    }
  }
  if (!j.is_object()) return false;
  for (auto it = j.begin(); it != j.end(); ++it) {
    if (it.key().ends_with("_file") && !(it->is_string() && it->get<std::string>().empty())) {
      return true;
    }
    if (NamesAFile(*it, depth + 1)) return true;
  }
  return false;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  // The address parsers on the raw text too (flags take them unwrapped).
  const std::string_view first_line = text.substr(0, text.find('\n'));
  CheckHostPort(first_line);
  CheckUpstream(first_line);
  if (NamesAFile(nlohmann::json::parse(text, nullptr, false, true))) return 0;

  tollgate::server::ServerConfig config;
  const auto errors = tollgate::server::ParseServerConfig(text, &config);
  for (const auto& e : errors) {
    FUZZ_CHECK(!e.path.empty() || !e.message.empty(), "an empty error");
  }
  CheckHostPort(config.listen);
  CheckHostPort(config.admin_listen);
  CheckUpstream(config.upstream);
  if (config.policy_path.empty()) config.policy_path = "policy.json";
  const auto invalid = tollgate::server::ValidateServerConfig(config);
  if (invalid.empty()) {
    const tollgate::EnforcerOptions options = tollgate::MakeEnforcerOptions(config);
    FUZZ_CHECK(options.retry_after_jitter == config.retry_after_jitter, "jitter lost");
  }
  (void)tollgate::StoreSchemeOf(config.store);
  return 0;
}
