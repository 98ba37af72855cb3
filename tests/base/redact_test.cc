// base::RedactUrl: the one form of a URL in errors, logs and admin views.
#include "base/redact.h"

#include <gtest/gtest.h>

#include <string>

namespace tollgate::base {
namespace {

TEST(RedactUrl, HidesPasswordsAndSensitiveQueryValues) {
  const std::pair<const char*, const char*> cases[] = {
      {"redis://127.0.0.1:6379", "redis://127.0.0.1:6379"},
      {"redis://bob:s3cret@h:6379/2?prefix=rl", "redis://bob:***@h:6379/2?prefix=rl"},
      {"redis://s3cret@h", "redis://***@h"},  // Redis' password shorthand
      {"rediss://:s3cret@h?tls_ca_file=/ca.pem", "rediss://:***@h?tls_ca_file=/ca.pem"},
      {"redis-cluster://:s3cret@a:1,b:2", "redis-cluster://:***@a:1,b:2"},
      {"redis://:pa/ss@h:1", "redis://:***@h:1"},   // a raw '/' in the password
      {"redis://:p?a@ss@h:1", "redis://:***@h:1"},  // a raw '?' and '@'
      {"etcd://u:s3cret@10.0.0.1:2379/k", "etcd://u:***@10.0.0.1:2379/k"},
      {"http://h:4318/v1/traces?token=s3cret&a=1", "http://h:4318/v1/traces?token=***&a=1"},
      {"redis://h?Password=s3cret&AUTH=x&api_key=y&key=z&monkey=m",
       "redis://h?Password=***&AUTH=***&api_key=***&key=***&monkey=m"},
      {"u:s3cret@h", "u:***@h"},  // no scheme
      {"redis://@h", "redis://@h"},
      {"", ""},
  };
  for (const auto& [url, shown] : cases) EXPECT_EQ(RedactUrl(url), shown) << url;
}

TEST(RedactUrl, IsPrintableAndBounded) {
  EXPECT_EQ(RedactUrl("redis://h\n\x01\x7f"), "redis://h???");
  EXPECT_EQ(RedactUrl(std::string(300, 'a'), 10), "aaaaaaaaaa...");
  // Cut after redaction: a long password never shows through the cut.
  EXPECT_EQ(RedactUrl("redis://:" + std::string(500, 's') + "@h", 20), "redis://:***@h");
}

TEST(RedactUrlPiece, QuotesAPieceOnlyAfterTheLastAt) {
  const std::string url = "redis://:s3cret@h:99x/0?timeout_ms=a&token=t0k";
  const std::string_view view(url);
  EXPECT_EQ(RedactUrlPiece(view, view.substr(url.find("99x"), 3)), "99x");
  EXPECT_EQ(RedactUrlPiece(view, view.substr(url.find("token"))), "token=***");
  EXPECT_EQ(RedactUrlPiece(view, view.substr(url.find("timeout_ms"))), "timeout_ms=a&token=***");
  EXPECT_EQ(RedactUrlPiece(view, view.substr(url.find("s3cret"), 6)),
            "redis://:***@h:99x/0?timeout_ms=a&token=***");
  EXPECT_EQ(RedactUrlPiece(view, "elsewhere"), RedactUrl(url));  // not a view into url
}

}  // namespace
}  // namespace tollgate::base
