// Helpers for the policy tests: an owning request builder, JWT minting (HS256
// and RS256 via OpenSSL), and an Enforcer on a LocalStore driven by a ManualClock.
#ifndef TOLLGATE_TESTS_POLICY_POLICY_TEST_UTIL_H_
#define TOLLGATE_TESTS_POLICY_POLICY_TEST_UTIL_H_

#include <gtest/gtest.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/pem.h>
#include <openssl/rsa.h>

#include <cstdlib>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "policy/jwt.h"
#include "tollgate/clock.h"
#include "tollgate/local_store.h"
#include "tollgate/policy.h"
#include "tollgate/request.h"

namespace tollgate::testing {

struct TestRequest {
  std::string method = "GET";
  std::string path = "/api/items";
  std::string query;
  std::string peer = "203.0.113.9";
  std::vector<std::pair<std::string, std::string>> headers;
  std::vector<HeaderPair> views;

  TestRequest& Header(std::string name, std::string value) {
    headers.emplace_back(std::move(name), std::move(value));
    return *this;
  }
  TestRequest& Peer(std::string p) {
    peer = std::move(p);
    return *this;
  }
  TestRequest& Path(std::string p) {
    path = std::move(p);
    return *this;
  }
  TestRequest& Query(std::string q) {
    query = std::move(q);
    return *this;
  }
  TestRequest& Method(std::string m) {
    method = std::move(m);
    return *this;
  }
  RequestView View() {
    views.clear();
    for (const auto& [n, v] : headers) views.emplace_back(n, v);
    return RequestView{method, path, query, peer, views};
  }
};

inline std::string JwtSigningInput(const nlohmann::json& header, const nlohmann::json& payload) {
  return Base64UrlEncode(header.dump()) + "." + Base64UrlEncode(payload.dump());
}

inline std::string MintHs256(const nlohmann::json& payload, const std::string& secret,
                             const nlohmann::json& header = {{"alg", "HS256"}, {"typ", "JWT"}}) {
  const std::string input = JwtSigningInput(header, payload);
  unsigned char mac[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  HMAC(EVP_sha256(), secret.data(), static_cast<int>(secret.size()),
       reinterpret_cast<const unsigned char*>(input.data()), input.size(), mac, &len);
  return input + "." + Base64UrlEncode(std::string(reinterpret_cast<char*>(mac), len));
}

// An RSA key pair generated for the test run.
class RsaKey {
 public:
  RsaKey() { key_ = EVP_RSA_gen(2048); }
  ~RsaKey() { EVP_PKEY_free(key_); }
  RsaKey(const RsaKey&) = delete;
  RsaKey& operator=(const RsaKey&) = delete;

  std::string PublicPem() const {
    BIO* bio = BIO_new(BIO_s_mem());
    PEM_write_bio_PUBKEY(bio, key_);
    char* data = nullptr;
    const long n = BIO_get_mem_data(bio, &data);
    std::string pem(data, static_cast<size_t>(n));
    BIO_free(bio);
    return pem;
  }

  std::string Mint(const nlohmann::json& payload) const {
    const std::string input = JwtSigningInput({{"alg", "RS256"}, {"typ", "JWT"}}, payload);
    EVP_MD_CTX* ctx = EVP_MD_CTX_new();
    size_t len = 0;
    EVP_DigestSignInit(ctx, nullptr, EVP_sha256(), nullptr, key_);
    EVP_DigestSign(ctx, nullptr, &len, reinterpret_cast<const unsigned char*>(input.data()),
                   input.size());
    std::string sig(len, '\0');
    EVP_DigestSign(ctx, reinterpret_cast<unsigned char*>(sig.data()), &len,
                   reinterpret_cast<const unsigned char*>(input.data()), input.size());
    sig.resize(len);
    EVP_MD_CTX_free(ctx);
    return input + "." + Base64UrlEncode(sig);
  }

  bool ok() const { return key_ != nullptr; }

 private:
  EVP_PKEY* key_ = nullptr;
};

// An Enforcer over a LocalStore with a ManualClock; wall time 1.7e9 s.
struct Harness {
  ManualClock clock;
  std::unique_ptr<LocalStore> store;
  std::shared_ptr<PolicyStore> policies;
  std::unique_ptr<Enforcer> enforcer;
  std::vector<std::string> log;

  explicit Harness(std::string_view policy_json, EnforcerOptions options = {}) {
    LocalStoreOptions so;
    so.max_keys = 1 << 16;
    so.shards = 4;
    so.clock = &clock;
    auto s = LocalStore::Create(so);
    EXPECT_TRUE(s.ok()) << s.status().ToString();
    store = std::move(*s);
    auto p = PolicyStore::FromText(policy_json);
    EXPECT_TRUE(p.ok()) << p.status().ToString();
    policies = *p;
    options.log = [this](std::string_view m) { log.emplace_back(m); };
    auto e = Enforcer::Create(policies, store.get(), &clock, std::move(options));
    EXPECT_TRUE(e.ok()) << e.status().ToString();
    enforcer = std::move(*e);
  }

  CheckOutcome Check(TestRequest& r) { return enforcer->Check(r.View()); }
  int64_t WallSeconds() const { return clock.WallNow() / 1'000'000'000; }
};

inline std::string FindHeader(const CheckOutcome& o, std::string_view name) {
  for (const auto& h : o.headers) {
    if (h.name == name) return h.value;
  }
  return "";
}
inline bool HasHeader(const CheckOutcome& o, std::string_view name) {
  for (const auto& h : o.headers) {
    if (h.name == name) return true;
  }
  return false;
}

inline std::string SourcePath(const std::string& rel) {
  const char* dir = std::getenv("TOLLGATE_SOURCE_DIR");
  return std::string(dir ? dir : ".") + "/" + rel;
}

inline std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The two rule examples of seed 001, verbatim.
inline constexpr std::string_view kSeedGlobalRps = R"({
"name": "global-rps",
"limit_keys": ["ip:address"],
"algorithm": "token_bucket",
"algorithm_config": {
"rps": 5,
"burst": 10
}
})";

inline constexpr std::string_view kSeedTiered = R"({
"rules": [
{
"name": "enterprise",
"limit_keys": ["header:x-api-key"],
"algorithm": "token_bucket",
"algorithm_config": { "rps": 1000, "burst": 2000 },
"match": { "jwt:plan": "enterprise" }
},
{
"name": "free",
"limit_keys": ["header:x-api-key"],
"algorithm": "token_bucket",
"algorithm_config": { "rps": 10, "burst": 20 }
}
]
})";

}  // namespace tollgate::testing

#endif  // TOLLGATE_TESTS_POLICY_POLICY_TEST_UTIL_H_
