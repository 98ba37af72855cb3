// Fuzz target: the admin token file (server/config.h ReadAdminTokenFile, over
// server/secrets.h ReadSecretFile), read at start from a path the config or
// --admin-token-file names: whatever an operator, a package script or a
// mistaken path put there.
//
// Input: the file's bytes (written to a temporary file, then read back).
// Properties:
//   - the file is accepted exactly when it is one non-empty line of at most
//     kMaxSecretBytes, optionally ended by "\n" or "\r\n"; the token is that
//     line and the config names the file;
//   - a refusal is "<path>: " and one of the reader's fixed reasons: it never
//     echoes what the file holds;
//   - CheckSecret refuses a token with a space, a control or non-ASCII byte,
//     or shorter than kMinSecretBytes, and says why.
#include <fcntl.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "fuzz_input.h"
#include "server/config.h"
#include "server/secrets.h"

namespace {

using tollgate::fuzz::Quote;
namespace server = tollgate::server;

// One temporary file for every input, removed at exit.
const std::string& TokenPath() {
  static const std::string path = [] {
    char name[] = "/tmp/tollgate-fuzz-token.XXXXXX";
    const int fd = ::mkstemp(name);
    if (fd < 0) std::abort();
    ::close(fd);
    static const std::string keep = name;
    std::atexit([] { ::unlink(keep.c_str()); });
    return keep;
  }();
  return path;
}

void Write(const std::string& path, std::string_view bytes) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_TRUNC | O_CLOEXEC);
  FUZZ_CHECK(fd >= 0, "cannot write the temporary file");
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    FUZZ_CHECK(n > 0, "short write to the temporary file");
    done += static_cast<size_t>(n);
  }
  ::close(fd);
}

// The one line the file holds, by the documented rule; false when it holds none.
bool OneLine(std::string_view text, std::string_view* line) {
  if (text.size() > server::kMaxSecretBytes + 2) return false;
  if (text.ends_with("\r\n")) {
    text.remove_suffix(2);
  } else if (text.ends_with('\n')) {
    text.remove_suffix(1);
  }
  if (text.empty() || text.find_first_of("\r\n") != std::string_view::npos) return false;
  *line = text;
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const std::string& path = TokenPath();
  Write(path, text);
  server::ServerConfig config;
  std::string error;
  const bool ok = server::ReadAdminTokenFile(path, &config, &error);
  std::string_view line;
  const bool expected = OneLine(text, &line);
  FUZZ_CHECK(ok == expected, "accepted " + std::to_string(ok) + " for " + Quote(text));
  if (ok) {
    FUZZ_CHECK(config.admin_token == line, "the token is not the line: " + Quote(text));
    FUZZ_CHECK(config.admin_token_file == path, "the config does not name the file");
    const std::string bad = server::CheckSecret(config.admin_token);
    bool visible = true;
    for (unsigned char c : config.admin_token) visible = visible && c > 0x20 && c < 0x7f;
    const bool fine = visible && config.admin_token.size() >= server::kMinSecretBytes &&
                      config.admin_token.size() <= server::kMaxSecretBytes;
    FUZZ_CHECK(bad.empty() == fine, "CheckSecret says " + Quote(bad) + " of " + Quote(text));
    return 0;
  }
  FUZZ_CHECK(config.admin_token.empty(), "a token kept after a refusal");
  const std::string prefix = path + ": ";
  FUZZ_CHECK(error.starts_with(prefix), "a refusal without the path: " + Quote(error));
  const std::string_view why = std::string_view(error).substr(prefix.size());
  bool known = false;
  for (std::string_view reason :
       {"is empty", "the first line is blank", "has more than one line", "larger than "}) {
    known = known || why.starts_with(reason);
  }
  FUZZ_CHECK(known, "a reason that is not one of the reader's: " + Quote(why));
  return 0;
}
