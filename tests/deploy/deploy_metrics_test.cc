// The operator files in deploy/ against a live tollgated: every metric name that the
// Prometheus rules (deploy/prometheus/tollgate.rules.yml) and the Grafana dashboard
// (deploy/grafana/tollgate.json) use must be one that the real binary exports, and every
// label value they select by equality (outcome="rejected") must be one it writes.
//
// No single tollgated exports every family (the local store's gauges and the breaker's are
// exclusive), so two run side by side and their /metrics are united: a gateway on the local
// store in front of a test upstream, and a decision service on a real redis-server with
// failure mode degrade. Each is driven until the series the files select exist (a rejection,
// an upstream 502, ...), waiting on the scrape, never sleeping.
#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "server/test_http.h"
#include "server/tollgated_process.h"
#include "testing/redis_server.h"
#include "testing/scoped_temp_dir.h"
#include "testing/timing.h"

namespace tollgate::testing {
namespace {

std::string SourceDir() {
  const char* dir = std::getenv("TOLLGATE_SOURCE_DIR");
  return dir ? dir : ".";
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// What a /metrics page exports: every family (from # TYPE) with a histogram's or summary's
// sample names, every sample name, and every name="value" label pair of a sample.
struct Exported {
  std::set<std::string> names;
  std::set<std::string> label_pairs;  // name="value"
};

void AddExposition(const std::string& text, Exported& out) {
  std::istringstream lines(text);
  std::string line;
  static const std::regex kType(R"(^# TYPE ([a-zA-Z_:][a-zA-Z0-9_:]*) (\w+)$)");
  static const std::regex kSample(R"(^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})? \S+$)");
  static const std::regex kPair(R"re(([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)")re");
  std::smatch m;
  while (std::getline(lines, line)) {
    if (std::regex_match(line, m, kType)) {
      out.names.insert(m[1]);
      if (m[2] == "histogram" || m[2] == "summary") {
        for (const char* suffix : {"_bucket", "_sum", "_count"})
          out.names.insert(m[1].str() + suffix);
      }
    } else if (!line.empty() && line[0] != '#' && std::regex_match(line, m, kSample)) {
      out.names.insert(m[1]);
      const std::string labels = m[3];
      for (std::sregex_iterator it(labels.begin(), labels.end(), kPair), end; it != end; ++it) {
        out.label_pairs.insert((*it)[1].str() + "=\"" + (*it)[2].str() + "\"");
      }
    }
  }
}

// The tollgated metric names a PromQL expression uses: tollgate_ identifiers (recording
// rules are tollgate:..., with colons, and are not tollgated's).
std::set<std::string> MetricNames(const std::string& expr) {
  static const std::regex kName(R"((^|[^a-zA-Z0-9_:])(tollgate_[a-zA-Z0-9_]+))");
  std::set<std::string> names;
  for (std::sregex_iterator it(expr.begin(), expr.end(), kName), end; it != end; ++it) {
    names.insert((*it)[2]);
  }
  return names;
}

// The label pairs an expression selects by equality (label="value", not =~, != or ""),
// excluding values that are dashboard variables.
std::set<std::string> EqualityMatchers(const std::string& expr) {
  static const std::regex kMatcher(R"re(([a-zA-Z_][a-zA-Z0-9_]*)\s*=\s*"([^"$]+)")re");
  std::set<std::string> pairs;
  for (std::sregex_iterator it(expr.begin(), expr.end(), kMatcher), end; it != end; ++it) {
    pairs.insert((*it)[1].str() + "=\"" + (*it)[2].str() + "\"");
  }
  return pairs;
}

// Every query of the rules file: each rule's expr, and the annotations' text (they name
// metrics to look at).
std::vector<std::string> RuleExpressions(const std::string& path) {
  std::vector<std::string> exprs;
  YAML::Node root = YAML::LoadFile(path);
  for (const auto& group : root["groups"]) {
    for (const auto& rule : group["rules"]) {
      exprs.push_back(rule["expr"].as<std::string>());
      if (rule["annotations"]) {
        for (const auto& a : rule["annotations"]) exprs.push_back(a.second.as<std::string>());
      }
    }
  }
  return exprs;
}

// Every query of the dashboard: panel targets and template variables.
std::vector<std::string> DashboardExpressions(const nlohmann::json& dashboard) {
  std::vector<std::string> exprs;
  for (const auto& panel : dashboard.at("panels")) {
    if (!panel.contains("targets")) continue;
    for (const auto& t : panel.at("targets")) exprs.push_back(t.at("expr").get<std::string>());
  }
  for (const auto& v : dashboard.at("templating").at("list")) {
    if (v.value("type", "") == "query") exprs.push_back(v.at("definition").get<std::string>());
  }
  return exprs;
}

class DeployMetricsTest : public ::testing::Test {
 protected:
  std::string Write(const std::string& name, const std::string& text) {
    std::string path = dir_.File(name);
    std::ofstream(path) << text;
    return path;
  }
  // /metrics of a running tollgated's admin listener, once `ready(text)` holds.
  static std::string ScrapeWhen(Tollgated& t,
                                const std::function<bool(const std::string&)>& ready) {
    std::string text;
    WaitFor(
        [&] {
          HttpResponse r = Fetch(t.admin_port(), "GET", "/metrics");
          text = r.status == 200 ? r.body : "";
          return ready(text);
        },
        std::chrono::seconds(10));
    return text;
  }

  ScopedTempDir dir_{"deploy_metrics"};
};

// One rule that rejects the third request from an address (refill: one token in 1000 s).
constexpr const char* kPolicy = R"({"rules": [{"name": "tiny", "limit_keys": ["ip:address"],
  "algorithm": "token_bucket", "algorithm_config": {"rps": 0.001, "burst": 2}}]})";

TEST_F(DeployMetricsTest, EveryMetricAndLabelTheRulesAndDashboardUseIsExported) {
  const std::string policy = Write("policy.json", kPolicy);
  Exported exported;

  // A gateway on the local store.
  {
    TestUpstream upstream;
    ScopedTempDir run("gateway");
    Tollgated t({"--policy", policy, "--listen", "127.0.0.1:0", "--admin", "127.0.0.1:0",
                 "--upstream", "http://127.0.0.1:" + std::to_string(upstream.port())},
                run.path());
    ASSERT_TRUE(t.WaitStarted()) << t.Log();
    EXPECT_EQ(Fetch(t.port(), "GET", "/status?code=502").status, 502);
    EXPECT_EQ(Fetch(t.port(), "GET", "/a").status, 200);
    EXPECT_EQ(Fetch(t.port(), "GET", "/a").status, 429);
    std::string text = ScrapeWhen(t, [](const std::string& s) {
      return s.find("outcome=\"rejected\"") != std::string::npos &&
             s.find("code=\"502\"") != std::string::npos;
    });
    ASSERT_NE(text.find("tollgate_store_capacity_keys"), std::string::npos) << text;
    AddExposition(text, exported);
  }
  // A decision service on Redis, failure mode degrade (breaker, fleet, charge-back).
  {
    TOLLGATE_START_REDIS(redis);
    ScopedTempDir run("redis");
    Tollgated t({"--policy", policy, "--listen", "127.0.0.1:0", "--admin", "127.0.0.1:0", "--store",
                 redis.url(), "--failure-mode", "degrade"},
                run.path());
    ASSERT_TRUE(t.WaitStarted()) << t.Log();
    const std::string body = R"({"items": [{"rule": "tiny", "key": "k1"}]})";
    EXPECT_EQ(
        Fetch(t.port(), "POST", "/v1/decide", {{"Content-Type", "application/json"}}, body).status,
        200);
    std::string text = ScrapeWhen(t, [](const std::string& s) {
      return s.find("tollgate_breaker_state{state=\"open\"}") != std::string::npos &&
             s.find("outcome=\"allowed\"") != std::string::npos;
    });
    ASSERT_NE(text.find("tollgate_breaker_state"), std::string::npos) << text;
    AddExposition(text, exported);
  }
  // The checks below can fail: a name tollgated does not export is not in the set.
  ASSERT_GT(exported.names.size(), 40u);
  ASSERT_EQ(exported.names.count("tollgate_no_such_metric_total"), 0u);

  const std::string rules_path = SourceDir() + "/deploy/prometheus/tollgate.rules.yml";
  const std::string dashboard_path = SourceDir() + "/deploy/grafana/tollgate.json";
  nlohmann::json dashboard = nlohmann::json::parse(ReadFile(dashboard_path));
  struct Source {
    std::string file;
    std::vector<std::string> exprs;
  };
  for (const Source& source : {Source{rules_path, RuleExpressions(rules_path)},
                               Source{dashboard_path, DashboardExpressions(dashboard)}}) {
    ASSERT_GT(source.exprs.size(), 10u) << source.file;
    std::set<std::string> used;
    for (const std::string& expr : source.exprs) {
      for (const std::string& name : MetricNames(expr)) {
        used.insert(name);
        EXPECT_EQ(exported.names.count(name), 1u)
            << source.file << ": " << name << " is not exported by tollgated, in: " << expr;
      }
      for (const std::string& pair : EqualityMatchers(expr)) {
        EXPECT_EQ(exported.label_pairs.count(pair), 1u)
            << source.file << ": no tollgated series has " << pair << ", in: " << expr;
      }
    }
    EXPECT_GT(used.size(), 10u) << source.file;
  }
}

TEST_F(DeployMetricsTest, ExpositionParserFindsFamiliesSamplesAndLabels) {
  Exported e;
  AddExposition(
      "# HELP tollgate_x_seconds h\n# TYPE tollgate_x_seconds histogram\n"
      "tollgate_x_seconds_bucket{le=\"+Inf\"} 1\ntollgate_y{a=\"b\",c=\"d\\\"e\"} 2\n",
      e);
  EXPECT_EQ(e.names.count("tollgate_x_seconds_count"), 1u);
  EXPECT_EQ(e.names.count("tollgate_y"), 1u);
  EXPECT_EQ(e.label_pairs.count("a=\"b\""), 1u);
  EXPECT_EQ(e.label_pairs.count("c=\"d\\\"e\""), 1u);
  EXPECT_EQ(MetricNames("rate(tollgate_a_total[5m]) / tollgate:b:ratio + x_tollgate_c"),
            std::set<std::string>{"tollgate_a_total"});
  EXPECT_EQ(EqualityMatchers(R"(x{a="b", c=~"d", e!="f", g="$v", h=""})"),
            std::set<std::string>{"a=\"b\""});
}

// The dashboard's structure: panels Grafana can place and query.
TEST_F(DeployMetricsTest, DashboardPanelsHaveIdsPlacesAndQueries) {
  nlohmann::json d = nlohmann::json::parse(ReadFile(SourceDir() + "/deploy/grafana/tollgate.json"));
  EXPECT_EQ(d.at("uid"), "tollgate");
  std::set<int> ids;
  for (const auto& p : d.at("panels")) {
    EXPECT_TRUE(ids.insert(p.at("id").get<int>()).second) << "duplicate id " << p.at("id");
    const auto& g = p.at("gridPos");
    EXPECT_LE(g.at("x").get<int>() + g.at("w").get<int>(), 24) << p.at("title");
    if (p.at("type") == "row") continue;
    ASSERT_FALSE(p.at("targets").empty()) << p.at("title");
    for (const auto& t : p.at("targets")) {
      EXPECT_FALSE(t.at("expr").get<std::string>().empty()) << p.at("title");
      EXPECT_EQ(t.at("datasource").at("uid"), "${datasource}") << p.at("title");
    }
  }
  EXPECT_GT(ids.size(), 10u);
}

}  // namespace
}  // namespace tollgate::testing
