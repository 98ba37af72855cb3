#include "testing/test_pki.h"

#include <sys/wait.h>

#include <cstdio>

namespace tollgate::testing {

namespace {
const std::string kNewKey = "-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes";
}  // namespace

CommandResult Shell(const std::string& command) {
  CommandResult r;
  FILE* p = ::popen(("(" + command + ") 2>&1").c_str(), "r");
  if (p == nullptr) return r;
  char buf[4096];
  while (size_t n = std::fread(buf, 1, sizeof buf, p)) r.output.append(buf, n);
  int status = ::pclose(p);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

std::string TestPki::Run(const std::string& command) const {
  CommandResult r = Shell(command);
  return r.exit_code == 0 ? "" : command + "\n" + r.output;
}

std::string TestPki::MakeCa(const std::string& name, const std::string& cn) const {
  return Run("openssl req -x509 " + kNewKey + " -keyout " + Key(name) + " -out " + Cert(name) +
             " -subj /CN=" + cn + " -days 2");
}

std::string TestPki::Issue(const std::string& name, const std::string& cn, const std::string& san,
                           const std::string& issuer, int days) const {
  const std::string p = dir_ + "/" + name;
  return Run("openssl req " + kNewKey + " -keyout " + Key(name) + " -out " + p +
             ".csr -subj /CN=" + cn + " && printf 'subjectAltName=" + san + "\\n' > " + p +
             ".ext && openssl x509 -req -in " + p + ".csr -CA " + Cert(issuer) + " -CAkey " +
             Key(issuer) + " -CAcreateserial -days " + std::to_string(days) + " -extfile " + p +
             ".ext -out " + Cert(name));
}

}  // namespace tollgate::testing
