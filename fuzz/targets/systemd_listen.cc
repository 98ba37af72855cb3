// Fuzz target: systemd socket activation's environment
// (ParseSystemdListenEnv, tollgate/systemd_listen.h, src/base/systemd_listen.cc),
// which tollgated reads at start from whatever launched it.
//
// Input: a flags byte (bit 0: LISTEN_PID set, bit 1: LISTEN_FDS set, bit 2:
// LISTEN_FDNAMES set), then LISTEN_PID's text, NUL, LISTEN_FDS's, NUL, and
// LISTEN_FDNAMES's (the rest). The process is pid 4242; the accepted names
// are "listen" and "admin".
// Properties:
//   - without LISTEN_FDS nothing: no descriptor, no error, not ignored;
//   - at most one of an error and a reason to ignore; either way no descriptor;
//   - for_this_process exactly when LISTEN_PID is plain decimal for 4242;
//   - accepted: as many descriptors as LISTEN_FDS says (plain decimal, at most
//     16), numbered from 3 in order, each name accepted and none twice; with
//     LISTEN_FDNAMES the names joined by ':' are that text;
//   - every message is printable ASCII (no control byte) and under 400 bytes.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "fuzz_input.h"
#include "tollgate/systemd_listen.h"

namespace {

using tollgate::fuzz::Quote;

constexpr long long kPid = 4242;

// The reference reading of a number: ASCII digits only, leading zeros allowed.
std::optional<long long> PlainDecimal(std::string_view s, long long max) {
  if (s.empty()) return std::nullopt;
  long long v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return std::nullopt;
    v = v * 10 + (c - '0');
    if (v > max) return std::nullopt;
  }
  return v;
}

void CheckMessage(const std::string& m) {
  FUZZ_CHECK(m.size() < 400, "message too long: " + Quote(m));
  for (char c : m) {
    const auto b = static_cast<unsigned char>(c);
    FUZZ_CHECK(b >= 0x20 && b != 0x7f, "control byte in a message: " + Quote(m));
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  tollgate::fuzz::Input in(data, size);
  const uint8_t flags = in.Byte();
  const std::string_view pid_text = in.Until('\0');
  const std::string_view fds_text = in.Until('\0');
  const std::string_view names_text = in.Rest();
  tollgate::SystemdListenEnv env;
  if (flags & 1) env.listen_pid = std::string(pid_text);
  if (flags & 2) env.listen_fds = std::string(fds_text);
  if (flags & 4) env.listen_fdnames = std::string(names_text);

  const tollgate::SystemdListenPlan plan =
      tollgate::ParseSystemdListenEnv(env, kPid, {"listen", "admin"});
  CheckMessage(plan.error);
  CheckMessage(plan.ignored);
  for (const auto& f : plan.fds) CheckMessage(f.Describe());

  if (!env.listen_fds) {
    FUZZ_CHECK(
        plan.fds.empty() && plan.error.empty() && plan.ignored.empty() && !plan.for_this_process,
        "something read without LISTEN_FDS");
    return 0;
  }
  FUZZ_CHECK(plan.error.empty() || plan.ignored.empty(), "both refused and ignored");
  if (!plan.error.empty() || !plan.ignored.empty()) {
    FUZZ_CHECK(plan.fds.empty(), "descriptors offered with " + plan.error + plan.ignored);
  }
  const auto pid = env.listen_pid ? PlainDecimal(*env.listen_pid, 0x7fffffff) : std::nullopt;
  FUZZ_CHECK(plan.for_this_process == (pid && *pid == kPid),
             "for_this_process wrong for LISTEN_PID " + Quote(pid_text));
  if (!plan.for_this_process || !plan.error.empty()) return 0;

  const auto count = PlainDecimal(fds_text, tollgate::kMaxSystemdListenFds);
  FUZZ_CHECK(count && plan.fds.size() == size_t(*count),
             "accepted LISTEN_FDS " + Quote(fds_text) + " as " + std::to_string(plan.fds.size()));
  std::string joined;
  for (size_t i = 0; i < plan.fds.size(); ++i) {
    const auto& f = plan.fds[i];
    FUZZ_CHECK(f.fd == tollgate::kSystemdListenFdsStart + int(i), "descriptors out of order");
    FUZZ_CHECK(f.name == "listen" || f.name == "admin", "name not accepted: " + Quote(f.name));
    for (size_t j = 0; j < i; ++j) FUZZ_CHECK(plan.fds[j].name != f.name, "a name twice");
    joined += (i ? ":" : "") + f.name;
  }
  if (env.listen_fdnames) {
    FUZZ_CHECK(joined == names_text, "names " + Quote(joined) + " from " + Quote(names_text));
  }
  return 0;
}
