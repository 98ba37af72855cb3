// The admin listener's guard against web pages and DNS rebinding as pure
// functions (server/admin_guard.h); end to end in admin_guard_test.cc.
#include "server/admin_guard.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "server/config.h"

namespace tollgate::server {
namespace {

const std::vector<std::string> kNames = {"tollgate-admin.internal"};

TEST(AdminGuard, HostsTheAdminListenerAnswers) {
  for (const char* host :
       {"127.0.0.1", "127.0.0.1:9090", "10.1.2.3:9090", "[::1]", "[::1]:9090", "::1", "localhost",
        "localhost:9090", "LocalHost:9090", "tollgate-admin.internal",
        "Tollgate-Admin.Internal:9090", "[fe80::1]:1"}) {
    EXPECT_TRUE(IsAdminHost(host, kNames)) << host;
  }
  for (const char* host :
       {"evil.example", "evil.example:9090", "localhost.evil.example", "127.0.0.1.nip.io",
        "localhost.", "tollgate-admin.internal.evil.example", "[::1", "[::1]x",
        "[::1]:", "127.0.0.1:", "127.0.0.1:x", "127.0.0.1:123456", ":9090", "", "[]:1",
        "[localhost]", "0x7f000001", "2130706433x", "127.1"}) {
    EXPECT_FALSE(IsAdminHost(host, kNames)) << host;
  }
}

TEST(AdminGuard, TheListenersOwnNameIsAnsweredAddressesAreNotListed) {
  ServerConfig c;
  c.admin_listen = "Admin.Example:9090";
  c.admin_allowed_hosts = {"ops.example"};
  EXPECT_EQ(AdminHostNames(c), (std::vector<std::string>{"ops.example", "admin.example"}));
  c.admin_listen = "127.0.0.1:9090";
  EXPECT_EQ(AdminHostNames(c), (std::vector<std::string>{"ops.example"}));
  c.admin_listen = "[::1]:9090";
  EXPECT_EQ(AdminHostNames(c), (std::vector<std::string>{"ops.example"}));
}

TEST(AdminGuard, SameOriginComparesSchemeHostAndPort) {
  EXPECT_TRUE(SameOrigin("http://127.0.0.1:9090", "127.0.0.1:9090"));
  EXPECT_TRUE(SameOrigin("http://LOCALHOST:9090", "localhost:9090"));
  EXPECT_TRUE(SameOrigin("http://localhost", "localhost:80"));
  EXPECT_TRUE(SameOrigin("http://localhost:80", "localhost"));
  EXPECT_TRUE(SameOrigin("https://admin.example", "admin.example:443"));
  EXPECT_TRUE(SameOrigin("http://[::1]:9090", "[::1]:9090"));
  EXPECT_FALSE(SameOrigin("http://evil.example", "127.0.0.1:9090"));
  EXPECT_FALSE(SameOrigin("http://127.0.0.1:9091", "127.0.0.1:9090"));
  EXPECT_FALSE(SameOrigin("https://localhost", "localhost:80"));
  EXPECT_FALSE(SameOrigin("null", "127.0.0.1:9090"));
  EXPECT_FALSE(SameOrigin("file://", "127.0.0.1:9090"));
  EXPECT_FALSE(SameOrigin("ftp://127.0.0.1:9090", "127.0.0.1:9090"));
  EXPECT_FALSE(SameOrigin("http://127.0.0.1:9090/", "127.0.0.1:9090"));
  EXPECT_FALSE(SameOrigin("http://127.0.0.1:9090", ""));
}

TEST(AdminGuard, JsonMediaType) {
  for (const char* t : {"application/json", "Application/JSON", "application/json; charset=utf-8",
                        " application/json ;x=y"}) {
    EXPECT_TRUE(IsJsonMediaType(t)) << t;
  }
  for (const char* t : {"text/plain", "application/x-www-form-urlencoded", "multipart/form-data",
                        "application/jsonx", "application/json-patch+json", "", "json"}) {
    EXPECT_FALSE(IsJsonMediaType(t)) << t;
  }
}

struct Fields {
  std::vector<HeaderPair> pairs;
  RequestView View(std::string_view method) const {
    RequestView v;
    v.method = method;
    v.path = "/v1/keys/reset";
    v.headers = pairs;
    return v;
  }
};

TEST(AdminGuard, StateChangingRequestsAPageCouldSendAreRefused) {
  RouteResult json_route;
  json_route.json_body = true;
  const RouteResult bodyless;
  const Fields page{{{"Host", "127.0.0.1:9090"},
                     {"Origin", "http://evil.example"},
                     {"Content-Type", "text/plain"},
                     {"Sec-Fetch-Site", "cross-site"}}};
  for (bool token : {false, true}) {
    auto r = ScreenAdminChange(page.View("POST"), json_route, token);
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 403);
    EXPECT_NE(r->detail.find("cross-site"), std::string::npos) << r->detail;
    // Reads are for the Host check only.
    EXPECT_FALSE(ScreenAdminChange(page.View("GET"), json_route, token));
    EXPECT_FALSE(ScreenAdminChange(page.View("HEAD"), json_route, token));
  }
  const Fields twice{{{"Host", "127.0.0.1:9090"},
                      {"Origin", "http://127.0.0.1:9090"},
                      {"Origin", "http://evil.example"},
                      {"Content-Type", "application/json"}}};
  EXPECT_EQ(ScreenAdminChange(twice.View("PUT"), json_route, true)->status, 403);
  const Fields typed{{{"Host", "127.0.0.1:9090"},
                      {"Content-Type", "application/json"},
                      {"Content-Type", "application/json"}}};
  EXPECT_EQ(ScreenAdminChange(typed.View("POST"), json_route, true)->status, 415);
  const Fields bare{{{"Host", "127.0.0.1:9090"}}};
  EXPECT_EQ(ScreenAdminChange(bare.View("POST"), json_route, true)->status, 415);
  EXPECT_EQ(ScreenAdminChange(bare.View("POST"), bodyless, false)->status, 403);
  EXPECT_FALSE(ScreenAdminChange(bare.View("POST"), bodyless, true));  // the token is checked
  const Fields curl{{{"Host", "127.0.0.1:9090"}, {"Content-Type", "application/json"}}};
  EXPECT_FALSE(ScreenAdminChange(curl.View("POST"), json_route, false));
  EXPECT_FALSE(ScreenAdminChange(curl.View("POST"), bodyless, false));
  const Fields own{{{"Host", "127.0.0.1:9090"},
                    {"Origin", "http://127.0.0.1:9090"},
                    {"Sec-Fetch-Site", "same-origin"},
                    {"Content-Type", "application/json"}}};
  EXPECT_FALSE(ScreenAdminChange(own.View("PUT"), json_route, false));
}

TEST(AdminGuard, HostIsCheckedOnEveryRequest) {
  const Fields rebound{{{"Host", "evil.example:9090"}}};
  auto r = ScreenAdminHost(rebound.View("GET"), kNames);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 421);
  EXPECT_NE(r->detail.find("evil.example:9090"), std::string::npos) << r->detail;
  const Fields two{{{"Host", "127.0.0.1"}, {"Host", "evil.example"}}};
  EXPECT_TRUE(ScreenAdminHost(two.View("GET"), kNames));
  const Fields none{};  // HTTP/1.0 without Host: no browser sends that
  EXPECT_FALSE(ScreenAdminHost(none.View("GET"), kNames));
  const Fields loopback{{{"Host", "127.0.0.1:9090"}}};
  EXPECT_FALSE(ScreenAdminHost(loopback.View("POST"), kNames));
}

}  // namespace
}  // namespace tollgate::server
