#include "base/instance_id.h"

#include <unistd.h>

#include <cstdio>
#include <random>

namespace tollgate {

std::string DefaultInstanceId() {
  char host[256] = {0};
  if (gethostname(host, sizeof(host) - 1) != 0) host[0] = '\0';
  std::random_device rd;
  char suffix[32];
  std::snprintf(suffix, sizeof(suffix), ":%d:%08x", static_cast<int>(getpid()), rd());
  return std::string(host) + suffix;
}

}  // namespace tollgate
