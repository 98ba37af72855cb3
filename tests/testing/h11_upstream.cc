#include "testing/h11_upstream.h"

#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>

#include "testing/test_paths.h"
#include "testing/timing.h"

namespace tollgate::testing {
namespace {

constexpr const char* kPython = "/usr/bin/python3";  // Debian's, with python3-h11

}  // namespace

std::vector<std::string> H11Upstream::Event::Values(const std::string& lower_name) const {
  std::vector<std::string> out;
  for (const auto& [name, value] : headers) {
    if (name == lower_name) out.push_back(value);
  }
  return out;
}

H11Upstream::StartResult H11Upstream::Start(std::chrono::milliseconds deadline) {
  StartResult result;
  if (::access(kPython, X_OK) != 0 ||
      std::system((std::string(kPython) + " -c 'import h11' 2>/dev/null").c_str()) != 0) {
    result.missing = true;
    result.error = std::string(kPython) + " with the h11 module (python3-h11) is not installed";
    return result;
  }
  std::unique_ptr<H11Upstream> server(new H11Upstream(ScopedTempDir("h11_upstream")));
  const std::string log = server->dir_.File("events.jsonl");
  // Before the fork: the child only calls what is async-signal-safe.
  const std::string script = SourcePathOf("tests/testing/h11_upstream.py");
  int out[2];
  if (::pipe(out) != 0) {
    result.error = "pipe failed";
    return result;
  }
  pid_t pid = ::fork();
  if (pid == 0) {
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);  // a ctest timeout takes the child along
    ::dup2(out[1], STDOUT_FILENO);
    ::close(out[0]);
    ::close(out[1]);
    ::execl(kPython, kPython, script.c_str(), log.c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  ::close(out[1]);
  if (pid < 0) {
    ::close(out[0]);
    result.error = "fork failed";
    return result;
  }
  server->pid_ = pid;
  // The port line: poll bounds the wait, so a child that never prints fails the test.
  std::string line;
  const auto end = std::chrono::steady_clock::now() + Scaled(deadline);
  while (line.find('\n') == std::string::npos) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        end - std::chrono::steady_clock::now());
    pollfd p{out[0], POLLIN, 0};
    if (left.count() <= 0 || ::poll(&p, 1, static_cast<int>(left.count())) <= 0) break;
    char buf[64];
    const ssize_t n = ::read(out[0], buf, sizeof buf);
    if (n <= 0) break;
    line.append(buf, static_cast<size_t>(n));
  }
  ::close(out[0]);
  server->port_ = std::atoi(line.c_str());
  if (server->port_ <= 0) {
    result.error = "h11_upstream.py printed no port (got \"" + line + "\")";
    return result;
  }
  result.server = std::move(server);
  return result;
}

H11Upstream::~H11Upstream() {
  if (pid_ > 0) {
    ::kill(pid_, SIGKILL);
    int status;
    ::waitpid(pid_, &status, 0);
  }
}

std::vector<H11Upstream::Event> H11Upstream::Events() const {
  std::vector<Event> events;
  std::ifstream in(dir_.File("events.jsonl"));
  std::string line;
  while (std::getline(in, line)) {
    // The writer flushes whole lines; a last line without its '\n' is still being written.
    if (in.eof()) break;
    nlohmann::json j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded()) continue;
    Event e;
    e.kind = j.value("event", "");
    e.conn = j.value("conn", 0);
    e.method = j.value("method", "");
    e.target = j.value("target", "");
    e.body = j.value("body", "");
    e.detail = j.value("detail", "");
    if (j.contains("headers")) {
      for (const auto& h : j["headers"]) e.headers.emplace_back(h[0], h[1]);
    }
    events.push_back(std::move(e));
  }
  return events;
}

bool H11Upstream::Quiet() const {
  int open = 0;
  for (const Event& e : Events()) {
    if (e.kind == "open") ++open;
    if (e.kind == "close") --open;
  }
  return open == 0;
}

}  // namespace tollgate::testing
