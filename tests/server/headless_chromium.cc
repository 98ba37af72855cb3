#include "server/headless_chromium.h"

#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <openssl/evp.h>

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/websocket.hpp>
#include <cstdlib>
#include <fstream>
#include <optional>
#include <sstream>

#include "server/test_http.h"
#include "testing/timing.h"

namespace tollgate::testing {

namespace net = boost::asio;
namespace beast = boost::beast;
using json = nlohmann::json;
using tcp = net::ip::tcp;

namespace {

std::string TextOf(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

}  // namespace

struct HeadlessChromium::Impl {
  pid_t pid = -1;
  std::string dir;
  net::io_context ioc;
  beast::websocket::stream<tcp::socket> ws{ioc};
  bool open = false;
  int next_id = 1;
  std::vector<std::string> problems;

  // Runs one asynchronous operation started by `start` to completion, or
  // closes the socket after `deadline`: true when it completed without error.
  template <typename Start>
  bool Run(Start start, std::chrono::milliseconds deadline) {
    std::optional<beast::error_code> result;
    start([&result](beast::error_code ec, std::size_t) { result = ec; });
    ioc.restart();
    ioc.run_for(deadline);
    if (!result) {
      beast::error_code ignored;
      ws.next_layer().close(ignored);
      ioc.restart();
      ioc.run();
      open = false;
      return false;
    }
    if (*result) open = false;
    return !*result;
  }
};

std::string HeadlessChromium::BinaryPath() {
  if (const char* env = std::getenv("TOLLGATE_CHROMIUM"); env && ::access(env, X_OK) == 0) {
    return env;
  }
  for (const char* p : {"/usr/bin/chromium", "/usr/bin/chromium-browser"}) {
    if (::access(p, X_OK) == 0) return p;
  }
  return "";
}

HeadlessChromium::HeadlessChromium(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

HeadlessChromium::~HeadlessChromium() {
  if (impl_->open) {
    beast::error_code ignored;
    impl_->ws.next_layer().close(ignored);
  }
  if (impl_->pid > 0) {
    // The whole process group: chromium's renderers and helpers too.
    ::kill(-impl_->pid, SIGKILL);
    ::kill(impl_->pid, SIGKILL);
    ::waitpid(impl_->pid, nullptr, 0);
  }
}

std::unique_ptr<HeadlessChromium> HeadlessChromium::Start(const std::string& dir,
                                                          std::string* error) {
  auto impl = std::make_unique<Impl>();
  impl->dir = dir;
  const std::string bin = BinaryPath();
  if (bin.empty()) {
    *error = "chromium is not installed (tools/deps.sh)";
    return nullptr;
  }
  std::vector<std::string> args = {
      bin,
      "--headless=new",
      "--no-sandbox",  // the tests may run as root, where chromium's sandbox refuses to start
      "--disable-gpu",
      "--disable-dev-shm-usage",
      "--no-first-run",
      "--no-default-browser-check",
      "--disable-extensions",
      "--disable-background-networking",
      "--disable-component-update",
      "--disable-sync",
      "--disable-features=Translate,MediaRouter,OptimizationHints",
      "--password-store=basic",
      "--remote-debugging-address=127.0.0.1",
      "--remote-debugging-port=0",
      "--user-data-dir=" + dir + "/profile",
      "--window-size=1400,1000",
      "about:blank"};
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  const std::string log = dir + "/chromium.log";
  impl->pid = ::fork();
  if (impl->pid == 0) {
    ::setpgid(0, 0);
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (std::freopen(log.c_str(), "w", stderr) == nullptr) ::_exit(126);
    if (std::freopen(log.c_str(), "a", stdout) == nullptr) ::_exit(126);
    ::execv(argv[0], argv.data());
    ::_exit(127);
  }
  if (impl->pid < 0) {
    *error = "fork failed";
    return nullptr;
  }
  // Chromium writes its port and the browser's path there once it listens.
  const std::string active = dir + "/profile/DevToolsActivePort";
  int port = 0;
  const bool up = tollgate::testing::WaitFor(
      [&] {
        std::ifstream in(active);
        std::string line;
        if (!std::getline(in, line) || line.empty()) return false;
        port = std::atoi(line.c_str());
        if (port > 0) return true;
        int status = 0;
        return ::waitpid(impl->pid, &status, WNOHANG) == impl->pid;  // exited: stop waiting
      },
      std::chrono::seconds(30), std::chrono::milliseconds(20));
  std::unique_ptr<HeadlessChromium> browser(new HeadlessChromium(std::move(impl)));
  if (!up || port <= 0) {
    *error = "chromium did not start; its log: " + TextOf(log);
    return nullptr;
  }
  // Its first page (about:blank), by the HTTP side of the DevTools port.
  std::string ws_path;
  tollgate::testing::WaitFor(
      [&] {
        HttpResponse list = Fetch(port, "GET", "/json/list");
        if (list.status != 200) return false;
        json targets = json::parse(list.body, nullptr, false);
        if (!targets.is_array()) return false;
        for (const json& t : targets) {
          if (t.value("type", "") != "page") continue;
          const std::string url = t.value("webSocketDebuggerUrl", "");
          const size_t path = url.find("/devtools/");
          if (path != std::string::npos) ws_path = url.substr(path);
        }
        return !ws_path.empty();
      },
      std::chrono::seconds(10), std::chrono::milliseconds(20));
  if (ws_path.empty()) {
    *error = "chromium lists no page on its DevTools port";
    return nullptr;
  }
  Impl& i = *browser->impl_;
  beast::error_code ec;
  i.ws.next_layer().connect(tcp::endpoint(net::ip::make_address("127.0.0.1"), port), ec);
  if (ec) {
    *error = "connecting to chromium's DevTools port: " + ec.message();
    return nullptr;
  }
  i.ws.read_message_max(64 << 20);
  const std::string host = "127.0.0.1:" + std::to_string(port);
  const bool shook = i.Run(
      [&](auto done) {
        i.ws.async_handshake(host, ws_path, [done](beast::error_code e) mutable { done(e, 0); });
      },
      Scaled(std::chrono::seconds(10)));
  if (!shook) {
    *error = "the DevTools WebSocket handshake failed";
    return nullptr;
  }
  i.open = true;
  for (const char* domain : {"Page.enable", "Runtime.enable", "Log.enable", "Network.enable"}) {
    if (browser->Call(domain).contains("error")) {
      *error = std::string(domain) + " failed";
      return nullptr;
    }
  }
  // Before any script of a page runs: the violations the page's CSP reports.
  browser->Call("Page.addScriptToEvaluateOnNewDocument",
                {{"source",
                  "window.__tgViolations = [];"
                  "document.addEventListener('securitypolicyviolation', (e) => "
                  "window.__tgViolations.push(e.violatedDirective + ' ' + e.blockedURI));"}});
  return browser;
}

json HeadlessChromium::Call(const std::string& method, const json& params) {
  Impl& i = *impl_;
  if (!i.open) return {{"error", "closed"}};
  const int id = i.next_id++;
  json message = {{"id", id}, {"method", method}};
  if (!params.is_null()) message["params"] = params;
  const std::string text = message.dump();
  const auto deadline = Scaled(std::chrono::seconds(60));
  if (!i.Run([&](auto done) { i.ws.async_write(net::buffer(text), done); }, deadline)) {
    return {{"error", "write failed"}};
  }
  for (;;) {
    beast::flat_buffer buffer;
    if (!i.Run([&](auto done) { i.ws.async_read(buffer, done); }, deadline)) {
      return {{"error", "timeout or closed reading the answer to " + method}};
    }
    json reply = json::parse(beast::buffers_to_string(buffer.data()), nullptr, false);
    if (!reply.is_object()) continue;
    if (reply.contains("method")) {
      Collect(reply);
      continue;
    }
    if (reply.value("id", -1) != id) continue;
    if (reply.contains("error")) return {{"error", reply["error"].dump()}};
    return reply.value("result", json::object());
  }
}

void HeadlessChromium::Collect(const json& event) {
  const std::string method = event.value("method", "");
  const json& p = event.contains("params") ? event["params"] : json::object();
  if (method == "Runtime.exceptionThrown") {
    impl_->problems.push_back("exception: " + p.value("exceptionDetails", json::object()).dump());
  } else if (method == "Runtime.consoleAPICalled" && p.value("type", "") == "error") {
    impl_->problems.push_back("console.error: " + p.value("args", json::array()).dump());
  } else if (method == "Log.entryAdded") {
    const json entry = p.value("entry", json::object());
    if (entry.value("level", "") == "error") {
      impl_->problems.push_back("log: " + entry.value("text", "") + " " + entry.value("url", ""));
    }
  } else if (method == "Network.loadingFailed") {
    impl_->problems.push_back("load failed: " + p.value("errorText", "") + " " +
                              p.value("blockedReason", ""));
  }
}

bool HeadlessChromium::Navigate(const std::string& url) {
  json r = Call("Page.navigate", {{"url", url}});
  if (r.contains("error") || r.contains("errorText")) return false;
  return WaitFor("document.readyState === 'complete' && location.href === " + json(url).dump());
}

json HeadlessChromium::Eval(const std::string& expression) {
  json r = Call("Runtime.evaluate",
                {{"expression", expression}, {"returnByValue", true}, {"awaitPromise", true}});
  if (r.contains("error")) return {{"exception", r["error"]}};
  if (r.contains("exceptionDetails")) return {{"exception", r["exceptionDetails"].dump()}};
  return r.value("result", json::object()).value("value", json());
}

bool HeadlessChromium::WaitFor(const std::string& expression, std::chrono::milliseconds deadline) {
  const int64_t ms = Scaled(deadline).count();
  const std::string waiter = "new Promise((resolve) => { const end = Date.now() + " +
                             std::to_string(ms) +
                             "; const check = () => { let ok = false; try { ok = !!(" + expression +
                             "); } catch (e) { ok = false; } if (ok) resolve(true); "
                             "else if (Date.now() > end) resolve(false); "
                             "else setTimeout(check, 50); }; check(); })";
  return Eval(waiter) == json(true);
}

bool HeadlessChromium::Screenshot(const std::string& path) {
  json r = Call("Page.captureScreenshot", {{"format", "png"}, {"captureBeyondViewport", true}});
  const std::string data = r.value("data", "");
  if (data.empty() || data.size() % 4 != 0) return false;
  std::string png(data.size() / 4 * 3, '\0');
  const int n = EVP_DecodeBlock(reinterpret_cast<unsigned char*>(png.data()),
                                reinterpret_cast<const unsigned char*>(data.data()),
                                static_cast<int>(data.size()));
  if (n < 0) return false;
  // EVP_DecodeBlock counts the padding's zero bytes too.
  size_t size = static_cast<size_t>(n);
  for (size_t i = data.size(); i > 0 && data[i - 1] == '='; --i) --size;
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(png.data(), static_cast<std::streamsize>(size));
  return static_cast<bool>(out);
}

std::vector<std::string> HeadlessChromium::Problems() {
  Call("Runtime.evaluate", {{"expression", "0"}});  // reads the events sent so far
  std::vector<std::string> out = impl_->problems;
  json violations = Eval("JSON.stringify(window.__tgViolations || [])");
  if (violations.is_string()) {
    json list = json::parse(violations.get<std::string>(), nullptr, false);
    if (list.is_array()) {
      for (const json& v : list) out.push_back("csp: " + v.get<std::string>());
    }
  }
  return out;
}

}  // namespace tollgate::testing
