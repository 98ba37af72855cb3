// `tollgate key get|reset|set`: one key's state for a rule on a running
// tollgated, through its admin API (POST /v1/keys/get|reset|set, see
// docs/operations.md "Key administration"). Prints the answer (JSON) and exits
// 0; prints the problem (status, detail, each field error) and exits 1 when
// tollgated refused or could not be reached; 2 on a usage error.
#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http.hpp>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "base/redact.h"
#include "command.h"

namespace tollgate::cli {
namespace {

namespace net = boost::asio;
namespace http = boost::beast::http;
using json = nlohmann::json;

constexpr char kDefaultUrl[] = "http://127.0.0.1:9090";

void Help(FILE* out) {
  std::fprintf(
      out,
      "usage: tollgate key get|reset|set --rule NAME (--value V ... | --key SOURCE=V ...)\n"
      "                     [--remaining N] [--raw] [--admin-url URL] [--token-file FILE]\n\n"
      "  get                    show the key's state (remaining, limit, used, reset_after_ms)\n"
      "  reset                  forget the key's state: a full bucket, an empty window\n"
      "  set --remaining N      leave exactly N whole tokens (0..burst) in the key now\n\n"
      "  --rule NAME            the policy rule\n"
      "  --value V              the rule's limit_keys values, in order (repeat per key)\n"
      "  --key SOURCE=V         or a value by source, e.g. --key header:x-api-key=k1\n"
      "  --raw                  show the identity unhashed in the answer (needs the token)\n"
      "  --admin-url URL        tollgated's admin listener (env TOLLGATE_ADMIN_URL;\n"
      "                         default %s)\n"
      "  --token-file FILE      the admin token (env TOLLGATE_ADMIN_TOKEN holds it instead;\n"
      "                         never on the command line, where ps shows it)\n",
      kDefaultUrl);
}

struct Options {
  std::string action;
  json body = json::object();
  std::string url;
  std::string token;
};

bool ReadToken(const std::string& path, std::string* out) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    std::fprintf(stderr, "tollgate key: cannot read token file %s\n", path.c_str());
    return false;
  }
  std::stringstream s;
  s << in.rdbuf();
  std::string t = s.str();
  while (!t.empty() && (t.back() == '\n' || t.back() == '\r' || t.back() == ' ')) t.pop_back();
  *out = t;
  return true;
}

// 0: parsed; 2: usage error (printed).
int Parse(const std::vector<std::string>& args, Options* o) {
  if (args.empty() || (args[0] != "get" && args[0] != "reset" && args[0] != "set")) {
    Help(stderr);
    return 2;
  }
  o->action = args[0];
  json values = json::array(), keys = json::object();
  std::string token_file;
  if (const char* u = std::getenv("TOLLGATE_ADMIN_URL")) o->url = u;
  if (const char* t = std::getenv("TOLLGATE_ADMIN_TOKEN")) o->token = t;
  for (size_t i = 1; i < args.size(); ++i) {
    const std::string& a = args[i];
    auto next = [&](std::string* out) {
      if (i + 1 >= args.size()) return false;
      *out = args[++i];
      return true;
    };
    std::string v;
    if (a == "--raw") {
      o->body["raw"] = true;
    } else if (a == "--rule" && next(&v)) {
      o->body["rule"] = v;
    } else if (a == "--value" && next(&v)) {
      values.push_back(v);
    } else if (a == "--key" && next(&v)) {
      const size_t eq = v.find('=');
      if (eq == std::string::npos) {
        std::fprintf(stderr, "tollgate key: --key wants SOURCE=VALUE (got %s)\n", v.c_str());
        return 2;
      }
      keys[v.substr(0, eq)] = v.substr(eq + 1);
    } else if (a == "--remaining" && next(&v)) {
      char* end = nullptr;
      errno = 0;
      const long long n = std::strtoll(v.c_str(), &end, 10);
      if (v.empty() || *end != '\0' || errno != 0) {
        std::fprintf(stderr, "tollgate key: --remaining wants a whole number (got %s)\n",
                     v.c_str());
        return 2;
      }
      o->body["remaining"] = n;
    } else if (a == "--admin-url" && next(&v)) {
      o->url = v;
    } else if (a == "--token-file" && next(&v)) {
      token_file = v;
    } else {
      std::fprintf(stderr, "tollgate key: unknown or incomplete option %s\n", a.c_str());
      Help(stderr);
      return 2;
    }
  }
  if (!o->body.contains("rule")) {
    std::fprintf(stderr, "tollgate key: --rule is required\n");
    return 2;
  }
  if (values.empty() == keys.empty()) {
    std::fprintf(stderr, "tollgate key: give the key as --value ... or as --key SOURCE=V ...\n");
    return 2;
  }
  if (o->action == "set" && !o->body.contains("remaining")) {
    std::fprintf(stderr, "tollgate key: set needs --remaining N\n");
    return 2;
  }
  if (!values.empty()) o->body["values"] = values;
  if (!keys.empty()) o->body["keys"] = keys;
  if (!token_file.empty() && !ReadToken(token_file, &o->token)) return 2;
  if (o->url.empty()) o->url = kDefaultUrl;
  return 0;
}

// "http://host:port[/]" -> host, port. Only plain HTTP: the admin listener
// speaks no TLS (keep it on loopback or behind a TLS proxy).
bool SplitUrl(const std::string& url, std::string* host, std::string* port) {
  constexpr std::string_view kScheme = "http://";
  if (url.rfind(kScheme, 0) != 0) return false;
  std::string rest = url.substr(kScheme.size());
  if (!rest.empty() && rest.back() == '/') rest.pop_back();
  if (rest.find('/') != std::string::npos) return false;
  size_t colon = rest.rfind(':');
  if (!rest.empty() && rest.front() == '[') {  // [v6]:port
    const size_t close = rest.find(']');
    if (close == std::string::npos) return false;
    *host = rest.substr(1, close - 1);
    colon = rest.find(':', close);
    *port = colon == std::string::npos ? "80" : rest.substr(colon + 1);
    return !host->empty();
  }
  *host = rest.substr(0, colon);
  *port = colon == std::string::npos ? "80" : rest.substr(colon + 1);
  return !host->empty() && !port->empty();
}

struct Answer {
  int status = 0;
  std::string body;
  std::string error;  // transport failure
};

Answer Post(const Options& o, const std::string& host, const std::string& port) {
  Answer a;
  try {
    net::io_context io;
    boost::beast::tcp_stream stream(io);
    stream.expires_after(std::chrono::seconds(30));
    net::ip::tcp::resolver resolver(io);
    stream.connect(resolver.resolve(host, port));
    http::request<http::string_body> req{http::verb::post, "/v1/keys/" + o.action, 11};
    req.set(http::field::host, host);
    req.set(http::field::content_type, "application/json");
    if (!o.token.empty()) req.set(http::field::authorization, "Bearer " + o.token);
    req.body() = o.body.dump();
    req.prepare_payload();
    http::write(stream, req);
    boost::beast::flat_buffer buffer;
    http::response_parser<http::string_body> parser;
    parser.body_limit(1 << 20);
    http::read(stream, buffer, parser);
    a.status = static_cast<int>(parser.get().result_int());
    a.body = parser.get().body();
    boost::system::error_code ignored;
    stream.socket().shutdown(net::ip::tcp::socket::shutdown_both, ignored);
  } catch (const std::exception& e) {
    a.error = e.what();
  }
  return a;
}

// The problem body, as lines a person reads.
void PrintProblem(const Answer& a) {
  json j = json::parse(a.body, nullptr, false);
  std::string title = j.is_object() && j.contains("title") && j["title"].is_string()
                          ? j["title"].get<std::string>()
                          : "";
  std::fprintf(stderr, "tollgate key: %d %s\n", a.status, title.c_str());
  if (j.is_object() && j.contains("detail") && j["detail"].is_string()) {
    std::fprintf(stderr, "  %s\n", j["detail"].get<std::string>().c_str());
  }
  if (j.is_object() && j.contains("errors") && j["errors"].is_array()) {
    for (const json& e : j["errors"]) {
      if (!e.is_object()) continue;
      std::fprintf(stderr, "  %s: %s\n", e.value("path", "").c_str(),
                   e.value("message", "").c_str());
    }
  }
  if (a.status == 401) {
    std::fprintf(stderr, "  (set TOLLGATE_ADMIN_TOKEN or --token-file to the admin token)\n");
  }
}

int Run(std::vector<std::string> args) {
  if (!args.empty() && (args[0] == "--help" || args[0] == "-h")) {
    Help(stdout);
    return 0;
  }
  Options o;
  if (int rc = Parse(args, &o); rc != 0) return rc;
  std::string host, port;
  if (!SplitUrl(o.url, &host, &port)) {
    std::fprintf(stderr, "tollgate key: --admin-url wants http://host:port (got %s)\n",
                 base::RedactUrl(o.url).c_str());
    return 2;
  }
  Answer a = Post(o, host, port);
  if (!a.error.empty()) {
    std::fprintf(stderr, "tollgate key: cannot reach tollgated's admin listener at %s: %s\n",
                 base::RedactUrl(o.url).c_str(), a.error.c_str());
    return 1;
  }
  if (a.status != 200) {
    PrintProblem(a);
    return 1;
  }
  json j = json::parse(a.body, nullptr, false);
  std::printf("%s\n", j.is_discarded() ? a.body.c_str() : j.dump(2).c_str());
  return 0;
}

const Registration kKey{
    {"key", "look at, reset or set one key's state on a running tollgated", Run}};

}  // namespace
}  // namespace tollgate::cli
