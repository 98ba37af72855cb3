// Test helper: Debian's chromium, headless, as a child process of the test,
// driven through the DevTools protocol (CDP) over its WebSocket with
// Boost.Beast: one page, its console errors, exceptions, failed loads and
// Content-Security-Policy violations collected for assertions.
//
// Start() launches chromium with a fresh profile in `dir` and
// --remote-debugging-port=0, waits (bounded) for the port it writes to
// DevToolsActivePort and attaches to its page. Every protocol call is bounded
// by a deadline (scaled for a loaded machine, testing/timing.h): a stuck
// browser fails the test instead of hanging it. The child is killed with the
// helper (and with the test: PR_SET_PDEATHSIG).
//
// Conditions are awaited inside the page (WaitFor: a promise re-checking an
// expression every 50 ms until it holds or a deadline passes), never by
// sleeping in the test. Not for production use; not thread-safe.
#ifndef TOLLGATE_TESTS_SERVER_HEADLESS_CHROMIUM_H_
#define TOLLGATE_TESTS_SERVER_HEADLESS_CHROMIUM_H_

#include <sys/types.h>

#include <chrono>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace tollgate::testing {

class HeadlessChromium {
 public:
  // The chromium binary ($TOLLGATE_CHROMIUM, else /usr/bin/chromium), or ""
  // when it is not installed (tools/deps.sh installs it).
  static std::string BinaryPath();

  // Starts chromium with its profile in `dir` (which must exist); nullptr and
  // *error when it does not come up.
  static std::unique_ptr<HeadlessChromium> Start(const std::string& dir, std::string* error);
  ~HeadlessChromium();

  // One protocol call: its "result", or a json with "error" (the protocol's
  // error, or "timeout"/"closed"). Events read meanwhile are collected.
  nlohmann::json Call(const std::string& method, const nlohmann::json& params = {});
  // Navigates and waits until the document has loaded (readyState complete).
  bool Navigate(const std::string& url);
  // The value of `expression` (awaited when it is a promise), or a json
  // {"exception": text} when it threw.
  nlohmann::json Eval(const std::string& expression);
  // Waits, in the page, until `expression` is truthy: true, or false after
  // `deadline` (scaled).
  bool WaitFor(const std::string& expression,
               std::chrono::milliseconds deadline = std::chrono::seconds(20));

  // Writes a PNG of the page as it is to `path`; false when it could not.
  bool Screenshot(const std::string& path);

  // What went wrong in the page so far: console errors, uncaught exceptions,
  // failed loads, CSP violations ("csp: <directive> <blocked uri>"), one
  // line each.
  std::vector<std::string> Problems();

 private:
  struct Impl;
  explicit HeadlessChromium(std::unique_ptr<Impl> impl);
  void Collect(const nlohmann::json& event);

  std::unique_ptr<Impl> impl_;
};

}  // namespace tollgate::testing

#endif  // TOLLGATE_TESTS_SERVER_HEADLESS_CHROMIUM_H_
