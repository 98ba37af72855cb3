// `tollgate explain`: which rules apply to a request, with keys, costs and
// bucket state, on a fresh in-process LocalStore. With --repeat N the request
// is first decided N times for real, so the last decision (status, headers,
// body) shows what a client would see after N requests.
#include <cstdio>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "command.h"
#include "tollgate/http_text.h"
#include "tollgate/local_store.h"
#include "tollgate/policy.h"
#include "tollgate/policy_headers.h"
#include "tollgate/request_body.h"

namespace tollgate::cli {
namespace {

void Help(FILE* out) {
  std::fprintf(
      out,
      "usage: tollgate explain --policy FILE [request options] [enforcer options]\n\n"
      "request:\n"
      "  --method M             request method (default GET)\n"
      "  --path P               path, may include ?query (default /)\n"
      "  --query Q              raw query string\n"
      "  --header 'Name: value' a request header (repeatable)\n"
      "  --ip A                 the TCP peer address (default 127.0.0.1)\n"
      "  --body JSON            the request body, for body:<JSON pointer> sources (adds\n"
      "                         Content-Type: application/json unless --header sets one;\n"
      "                         read as tollgated's gateway reads it: up to 64 KiB)\n"
      "  --repeat N             decide the request N times first, then show the last outcome\n"
      "enforcer:\n"
      "  --trusted-proxy CIDR   trust X-Forwarded-For from this peer range (repeatable)\n"
      "  --forwarded            read the Forwarded header instead of X-Forwarded-For\n"
      "  --jwt-hs256-secret S   verify HS256 tokens with secret S\n"
      "  --jwt-rs256-key FILE   verify RS256 tokens with this PEM public key\n"
      "  --jwt-verified-upstream  trust token claims without verifying signatures\n"
      "  --header-style S       comma-separated: draft11 | draft03 | x-ratelimit | "
      "x-ratelimit-epoch | none\n"
      "  --jitter F             Retry-After jitter fraction (default 0.5)\n");
}

void PrintOutcome(const CheckOutcome& o) {
  std::printf("verdict: %s (HTTP %d)\n", VerdictName(o.verdict).data(), o.http_status);
  for (size_t i = 0; i < o.rules.size(); ++i) {
    const RuleOutcome& r = o.rules[i];
    const Decision& d = r.decision;
    std::printf("  %s%s key=%s cost=%lld remaining=%lld/%lld reset_after=%llds%s%s\n",
                static_cast<int>(i) == o.denied_rule ? "* " : "", r.rule.c_str(), r.key.c_str(),
                static_cast<long long>(r.cost), static_cast<long long>(d.remaining),
                static_cast<long long>(d.limit), static_cast<long long>(CeilSeconds(d.reset_after)),
                r.shadow ? " shadow" : "", d.allowed ? "" : " (did not fit)");
  }
  for (const HeaderField& h : o.headers) std::printf("%s: %s\n", h.name.c_str(), h.value.c_str());
  if (!o.body.empty()) std::printf("\n%s\n", o.body.c_str());
}

int ExplainMain(std::vector<std::string> args) {
  std::string policy_file, method = "GET", path = "/", query, ip = "127.0.0.1";
  std::optional<std::string> body;
  std::vector<std::pair<std::string, std::string>> headers;
  long repeat = 0;
  EnforcerOptions options;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    auto value = [&](std::string* out) {
      if (i + 1 >= args.size()) {
        std::fprintf(stderr, "tollgate explain: %s needs a value\n", a.c_str());
        return false;
      }
      *out = args[++i];
      return true;
    };
    std::string v;
    if (a == "--help" || a == "-h") {
      Help(stdout);
      return 0;
    } else if (a == "--policy") {
      if (!value(&policy_file)) return 2;
    } else if (a == "--method") {
      if (!value(&method)) return 2;
    } else if (a == "--path") {
      if (!value(&path)) return 2;
    } else if (a == "--query") {
      if (!value(&query)) return 2;
    } else if (a == "--ip") {
      if (!value(&ip)) return 2;
    } else if (a == "--body") {
      if (!value(&v)) return 2;
      body = v;
    } else if (a == "--header" || a == "-H") {
      if (!value(&v)) return 2;
      const size_t colon = v.find(':');
      if (colon == std::string::npos) {
        std::fprintf(stderr, "tollgate explain: --header needs 'Name: value'\n");
        return 2;
      }
      headers.emplace_back(std::string(TrimOws(std::string_view(v).substr(0, colon))),
                           std::string(TrimOws(std::string_view(v).substr(colon + 1))));
    } else if (a == "--repeat") {
      if (!value(&v)) return 2;
      repeat = std::strtol(v.c_str(), nullptr, 10);
      if (repeat < 0 || repeat > 10'000'000) {
        std::fprintf(stderr, "tollgate explain: --repeat must be 0..10000000\n");
        return 2;
      }
    } else if (a == "--trusted-proxy") {
      if (!value(&v)) return 2;
      options.trusted_proxies.push_back(v);
    } else if (a == "--forwarded") {
      options.forwarded_header = ForwardedHeader::kForwarded;
    } else if (a == "--jwt-hs256-secret") {
      if (!value(&options.jwt.hs256_secret)) return 2;
    } else if (a == "--jwt-rs256-key") {
      if (!value(&v)) return 2;
      std::ifstream in(v);
      std::stringstream ss;
      ss << in.rdbuf();
      if (!in) {
        std::fprintf(stderr, "tollgate explain: cannot read %s\n", v.c_str());
        return 2;
      }
      options.jwt.rs256_public_key_pem = ss.str();
    } else if (a == "--jwt-verified-upstream") {
      options.jwt.verified_upstream = true;
    } else if (a == "--header-style") {
      if (!value(&v)) return 2;
      std::string why;
      if (!ParseHeaderStyles(v, &options.header_styles, &why)) {
        std::fprintf(stderr, "tollgate explain: --header-style: %s\n", why.c_str());
        return 2;
      }
    } else if (a == "--jitter") {
      if (!value(&v)) return 2;
      options.retry_after_jitter = std::strtod(v.c_str(), nullptr);
    } else {
      std::fprintf(stderr, "tollgate explain: unknown option '%s'\n", a.c_str());
      Help(stderr);
      return 2;
    }
  }
  if (policy_file.empty()) {
    Help(stderr);
    return 2;
  }
  if (auto q = path.find('?'); q != std::string::npos) {
    if (query.empty()) query = path.substr(q + 1);
    path.resize(q);
  }
  auto policies = PolicyStore::Open(policy_file);
  if (!policies.ok()) {
    std::printf("%s\n", policies.status().message().c_str());
    return 2;
  }
  LocalStoreOptions store_options;
  store_options.max_keys = 1 << 16;
  auto store = LocalStore::Create(store_options);
  if (!store.ok()) {
    std::fprintf(stderr, "tollgate explain: %s\n", store.status().ToString().c_str());
    return 1;
  }
  auto enforcer =
      Enforcer::Create(*policies, store->get(), &SystemClock::Instance(), std::move(options));
  if (!enforcer.ok()) {
    std::fprintf(stderr, "tollgate explain: %s\n", enforcer.status().ToString().c_str());
    return 2;
  }
  if (body) {
    bool typed = false;
    for (const auto& [n, val] : headers) typed = typed || EqualsIgnoreCase(n, "content-type");
    if (!typed) headers.emplace_back("Content-Type", "application/json");
  }
  std::vector<HeaderPair> views;
  std::optional<std::string_view> type;
  for (const auto& [n, val] : headers) {
    views.emplace_back(n, val);
    if (!type && EqualsIgnoreCase(n, "content-type")) type = val;
  }
  // As the gateway hands it over: a JSON body within its bound.
  if (body && !body->empty() && body->size() <= kBodyKeyBytes && type && IsJsonContentType(*type)) {
    views.push_back(RequestBodyField(*body));
  }
  RequestView request;
  request.method = method;
  request.path = path;
  request.query = query;
  request.peer_address = ip;
  request.headers = views;

  std::printf("client ip: %s\n", (*enforcer)->ClientIp(request).c_str());
  CheckOutcome last;
  for (long i = 0; i < repeat; ++i) last = (*enforcer)->Check(request);
  CheckOutcome e = (*enforcer)->Explain(request);
  std::printf("rules:\n");
  for (const std::string& line : e.trace) std::printf("  %s\n", line.c_str());
  if (repeat > 0) {
    std::printf("\nafter %ld decisions, the last one:\n", repeat);
    PrintOutcome(last);
  } else {
    std::printf("\nnext decision would be: %s (HTTP %d)\n", VerdictName(e.verdict).data(),
                e.http_status);
  }
  return 0;
}

const Registration kExplain({"explain", "show which rules apply to a request, keys, costs, state",
                             ExplainMain});

}  // namespace
}  // namespace tollgate::cli
