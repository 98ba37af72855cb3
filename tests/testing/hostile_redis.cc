#include "testing/hostile_redis.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <utility>

namespace tollgate::testing {

struct HostileRedis::Conn {
  int fd = -1;
  std::string in;
  std::string out;
  size_t endless_left = 0;                                // bulk bytes still to send (kEndlessBulk)
  std::vector<std::pair<std::string, std::string>> held;  // (command, subcommand) under kHold
};

namespace {

constexpr size_t kMaxArgs = 1 << 16;
constexpr size_t kMaxArg = 64 << 20;
constexpr size_t kEndlessBytes = size_t{1} << 30;

std::string Bulk(std::string_view s) {
  return "$" + std::to_string(s.size()) + "\r\n" + std::string(s) + "\r\n";
}

// A RESP line "<c><integer>\r\n" at `pos`: the integer, and pos moved past it.
bool ReadHeader(const std::string& in, size_t* pos, char type, long long max, long long* out) {
  if (*pos >= in.size()) return false;
  const size_t end = in.find("\r\n", *pos);
  if (end == std::string::npos) return false;
  if (in[*pos] != type) {
    *out = -1;
    return true;
  }
  auto [p, ec] = std::from_chars(in.data() + *pos + 1, in.data() + end, *out);
  if (ec != std::errc() || p != in.data() + end || *out < 0 || *out > max) *out = -1;
  *pos = end + 2;
  return true;
}

// Parses one command from the front of `in`: 1 done (argv filled, consumed),
// 0 incomplete, -1 malformed.
int ParseCommand(std::string& in, std::vector<std::string>* argv) {
  size_t pos = 0;
  long long n = 0;
  if (!ReadHeader(in, &pos, '*', kMaxArgs, &n)) return 0;
  if (n < 0) return -1;
  argv->clear();
  for (long long i = 0; i < n; ++i) {
    long long len = 0;
    if (!ReadHeader(in, &pos, '$', kMaxArg, &len)) return 0;
    if (len < 0) return -1;
    if (in.size() < pos + static_cast<size_t>(len) + 2) return 0;
    argv->push_back(in.substr(pos, static_cast<size_t>(len)));
    pos += static_cast<size_t>(len) + 2;
  }
  in.erase(0, pos);
  return 1;
}

std::string Upper(std::string s) {
  for (char& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return s;
}

}  // namespace

std::unique_ptr<HostileRedis> HostileRedis::Start(Options options, std::string* error) {
  std::unique_ptr<HostileRedis> r(new HostileRedis(options));
  r->listen_fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(a);
  if (r->listen_fd_ < 0 || ::bind(r->listen_fd_, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0 ||
      ::listen(r->listen_fd_, 64) != 0 ||
      ::getsockname(r->listen_fd_, reinterpret_cast<sockaddr*>(&a), &len) != 0 ||
      ::pipe2(r->wake_, O_CLOEXEC | O_NONBLOCK) != 0) {
    *error = std::string("hostile redis: ") + std::strerror(errno);
    return nullptr;
  }
  r->port_ = ntohs(a.sin_port);
  r->thread_ = std::thread([p = r.get()] { p->Run(); });
  return r;
}

HostileRedis::~HostileRedis() {
  stop_ = true;
  if (wake_[1] >= 0) {
    const char x = 0;
    (void)!::write(wake_[1], &x, 1);
  }
  if (thread_.joinable()) thread_.join();
  for (int fd : {listen_fd_, wake_[0], wake_[1]}) {
    if (fd >= 0) ::close(fd);
  }
}

void HostileRedis::SetReply(Reply reply) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (options_.reply == Reply::kHold && reply != Reply::kHold) release_held_ = true;
    options_.reply = reply;
  }
  const char x = 0;
  (void)!::write(wake_[1], &x, 1);
}

std::vector<std::string> HostileRedis::commands() const {
  std::lock_guard<std::mutex> lock(mu_);
  return commands_;
}

bool HostileRedis::Received(std::string_view prefix) const {
  for (const auto& c : commands()) {
    if (c.rfind(prefix, 0) == 0) return true;
  }
  return false;
}

std::string HostileRedis::TopologyReply(Reply reply, bool shards) const {
  long long start = 0, end = 16383;
  if (reply == Reply::kHugeSlotRange) end = 9223372036854775807LL;
  if (reply == Reply::kNegativeSlotRange) start = -5, end = 100;
  const int owner = topology_port_.load() != 0 ? topology_port_.load() : port_;
  const std::string id(40, static_cast<char>('a' + owner % 6));
  const std::string s = ":" + std::to_string(start) + "\r\n:" + std::to_string(end) + "\r\n";
  if (!shards) {
    return "*1\r\n*3\r\n" + s + "*3\r\n" + Bulk("127.0.0.1") + ":" + std::to_string(owner) +
           "\r\n" + Bulk(id);
  }
  return "*1\r\n*4\r\n" + Bulk("slots") + "*2\r\n" + s + Bulk("nodes") + "*1\r\n*12\r\n" +
         Bulk("id") + Bulk(id) + Bulk("port") + ":" + std::to_string(owner) + "\r\n" + Bulk("ip") +
         Bulk("127.0.0.1") + Bulk("endpoint") + Bulk("127.0.0.1") + Bulk("role") + Bulk("master") +
         Bulk("health") + Bulk("online");
}

void HostileRedis::OnCommand(Conn& c, const std::vector<std::string>& argv) {
  const std::string cmd = argv.empty() ? "" : Upper(argv[0]);
  const std::string sub = argv.size() > 1 ? Upper(argv[1]) : "";
  Reply reply;
  {
    std::lock_guard<std::mutex> lock(mu_);
    commands_.push_back(cmd + (sub.empty() ? "" : " " + sub));
    reply = options_.reply;
  }
  // Replies keep the commands' order: behind a held command, this one waits too.
  const bool script_load = cmd == "SCRIPT" && sub == "LOAD" && options_.answer_script_load;
  if ((reply == Reply::kHold && !script_load) || !c.held.empty()) {
    c.held.emplace_back(cmd, sub);
    return;
  }
  Answer(c, cmd, sub, reply);
}

void HostileRedis::Answer(Conn& c, const std::string& cmd, const std::string& sub, Reply reply) {
  if (cmd == "SCRIPT" && sub == "LOAD" && options_.answer_script_load) {
    c.out += Bulk(std::string(40, 'f'));
    return;
  }
  const bool topology = cmd == "CLUSTER" && (sub == "SLOTS" || sub == "SHARDS");
  if (topology && options_.topology_override) reply = options_.topology;
  switch (reply) {
    case Reply::kWrongType:
      c.out += ":42\r\n";
      break;
    case Reply::kHugeArray:
      c.out += "*2147483647\r\n";
      break;
    case Reply::kNegativeLength:
      c.out += topology ? "*-7\r\n" : "$-7\r\n";
      break;
    case Reply::kDeepNesting:
      for (int i = 0; i < 100000; ++i) c.out += "*1\r\n";
      c.out += ":1\r\n";
      break;
    case Reply::kPartial:
      c.out += topology ? "*1\r\n*3\r\n:0\r\n" : "*3\r\n:1\r\n";
      break;
    case Reply::kEndlessBulk:
      c.out += "$" + std::to_string(kEndlessBytes) + "\r\n";
      c.endless_left = kEndlessBytes;
      break;
    case Reply::kSilence:
    case Reply::kHold:
      break;
    case Reply::kHugeSlotRange:
    case Reply::kNegativeSlotRange:
    case Reply::kValidTopology:
      c.out += topology ? TopologyReply(reply, sub == "SHARDS") : "+OK\r\n";
      break;
  }
}

void HostileRedis::Run() {
  std::vector<std::unique_ptr<Conn>> conns;
  std::vector<pollfd> fds;
  char buf[65536];
  const std::string filler(sizeof(buf), 'x');
  while (!stop_) {
    fds.clear();
    fds.push_back({wake_[0], POLLIN, 0});
    fds.push_back({listen_fd_, POLLIN, 0});
    for (const auto& c : conns) {
      const bool write = !c->out.empty() || c->endless_left > 0;
      fds.push_back({c->fd, static_cast<short>(POLLIN | (write ? POLLOUT : 0)), 0});
    }
    if (::poll(fds.data(), fds.size(), 200) < 0 && errno != EINTR) break;
    if (fds[0].revents & POLLIN) {
      char drain[64];
      while (::read(wake_[0], drain, sizeof(drain)) > 0) {
      }
    }
    if (release_held_.exchange(false)) {
      Reply reply;
      {
        std::lock_guard<std::mutex> lock(mu_);
        reply = options_.reply;
      }
      for (const auto& c : conns) {
        for (const auto& [cmd, sub] : c->held) Answer(*c, cmd, sub, reply);
        c->held.clear();
      }
    }
    if (fds[1].revents & POLLIN) {
      for (;;) {
        const int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) break;
        auto c = std::make_unique<Conn>();
        c->fd = fd;
        conns.push_back(std::move(c));
        ++accepted_;
        ++open_;
      }
    }
    for (size_t i = 2; i < fds.size(); ++i) {
      Conn& c = *conns[i - 2];
      bool closed = (fds[i].revents & (POLLERR | POLLHUP | POLLNVAL)) != 0;
      if (!closed && (fds[i].revents & POLLIN)) {
        const ssize_t n = ::read(c.fd, buf, sizeof(buf));
        if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) {
          closed = true;
        } else if (n > 0) {
          c.in.append(buf, static_cast<size_t>(n));
          std::vector<std::string> argv;
          int parsed;
          while ((parsed = ParseCommand(c.in, &argv)) == 1) OnCommand(c, argv);
          if (parsed < 0 || c.in.size() > kMaxArg + 4096) closed = true;
        }
      }
      if (!closed && (fds[i].revents & POLLOUT)) {
        if (c.out.empty() && c.endless_left > 0) {
          const size_t n = std::min(c.endless_left, filler.size());
          c.out.assign(filler, 0, n);
          c.endless_left -= n;
        }
        const ssize_t n = ::send(c.fd, c.out.data(), c.out.size(), MSG_NOSIGNAL);
        if (n > 0) {
          c.out.erase(0, static_cast<size_t>(n));
        } else if (n < 0 && errno != EAGAIN && errno != EINTR) {
          closed = true;
        }
      }
      if (closed) {
        ::close(c.fd);
        c.fd = -1;
        --open_;
      }
    }
    std::erase_if(conns, [](const std::unique_ptr<Conn>& c) { return c->fd < 0; });
  }
  for (const auto& c : conns) ::close(c->fd);
  open_ -= conns.size();
}

}  // namespace tollgate::testing
