// The etcd policy source's client against a real etcd (tests/testing/etcd_server.h):
// a read, new values through the watch, re-sync after etcd restarts, and after
// the revision it would resume from was compacted; a frozen member of three.
#include "runtime/etcd_watch.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "testing/etcd_server.h"
#include "testing/scoped_temp_dir.h"
#include "testing/timing.h"

namespace tollgate::etcd {
namespace {

using namespace std::chrono_literals;

TEST(EtcdUrl, ParsesEndpointsAndKey) {
  auto u = ParseEtcdUrl("etcd://127.0.0.1:2379,localhost:22379/tollgate/policy");
  // Why a refused one is refused: the message names what to do instead.
  EXPECT_NE(ParseEtcdUrl("etcd://u:p@127.0.0.1:2379/k").status().message().find("etcd.username"),
            std::string::npos);
  EXPECT_NE(ParseEtcdUrl("https://127.0.0.1:2379/k").status().message().find("etcds://"),
            std::string::npos);
  ASSERT_TRUE(u.ok()) << u.status().ToString();
  EXPECT_FALSE(u->tls);
  ASSERT_EQ(u->endpoints.size(), 2u);
  EXPECT_EQ(u->endpoints[1].first, "localhost");
  EXPECT_EQ(u->endpoints[1].second, 22379);
  EXPECT_EQ(u->key, "/tollgate/policy");
  // TLS, DNS names and IPv6 (brackets removed: the host as getaddrinfo takes it).
  auto t = ParseEtcdUrl("etcds://etcd-1.prod.example:2379,[::1]:2380,10.0.0.3:2379/k");
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_TRUE(t->tls);
  ASSERT_EQ(t->endpoints.size(), 3u);
  EXPECT_EQ(t->endpoints[0].first, "etcd-1.prod.example");
  EXPECT_EQ(t->endpoints[1].first, "::1");
  EXPECT_EQ(t->endpoints[1].second, 2380);
  for (const char* bad :
       {"http://h:1/k", "https://h:1/k", "etcd://h:1", "etcd://h:1/", "etcd://h/k", "etcd://:1/k",
        "etcd://h:0/k", "etcd://h:65536/k", "etcd://h:1x/k", "etcd:///k", "etcd://-h:1/k",
        "etcd://h_x:1/k", "etcd://a..b:1/k", "etcd://[::1:1/k", "etcd://[nothex]:1/k",
        "etcd://::1:2379/k", "etcd://u:p@127.0.0.1:2379/k", "etcds://u@h:1/k"}) {
    EXPECT_FALSE(ParseEtcdUrl(bad).ok()) << bad;
  }
  std::string many = "etcd://";
  for (int i = 0; i < 17; ++i) many += (i ? ",h" : "h") + std::to_string(i) + ":1";
  EXPECT_FALSE(ParseEtcdUrl(many + "/k").ok());
}

// What the watch delivered, read from the test thread.
struct Seen {
  std::mutex mu;
  std::vector<std::string> values;
  std::vector<std::string> errors;
  std::string Last() {
    std::lock_guard<std::mutex> lock(mu);
    return values.empty() ? "" : values.back();
  }
  // A watch recording into this (which must outlive it).
  std::unique_ptr<EtcdWatch> Watch(const EtcdOptions& options, int64_t after_revision) {
    return std::make_unique<EtcdWatch>(
        options, after_revision,
        [this](int64_t, std::string v) {
          std::lock_guard<std::mutex> lock(mu);
          values.push_back(std::move(v));
        },
        [this](const Status& s) {
          std::lock_guard<std::mutex> lock(mu);
          errors.push_back(s.ToString());
        });
  }
};

TEST(EtcdWatch, ReadsWatchesAndResyncsAfterRestartAndCompaction) {
  auto etcd = testing::EtcdServer::Start();
  if (etcd.missing) GTEST_SKIP() << etcd.error;
  ASSERT_TRUE(etcd) << etcd.error;
  ASSERT_GT(etcd->Put("/p", "v1"), 0);
  EtcdOptions options;
  options.url = *ParseEtcdUrl("etcd://" + etcd->endpoint() + "/p");
  options.io_timeout = 500ms;
  auto first = EtcdRange(options);
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  ASSERT_TRUE(first->kv);
  EXPECT_EQ(first->kv->value, "v1");

  Seen seen;
  {
    auto watch = seen.Watch(options, first->revision);
    ASSERT_GT(etcd->Put("/p", "v2"), 0);
    EXPECT_TRUE(testing::WaitFor([&] { return seen.Last() == "v2"; }, 10s)) << seen.Last();

    etcd->Kill();
    ASSERT_EQ(etcd->Restart(), "");
    ASSERT_GT(etcd->Put("/p", "v3"), 0);
    EXPECT_TRUE(testing::WaitFor([&] { return seen.Last() == "v3"; }, 20s)) << seen.Last();

    // Behind a compaction: whether the watch resumed before or after it, the
    // last value arrives (from the watch, or from the re-read after the cancel).
    etcd->Kill();
    ASSERT_EQ(etcd->Restart(), "");
    ASSERT_GT(etcd->Put("/p", "v4"), 0);
    const int64_t rev = etcd->Put("/p", "v5");
    ASSERT_GT(rev, 0);
    ASSERT_TRUE(etcd->Compact(rev));
    EXPECT_TRUE(testing::WaitFor([&] { return seen.Last() == "v5"; }, 20s)) << seen.Last();
  }
  std::lock_guard<std::mutex> lock(seen.mu);
  EXPECT_FALSE(seen.errors.empty());  // the restarts were reported
}

// One member of three frozen (SIGSTOP: its sockets stay open, connects still
// succeed, nothing answers) while the watch streams from it: the silent watch
// probes its member, gets no answer within io_timeout, moves on and re-reads;
// a read that starts at the frozen member answers from the next one.
TEST(EtcdWatch, MovesOffAFrozenMember) {
  auto cluster = testing::EtcdServer::StartCluster(3);
  if (cluster.missing) GTEST_SKIP() << cluster.error;
  ASSERT_TRUE(cluster) << cluster.error;
  auto& m = cluster.members;
  ASSERT_GT(m[1]->Put("/p", "v1"), 0);
  EtcdOptions options;
  options.url = *ParseEtcdUrl("etcd://" + m[0]->endpoint() + "," + m[1]->endpoint() + "," +
                              m[2]->endpoint() + "/p");
  options.io_timeout = testing::Scaled(2s);
  options.probe_interval = testing::Scaled(500ms);
  auto first = EtcdRange(options);
  ASSERT_TRUE(first.ok()) << first.status().ToString();

  Seen seen;
  {
    auto watch = seen.Watch(options, first->revision);
    // The watch starts on member 0: a change through member 1 arrives.
    ASSERT_GT(m[1]->Put("/p", "v2"), 0);
    ASSERT_TRUE(testing::WaitFor([&] { return seen.Last() == "v2"; }, 10s)) << seen.Last();

    {
      // No error so far: the watch is still on member 0, where it started.
      std::lock_guard<std::mutex> lock(seen.mu);
      ASSERT_TRUE(seen.errors.empty()) << seen.errors.front();
    }
    m[0]->Pause();
    // Member 0 may have led: the other two elect a leader before the put lands.
    ASSERT_TRUE(testing::WaitFor([&] { return m[1]->Put("/p", "v3") > 0; }, 20s));
    EXPECT_TRUE(testing::WaitFor([&] { return seen.Last() == "v3"; }, 30s)) << seen.Last();
    auto read = EtcdRange(options);  // member 0 first: times out, member 1 answers
    ASSERT_TRUE(read.ok()) << read.status().ToString();
    ASSERT_TRUE(read->kv);
    EXPECT_EQ(read->kv->value, "v3");
    m[0]->Resume();
  }
  std::lock_guard<std::mutex> lock(seen.mu);
  bool reported = false;
  std::string errors;
  for (const auto& e : seen.errors) {
    reported |= e.find("watch silent") != std::string::npos;
    errors += e + "\n";
  }
  EXPECT_TRUE(reported) << "the frozen member was not reported; errors:\n" << errors;
}

// Authentication with simple tokens that expire after one idle second
// (--auth-token-ttl=1): the watch probes its member every 1.5 s, finds its
// token refused each time, logs in again (once per refusal) and keeps
// delivering. Fails without the renewal: the probe's range is refused and
// the watch moves on to a re-read that is refused too, so v2 never arrives.
TEST(EtcdWatch, RenewsAnExpiredTokenAndKeepsWatching) {
  auto etcd =
      testing::EtcdServer::Start({.extra_args = {"--auth-token=simple", "--auth-token-ttl=1"}});
  if (etcd.missing) GTEST_SKIP() << etcd.error;
  ASSERT_TRUE(etcd) << etcd.error;
  ASSERT_EQ(etcd->EnableAuth("root-pw-for-tests", "tollgate", "pw-of-tollgate", "/p"), "");
  ASSERT_GT(etcd->Put("/p", "v1"), 0);
  testing::ScopedTempDir dir("EtcdWatchAuth");
  {
    std::FILE* f = std::fopen(dir.File("password").c_str(), "w");
    ASSERT_NE(f, nullptr);
    std::fputs("pw-of-tollgate\n", f);
    std::fclose(f);
  }
  EtcdClientOptions client;
  client.username = "tollgate";
  client.password_file = dir.File("password");
  std::vector<ConfigError> errors;
  EtcdOptions options;
  options.url = *ParseEtcdUrl("etcd://" + etcd->endpoint() + "/p");
  options.session = EtcdSession::Create(client, false, &errors);
  ASSERT_TRUE(errors.empty()) << errors.front().ToString();
  options.probe_interval = 1500ms;
  auto first = EtcdRange(options);
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  EXPECT_EQ(options.session->logins(), 1u);

  Seen seen;
  auto watch = seen.Watch(options, first->revision);
  // Each probe after an idle TTL finds the token expired and logs in again.
  EXPECT_TRUE(testing::WaitFor([&] { return options.session->logins() >= 3; }, 30s))
      << options.session->logins();
  ASSERT_GT(etcd->Put("/p", "v2"), 0);
  EXPECT_TRUE(testing::WaitFor([&] { return seen.Last() == "v2"; }, 20s)) << seen.Last();
  // A wrong password is final and named, and never shown.
  std::FILE* f = std::fopen(dir.File("password").c_str(), "w");
  ASSERT_NE(f, nullptr);
  std::fputs("not-the-password\n", f);
  std::fclose(f);
  options.session->DropToken(options.session->token());
  auto refused = EtcdRange(options);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(refused.status().message().find("etcd.password_file"), std::string::npos)
      << refused.status().message();
  EXPECT_EQ(refused.status().message().find("not-the-password"), std::string::npos);
}

}  // namespace
}  // namespace tollgate::etcd
