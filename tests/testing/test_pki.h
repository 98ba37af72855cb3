// Test helper: a throwaway PKI made by the `openssl` command line in a
// directory (EC P-256 keys): self-signed CAs and the certificates they issue,
// with the subject and subjectAltName each test needs. Shared by the TLS tests
// of tollgated's listeners (tests/server/tls_test.cc) and of its upstream
// (tests/server/upstream_tls_test.cc). Also Shell(), a command's exit code and
// output. Not for production use.
#ifndef TOLLGATE_TESTS_TESTING_TEST_PKI_H_
#define TOLLGATE_TESTS_TESTING_TEST_PKI_H_

#include <string>
#include <utility>

namespace tollgate::testing {

struct CommandResult {
  int exit_code = -1;
  std::string output;  // stdout and stderr
};

// Runs `command` with /bin/sh; its exit code (-1 when it did not exit) and output.
CommandResult Shell(const std::string& command);

// Certificates as <dir>/<name>.pem with their keys as <dir>/<name>.key.
class TestPki {
 public:
  explicit TestPki(std::string dir) : dir_(std::move(dir)) {}

  // A self-signed CA, subject CN=`cn`, valid two days. Empty on success, else
  // the command and its output.
  std::string MakeCa(const std::string& name, const std::string& cn) const;
  // A certificate signed by the CA `issuer`, subject CN=`cn`, subjectAltName
  // `san` ("IP:127.0.0.1,DNS:localhost"), valid `days` days from now (a
  // negative count: already expired). Empty on success, else why not.
  std::string Issue(const std::string& name, const std::string& cn, const std::string& san,
                    const std::string& issuer, int days) const;

  std::string Cert(const std::string& name) const { return dir_ + "/" + name + ".pem"; }
  std::string Key(const std::string& name) const { return dir_ + "/" + name + ".key"; }
  const std::string& dir() const { return dir_; }

 private:
  std::string Run(const std::string& command) const;
  std::string dir_;
};

}  // namespace tollgate::testing

#endif  // TOLLGATE_TESTS_TESTING_TEST_PKI_H_
