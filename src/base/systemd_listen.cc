#include "tollgate/systemd_listen.h"

#include <algorithm>
#include <charconv>
#include <cstdlib>

#include "tollgate/config_error.h"

namespace tollgate {

SystemdListenEnv SystemdListenEnv::FromProcess() {
  auto get = [](const char* name) -> std::optional<std::string> {
    const char* v = std::getenv(name);
    return v ? std::optional<std::string>(v) : std::nullopt;
  };
  return {get("LISTEN_PID"), get("LISTEN_FDS"), get("LISTEN_FDNAMES")};
}

std::string SystemdListenFd::Describe() const {
  return "systemd socket " + std::to_string(fd) + " (\"" +
         PrintableText(std::string_view(name).substr(0, 64)) + "\")";
}

namespace {

// A decimal number without sign, spaces or leading junk, at most `max`
// (from_chars alone would take "-0").
std::optional<long long> SmallDecimal(const std::string& text, long long max) {
  if (text.empty() || text[0] < '0' || text[0] > '9') return std::nullopt;
  long long v = 0;
  const char* end = text.data() + text.size();
  auto [ptr, err] = std::from_chars(text.data(), end, v);
  if (err != std::errc() || ptr != end || v > max) return std::nullopt;
  return v;
}

std::string Quoted(const std::string& value) {
  return "\"" + PrintableText(std::string_view(value).substr(0, 32)) + "\"";
}

// The descriptors' names from LISTEN_FDNAMES, or the accepted ones in order;
// false with plan->error.
bool NamesOf(const SystemdListenEnv& env, long long count,
             std::initializer_list<std::string_view> accepted, std::vector<std::string>* out,
             SystemdListenPlan* plan) {
  if (!env.listen_fdnames) {
    // No names: the order of the socket unit's ListenStream= lines.
    if (count > static_cast<long long>(accepted.size())) {
      plan->error = "LISTEN_FDS: more than " + std::to_string(accepted.size()) +
                    " sockets without LISTEN_FDNAMES";
      return false;
    }
    out->assign(accepted.begin(), accepted.begin() + count);
    return true;
  }
  // Counted before splitting: a hostile list costs no allocation per colon.
  std::string_view rest = *env.listen_fdnames;
  const size_t names = size_t(std::count(rest.begin(), rest.end(), ':')) + 1;
  if (names != size_t(count)) {
    plan->error = "LISTEN_FDNAMES: " + std::to_string(names) +
                  " names for LISTEN_FDS=" + std::to_string(count);
    return false;
  }
  for (size_t colon; (colon = rest.find(':')) != std::string_view::npos;) {
    out->emplace_back(rest.substr(0, colon));
    rest.remove_prefix(colon + 1);
  }
  out->emplace_back(rest);
  return true;
}

// "FileDescriptorName=listen or FileDescriptorName=admin".
std::string Alternatives(std::initializer_list<std::string_view> accepted) {
  std::string out;
  for (std::string_view name : accepted) {
    if (!out.empty()) out += " or ";
    out += "FileDescriptorName=";
    out += name;
  }
  return out;
}

}  // namespace

SystemdListenPlan ParseSystemdListenEnv(const SystemdListenEnv& env, long long pid,
                                        std::initializer_list<std::string_view> accepted) {
  SystemdListenPlan plan;
  if (!env.listen_fds) return plan;
  if (!env.listen_pid) {
    plan.ignored = "LISTEN_FDS is set without LISTEN_PID";
    return plan;
  }
  std::optional<long long> for_pid = SmallDecimal(*env.listen_pid, 0x7fffffff);
  if (!for_pid) {
    plan.error = "LISTEN_PID: " + Quoted(*env.listen_pid) + " is not a process id";
    return plan;
  }
  if (*for_pid != pid) {
    // sd_listen_fds: the sockets were passed to another process (this one inherited them).
    plan.ignored = "LISTEN_PID " + PrintableText(std::string_view(*env.listen_pid).substr(0, 32)) +
                   " is not this process (" + std::to_string(pid) + ")";
    return plan;
  }
  plan.for_this_process = true;
  std::optional<long long> count = SmallDecimal(*env.listen_fds, kMaxSystemdListenFds);
  if (!count) {
    plan.error = "LISTEN_FDS: " + Quoted(*env.listen_fds) + " must be a number from 0 to " +
                 std::to_string(kMaxSystemdListenFds);
    return plan;
  }
  std::vector<std::string> names;
  if (!NamesOf(env, *count, accepted, &names, &plan)) return plan;
  std::vector<SystemdListenFd> fds;
  for (long long i = 0; i < *count; ++i) {
    SystemdListenFd passed{kSystemdListenFdsStart + int(i), std::move(names[size_t(i)])};
    if (std::find(accepted.begin(), accepted.end(), passed.name) == accepted.end()) {
      plan.error = passed.Describe() + ": name it " + Alternatives(accepted);
      return plan;
    }
    for (const auto& earlier : fds) {
      if (earlier.name == passed.name) {
        plan.error = passed.Describe() + ": the name is passed twice";
        return plan;
      }
    }
    fds.push_back(std::move(passed));
  }
  plan.fds = std::move(fds);
  return plan;
}

}  // namespace tollgate
