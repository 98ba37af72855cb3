// The request field sources (issue 34): cookie:<name>, host,
// path_param:<name> and body:<JSON pointer> (the JSON body and pointer
// parsers it reads with); the parsers under hostile input, the sources' parsing in a policy
// (errors with paths), and their keys through a real Enforcer.
#include <gtest/gtest.h>

#include <string>
#include <string_view>
#include <vector>

#include "policy/request_fields.h"
#include "policy_test_util.h"
#include "tollgate/request_body.h"

namespace tollgate {
namespace {

using testing::Harness;
using testing::TestRequest;

std::optional<std::string> Cookie(std::vector<std::string_view> fields, std::string_view name) {
  auto v = CookieValue(fields, name);
  if (!v) return std::nullopt;
  return std::string(*v);
}

TEST(CookieValue, FirstOccurrenceAcrossFields) {
  EXPECT_EQ(Cookie({"a=1; sid=abc; b=2"}, "sid"), "abc");
  EXPECT_EQ(Cookie({"sid=first; sid=second"}, "sid"), "first");
  // HTTP/2 splits the list into several fields (RFC 7540 8.1.2.5): one list, in order.
  EXPECT_EQ(Cookie({"a=1", "sid=x", "sid=y"}, "sid"), "x");
  EXPECT_EQ(Cookie({"a=1;sid=tight"}, "sid"), "tight");
  EXPECT_EQ(Cookie({"  sid = spaced  ;"}, "sid"), "spaced");
  // Names are case-sensitive (RFC 6265 5.4 compares them as octets).
  EXPECT_EQ(Cookie({"SID=upper"}, "sid"), std::nullopt);
  EXPECT_EQ(Cookie({"xsid=1; sidx=2"}, "sid"), std::nullopt);
}

TEST(CookieValue, QuotedAndMalformedPairs) {
  EXPECT_EQ(Cookie({"sid=\"quoted value\""}, "sid"), "quoted value");
  EXPECT_EQ(Cookie({"sid=\""}, "sid"), "\"");  // one quote is a value, not a quoting
  // Pairs without '=' are skipped; the value may hold '='.
  EXPECT_EQ(Cookie({"garbage; ;;=; sid=a=b"}, "sid"), "a=b");
  EXPECT_EQ(Cookie({"sid"}, "sid"), std::nullopt);
  // The first occurrence decides even when it is empty: a later copy never stands in.
  EXPECT_EQ(Cookie({"sid=; sid=second"}, "sid"), std::nullopt);
  EXPECT_EQ(Cookie({"sid=\"\"; sid=second"}, "sid"), std::nullopt);
  EXPECT_EQ(Cookie({}, "sid"), std::nullopt);
  EXPECT_EQ(Cookie({""}, "sid"), std::nullopt);
}

TEST(CookieValue, BoundedBytesPairsAndValueSize) {
  // A value longer than kMaxCookieValueBytes is absent.
  std::string huge = "sid=" + std::string(kMaxCookieValueBytes + 1, 'v');
  EXPECT_EQ(Cookie({huge}, "sid"), std::nullopt);
  std::string max = "sid=" + std::string(kMaxCookieValueBytes, 'v');
  EXPECT_EQ(Cookie({max}, "sid")->size(), kMaxCookieValueBytes);
  // Thousands of cookies: only the first kMaxCookiePairs are looked at.
  std::string many;
  for (int i = 0; i < 5000; ++i) many += "c" + std::to_string(i) + "=1; ";
  EXPECT_EQ(Cookie({many + "sid=late"}, "sid"), std::nullopt);
  EXPECT_EQ(Cookie({"sid=early; " + many}, "sid"), "early");
  // A huge field: the scan stops after kMaxCookieBytes over every field.
  std::string padding = "pad=" + std::string(kMaxCookieBytes, 'p');
  EXPECT_EQ(Cookie({padding + "; sid=late"}, "sid"), std::nullopt);
  EXPECT_EQ(Cookie({padding, "sid=late"}, "sid"), std::nullopt);
  // Within the bound, a second field is read.
  EXPECT_EQ(Cookie({"pad=" + std::string(1000, 'p'), "sid=ok"}, "sid"), "ok");
}

TEST(NormalizeHost, LowerCasedPortRemovedValidated) {
  EXPECT_EQ(NormalizeHost("API.Example.COM"), "api.example.com");
  EXPECT_EQ(NormalizeHost("api.example.com:8443"), "api.example.com");
  EXPECT_EQ(NormalizeHost("api.example.com."), "api.example.com");
  EXPECT_EQ(NormalizeHost("api.example.com:"), "api.example.com");
  EXPECT_EQ(NormalizeHost("10.0.0.1:80"), "10.0.0.1");
  EXPECT_EQ(NormalizeHost("[2001:DB8:0::1]:443"), "[2001:db8::1]");
  EXPECT_EQ(NormalizeHost("[::1]"), "[::1]");
  EXPECT_EQ(NormalizeHost("[::ffff:10.0.0.1]"), "10.0.0.1");
}

TEST(NormalizeHost, InvalidIsAbsent) {
  for (std::string_view bad : {"", ":80", "a..b", ".a", "user@host", "host:99999", "host:8o",
                               "host:80:80", "ho st", "h%41st", "[::1", "[::1]x", "[10.0.0.1]",
                               "[fe80::1%25eth0]", "[]", "[::1]]", "a/b", "\xc3\xa9.example"}) {
    EXPECT_EQ(NormalizeHost(bad), std::nullopt) << bad;
  }
  EXPECT_EQ(NormalizeHost("-.."), std::nullopt);  // one dot removed, an empty label left
  EXPECT_EQ(NormalizeHost("a.b..:80"), std::nullopt);
  EXPECT_EQ(NormalizeHost(std::string(64, 'a') + ".com"), std::nullopt);  // a label over 63
  EXPECT_EQ(NormalizeHost(std::string(kMaxHostBytes + 1, 'a')), std::nullopt);
  EXPECT_TRUE(NormalizeHost(std::string(63, 'a') + ".com"));
}

TEST(JsonPointer, EscapesAndErrors) {
  JsonPointer p;
  std::string why;
  ASSERT_TRUE(ParseJsonPointer("/a~1b/m~0n/~01", &p, &why)) << why;
  EXPECT_EQ(p.tokens, (std::vector<std::string>{"a/b", "m~n", "~1"}));
  ASSERT_TRUE(ParseJsonPointer("/", &p, &why));
  EXPECT_EQ(p.tokens, (std::vector<std::string>{""}));
  EXPECT_FALSE(ParseJsonPointer("username", &p, &why));
  EXPECT_FALSE(ParseJsonPointer("/a~2", &p, &why));
  EXPECT_FALSE(ParseJsonPointer("/a~", &p, &why));
  EXPECT_FALSE(ParseJsonPointer("/" + std::string(kMaxPointerBytes, 'a'), &p, &why));
  std::string deep;
  for (size_t i = 0; i <= kMaxPointerTokens; ++i) deep += "/a";
  EXPECT_FALSE(ParseJsonPointer(deep, &p, &why));
}

std::optional<std::string> BodyValue(std::string_view body, std::string_view pointer) {
  auto doc = ParseJsonBody(body);
  if (!doc) return std::nullopt;
  JsonPointer p;
  std::string why;
  EXPECT_TRUE(ParseJsonPointer(pointer, &p, &why)) << why;
  return JsonPointerValue(*doc, p);
}

TEST(JsonBody, ScalarsByPointer) {
  const std::string body =
      R"({"username": "alice", "n": 42, "ok": true, "a/b": "slash", "m~n": "tilde",
          "list": ["x", "y"], "obj": {"k": "v"}, "nil": null, "": "empty-name"})";
  EXPECT_EQ(BodyValue(body, "/username"), "alice");
  EXPECT_EQ(BodyValue(body, "/n"), "42");
  EXPECT_EQ(BodyValue(body, "/ok"), "true");
  EXPECT_EQ(BodyValue(body, "/a~1b"), "slash");
  EXPECT_EQ(BodyValue(body, "/m~0n"), "tilde");
  EXPECT_EQ(BodyValue(body, "/list/1"), "y");
  EXPECT_EQ(BodyValue(body, "/obj/k"), "v");
  EXPECT_EQ(BodyValue(body, "/"), "empty-name");
  // Absent: objects, arrays, null, missing members, bad or out-of-range indexes, "-".
  for (std::string_view p : {"/obj", "/list", "/nil", "/missing", "/list/01", "/list/2", "/list/-",
                             "/list/x", "/list/99999999999", "/username/0"}) {
    EXPECT_EQ(BodyValue(body, p), std::nullopt) << p;
  }
}

TEST(JsonBody, HostileBodiesAreAbsent) {
  EXPECT_EQ(ParseJsonBody(""), std::nullopt);
  EXPECT_EQ(ParseJsonBody("{\"username\": "), std::nullopt);
  EXPECT_EQ(ParseJsonBody("{\"username\": \"a\"} trailing"), std::nullopt);
  // Invalid UTF-8 inside a string (a lone continuation byte, an overlong form).
  EXPECT_EQ(ParseJsonBody("{\"username\": \"a\x80\"}"), std::nullopt);
  EXPECT_EQ(ParseJsonBody("{\"username\": \"\xc0\xaf\"}"), std::nullopt);
  // Deeper than kMaxBodyDepth.
  std::string deep = std::string(kMaxBodyDepth + 1, '[') + std::string(kMaxBodyDepth + 1, ']');
  EXPECT_EQ(ParseJsonBody(deep), std::nullopt);
  std::string ok = std::string(kMaxBodyDepth, '[') + std::string(kMaxBodyDepth, ']');
  EXPECT_TRUE(ParseJsonBody(ok));
  // Larger than kMaxBodyKeyBytes.
  std::string big = "{\"username\": \"" + std::string(kMaxBodyKeyBytes, 'a') + "\"}";
  EXPECT_EQ(ParseJsonBody(big), std::nullopt);
  // Valid UTF-8 and escapes are kept.
  EXPECT_EQ(BodyValue("{\"u\": \"\xc3\xa9\\u00e9\"}", "/u"), "\xc3\xa9\xc3\xa9");
}

TEST(JsonBody, ContentTypes) {
  EXPECT_TRUE(IsJsonContentType("application/json"));
  EXPECT_TRUE(IsJsonContentType("Application/JSON; charset=utf-8"));
  EXPECT_TRUE(IsJsonContentType("application/vnd.api+json"));
  EXPECT_FALSE(IsJsonContentType("text/plain"));
  EXPECT_FALSE(IsJsonContentType("application/x-www-form-urlencoded"));
  EXPECT_FALSE(IsJsonContentType("+json"));
  EXPECT_FALSE(IsJsonContentType("application/+json"));
  EXPECT_FALSE(IsJsonContentType(""));
}

TEST(PathTemplate, ParsesAndMatches) {
  PathTemplate t;
  std::string why;
  ASSERT_TRUE(ParsePathTemplate("/users/{id}/orders", &t, &why)) << why;
  const int id = t.Find("id");
  ASSERT_EQ(id, 1);
  std::string_view v;
  EXPECT_TRUE(MatchPathTemplate(t, "/users/42/orders", id, &v));
  EXPECT_EQ(v, "42");
  EXPECT_FALSE(MatchPathTemplate(t, "/users//orders"));
  EXPECT_FALSE(MatchPathTemplate(t, "/users/42/orders/"));
  EXPECT_FALSE(MatchPathTemplate(t, "/users/42"));
  EXPECT_FALSE(MatchPathTemplate(t, "/users/42/orders/7"));
  EXPECT_FALSE(MatchPathTemplate(t, "/Users/42/orders"));
  EXPECT_FALSE(MatchPathTemplate(t, "users/42/orders"));
  EXPECT_FALSE(MatchPathTemplate(t, ""));
  for (std::string_view bad : {"users/{id}", "/users/{}", "/users/{i-d}", "/u/{id}/{id}",
                               "/u/x{id}", "/u/{id", "/u/./x", "/u/../x", ""}) {
    EXPECT_FALSE(ParsePathTemplate(bad, &t, &why)) << bad;
  }
  std::string long_template;
  for (size_t i = 0; i <= kMaxTemplateSegments; ++i) long_template += "/s";
  EXPECT_FALSE(ParsePathTemplate(long_template, &t, &why));
}

// The sources in a policy: errors name their path.
std::vector<std::string> PolicyErrors(std::string_view json) {
  std::vector<std::string> out;
  for (const ConfigError& e : ParsePolicy(json).errors) out.push_back(e.path + ": " + e.message);
  return out;
}

TEST(RequestFieldSources, ParseErrorsHavePaths) {
  auto errors = PolicyErrors(R"({"rules": [
    {"name": "a", "limit_keys": ["cookie:bad name"], "algorithm_config": {"rps": 1, "burst": 1}},
    {"name": "b", "limit_keys": ["path_param:id"], "algorithm_config": {"rps": 1, "burst": 1}},
    {"name": "c", "limit_keys": ["path_param:id"], "algorithm_config": {"rps": 1, "burst": 1},
     "match": {"path": {"template": "/users/{user}"}}},
    {"name": "d", "limit_keys": ["ip"], "algorithm_config": {"rps": 1, "burst": 1},
     "match": {"method": {"template": "/x"}}},
    {"name": "e", "limit_keys": ["ip"], "algorithm_config": {"rps": 1, "burst": 1},
     "match": {"path": {"template": "/x/{a}/{a}"}}}
  ]})");
  ASSERT_EQ(errors.size(), 5u) << ::testing::PrintToString(errors);
  EXPECT_EQ(errors[0].rfind("rules[0].limit_keys[0]: cookie:<name>", 0), 0u) << errors[0];
  EXPECT_EQ(errors[1].rfind("rules[1].limit_keys[0]: path_param:id needs exactly one", 0), 0u)
      << errors[1];
  EXPECT_EQ(errors[2],
            "rules[2].limit_keys[0]: the rule's path template /users/{user} has no {id}");
  EXPECT_EQ(errors[3].rfind("rules[3].match.method.template: a template matches the path", 0), 0u)
      << errors[3];
  EXPECT_EQ(errors[4], "rules[4].match.path.template: parameter {a} appears twice");
}

TEST(RequestFieldSources, CookieKeysAndMatch) {
  Harness h(R"({"rules": [{"name": "session", "limit_keys": ["cookie:sid"],
    "match": {"cookie:sid": {"present": true}},
    "algorithm_config": {"count": 1, "period": "1h", "burst": 1}}]})");
  TestRequest a;
  a.Header("Cookie", "theme=dark; sid=\"s-1\"");
  TestRequest b;
  b.Header("Cookie", "theme=dark").Header("Cookie", "sid=s-2");
  EXPECT_TRUE(h.Check(a).allowed());
  EXPECT_FALSE(h.Check(a).allowed());
  CheckOutcome ob = h.Check(b);
  EXPECT_TRUE(ob.allowed());
  ASSERT_EQ(ob.rules.size(), 1u);
  EXPECT_EQ(ob.rules[0].key, "s-2");
  // Without the cookie the rule does not apply (match), so nothing is counted.
  TestRequest none;
  none.Header("Cookie", "theme=dark");
  EXPECT_TRUE(h.Check(none).rules.empty());
}

TEST(RequestFieldSources, HostKeys) {
  Harness h(R"({"rules": [{"name": "tenant", "limit_keys": ["host"],
    "algorithm_config": {"count": 1, "period": "1h", "burst": 1}}]})");
  TestRequest a;
  a.Header("Host", "Tenant-A.example.com:8443");
  TestRequest a2;
  a2.Header("Host", "tenant-a.EXAMPLE.com.");
  EXPECT_TRUE(h.Check(a).allowed());
  CheckOutcome second = h.Check(a2);
  EXPECT_FALSE(second.allowed());  // the same host, spelt differently
  ASSERT_EQ(second.rules.size(), 1u);
  EXPECT_EQ(second.rules[0].key, "tenant-a.example.com");
  TestRequest b;
  b.Header("Host", "tenant-b.example.com");
  EXPECT_TRUE(h.Check(b).allowed());
  // An invalid host is absent: the rule skips the request (missing_key skip).
  TestRequest bad;
  bad.Header("Host", "evil host");
  EXPECT_TRUE(h.Check(bad).rules.empty());
}

TEST(RequestFieldSources, PathParamKeys) {
  Harness h(R"({"rules": [{"name": "orders", "limit_keys": ["path_param:id"],
    "match": {"path": {"template": "/users/{id}/orders"}, "method": "GET"},
    "algorithm_config": {"count": 1, "period": "1h", "burst": 1}}]})");
  TestRequest a;
  a.Path("/users/42/orders");
  TestRequest a_spelt;
  a_spelt.Path("/users//42/./orders");  // normalised first
  TestRequest b;
  b.Path("/users/43/orders");
  TestRequest other;
  other.Path("/users/42/profile");
  EXPECT_TRUE(h.Check(a).allowed());
  CheckOutcome again = h.Check(a_spelt);
  EXPECT_FALSE(again.allowed());
  ASSERT_EQ(again.rules.size(), 1u);
  EXPECT_EQ(again.rules[0].key, "42");
  EXPECT_TRUE(h.Check(b).allowed());
  EXPECT_TRUE(h.Check(other).rules.empty());
}

TEST(RequestFieldSources, BodyParseErrorsHavePaths) {
  auto errors = PolicyErrors(R"({"rules": [
    {"name": "a", "limit_keys": ["body:username"], "algorithm_config": {"rps": 1, "burst": 1}},
    {"name": "b", "limit_keys": ["body:"], "algorithm_config": {"rps": 1, "burst": 1}},
    {"name": "c", "limit_keys": ["ip"], "algorithm_config": {"rps": 1, "burst": 1},
     "match": {"body:/a~2": {"equals": "x"}}}
  ]})");
  ASSERT_EQ(errors.size(), 3u) << ::testing::PrintToString(errors);
  EXPECT_EQ(errors[0].rfind("rules[0].limit_keys[0]: body:<JSON pointer>: a JSON pointer starts "
                            "with '/'",
                            0),
            0u)
      << errors[0];
  EXPECT_EQ(errors[1].rfind("rules[1].limit_keys[0]: body:<JSON pointer> needs a pointer", 0), 0u)
      << errors[1];
  EXPECT_NE(errors[2].find("~0"), std::string::npos) << errors[2];
  EXPECT_EQ(errors[2].rfind("rules[2].match", 0), 0u) << errors[2];
}

TEST(RequestFieldSources, PolicyReadsBodyOnlyWithABodySource) {
  EXPECT_TRUE(PolicyReadsBody(*ParsePolicy(R"({"rules": [{"name": "a",
    "limit_keys": ["body:/user/name"], "algorithm_config": {"rps": 1, "burst": 1}}]})")
                                   .policy));
  EXPECT_TRUE(PolicyReadsBody(*ParsePolicy(R"({"rules": [{"name": "a", "limit_keys": ["ip"],
    "match": {"any": [{"method": "PUT"}, {"body:/kind": {"equals": "bulk"}}]},
    "algorithm_config": {"rps": 1, "burst": 1}}]})")
                                   .policy));
  EXPECT_FALSE(PolicyReadsBody(*ParsePolicy(R"({"rules": [{"name": "a",
    "limit_keys": ["header:x-user"], "algorithm_config": {"rps": 1, "burst": 1}}]})")
                                    .policy));
}

// A request as a front end hands it over: its headers, then the body's pair
// (RequestBodyField) when it has one.
struct BodyRequest {
  TestRequest request;
  std::string body;
  bool with_body = true;
  std::vector<HeaderPair> views;
  RequestView View() {
    RequestView v = request.View();
    views.assign(v.headers.begin(), v.headers.end());
    if (with_body) views.push_back(RequestBodyField(body));
    v.headers = views;
    return v;
  }
};

BodyRequest Json(std::string body, std::string type = "application/json; charset=utf-8") {
  BodyRequest r;
  r.request.Method("POST").Header("Content-Type", std::move(type));
  r.body = std::move(body);
  return r;
}

CheckOutcome Check(Harness& h, BodyRequest r) { return h.enforcer->Check(r.View()); }

TEST(RequestFieldSources, BodyKeys) {
  Harness h(R"({"rules": [{"name": "login", "limit_keys": ["body:/username"],
    "algorithm_config": {"count": 1, "period": "1h", "burst": 1}}]})");
  EXPECT_TRUE(Check(h, Json(R"({"username": "alice", "password": "x"})")).allowed());
  CheckOutcome second = Check(h, Json(R"({"password": "y", "username":"alice"})"));
  EXPECT_FALSE(second.allowed());  // the same user, however the body is laid out
  ASSERT_EQ(second.rules.size(), 1u);
  EXPECT_EQ(second.rules[0].key, "alice");
  // A string is taken as is, never case-folded (as a bucket key it is
  // trimmed like every key value: docs/configuration.md "Keys").
  CheckOutcome os = Check(h, Json(R"({"username": " Alice"})"));
  ASSERT_EQ(os.rules.size(), 1u);
  EXPECT_EQ(os.rules[0].key, "Alice");
  // Numbers and booleans as JSON writes them.
  CheckOutcome on = Check(h, Json(R"({"username": 1.50e1})"));
  ASSERT_EQ(on.rules.size(), 1u);
  EXPECT_EQ(on.rules[0].key, "15.0");
  CheckOutcome ob = Check(h, Json(R"({"username": true})"));
  ASSERT_EQ(ob.rules.size(), 1u);
  EXPECT_EQ(ob.rules[0].key, "true");
  // +json media types are JSON.
  CheckOutcome ov = Check(h, Json(R"({"username":"eve"})", "application/vnd.api+json"));
  ASSERT_EQ(ov.rules.size(), 1u);
  EXPECT_EQ(ov.rules[0].key, "eve");
  // Absent (the rule skips the request): objects, arrays, null, an empty
  // string, a missing member, not JSON, too deep.
  const std::string deep =
      R"({"username": "bob", "x": )" + std::string(40, '[') + std::string(40, ']') + "}";
  for (const std::string& body :
       {std::string(R"({"username": {"a": 1}})"), std::string(R"({"username": ["alice"]})"),
        std::string(R"({"username": null})"), std::string(R"({"username": ""})"),
        std::string(R"({"user": "alice"})"), std::string(R"({"username": "alice")"),
        std::string("username=alice"), std::string(), deep}) {
    EXPECT_TRUE(Check(h, Json(body)).rules.empty()) << body;
  }
  // No JSON Content-Type, none at all, or no body pair: absent.
  EXPECT_TRUE(Check(h, Json(R"({"username": "bob"})", "text/plain")).rules.empty());
  BodyRequest untyped;
  untyped.request.Method("POST");
  untyped.body = R"({"username": "bob"})";
  EXPECT_TRUE(Check(h, untyped).rules.empty());
  BodyRequest unread = Json(R"({"username": "bob"})");
  unread.with_body = false;
  EXPECT_TRUE(Check(h, unread).rules.empty());
  // A client's own field named like the body's pair is not the body: the
  // pair is recognised by its name's address, never by its text.
  BodyRequest spoofed = Json("");
  spoofed.with_body = false;
  spoofed.request.Header(":tollgate-body", R"({"username": "mallory"})");
  EXPECT_TRUE(Check(h, spoofed).rules.empty());
}

TEST(RequestFieldSources, BodyMatchAndNestedPointers) {
  Harness h(R"({"rules": [{"name": "bulk", "limit_keys": ["body:/org/id"],
    "match": {"body:/kind": {"equals": "bulk"}, "body:/a~1b/0": {"present": true}},
    "algorithm_config": {"count": 1, "period": "1h", "burst": 1}}]})");
  CheckOutcome o = Check(h, Json(R"({"kind": "bulk", "a/b": [7], "org": {"id": 42}})"));
  ASSERT_EQ(o.rules.size(), 1u);
  EXPECT_EQ(o.rules[0].key, "42");
  EXPECT_TRUE(Check(h, Json(R"({"kind": "single", "a/b": [7], "org": {"id": 42}})")).rules.empty());
  EXPECT_TRUE(Check(h, Json(R"({"kind": "bulk", "a/b": [], "org": {"id": 42}})")).rules.empty());
  // Explain shows the key read from the body.
  BodyRequest e = Json(R"({"kind": "bulk", "a/b": [1], "org": {"id": 9001}})");
  CheckOutcome ex = h.enforcer->Explain(e.View());
  EXPECT_NE(::testing::PrintToString(ex.trace).find("9001"), std::string::npos)
      << ::testing::PrintToString(ex.trace);
}

}  // namespace
}  // namespace tollgate
