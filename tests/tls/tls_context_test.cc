// tollgate_tls's server contexts (include/tollgate/tls.h) against certificates
// made by `openssl` at the start of the suite (a CA, a server certificate, an
// expired one, client certificates with DNS and URI names, one from another
// CA): the errors and warnings a config check reports, and real TLS handshakes
// between a server context and an OpenSSL client over an in-memory BIO pair,
// classified as tollgated's handshake metric counts them.
#include <gtest/gtest.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <sys/wait.h>

#include <cstdio>
#include <ctime>
#include <fstream>
#include <string>
#include <vector>

#include "testing/scoped_temp_dir.h"
#include "tollgate/tls.h"

namespace tollgate {
namespace {

using testing::ScopedTempDir;

int Shell(const std::string& command, std::string* output) {
  FILE* p = ::popen(("(" + command + ") 2>&1").c_str(), "r");
  if (p == nullptr) return -1;
  char buf[4096];
  while (size_t n = std::fread(buf, 1, sizeof buf, p)) output->append(buf, n);
  int status = ::pclose(p);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

std::string Messages(const std::vector<ConfigError>& errors) {
  std::string out;
  for (const auto& e : errors) out += e.ToString() + "\n";
  return out;
}

class TlsContextTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    certs_ = new ScopedTempDir("TlsContextTest");
    const std::string d = certs_->path();
    const std::string key = "-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes";
    auto ca = [&](const std::string& name, const std::string& cn) {
      return "openssl req -x509 " + key + " -keyout " + d + "/" + name + ".key -out " + d + "/" +
             name + ".pem -subj /CN=" + cn + " -days 2";
    };
    auto issue = [&](const std::string& name, const std::string& cn, const std::string& san,
                     const std::string& issuer, int days) {
      std::string p = d + "/" + name;
      return "openssl req " + key + " -keyout " + p + ".key -out " + p + ".csr -subj /CN=" + cn +
             " && printf 'subjectAltName=" + san + "\\n' > " + p +
             ".ext && openssl x509 -req -in " + p + ".csr -CA " + d + "/" + issuer +
             ".pem -CAkey " + d + "/" + issuer + ".key -CAcreateserial -days " +
             std::to_string(days) + " -extfile " + p + ".ext -out " + p + ".pem";
    };
    for (const std::string& cmd : {
             ca("ca", "tollgate-test-ca"),
             ca("other-ca", "other-test-ca"),
             issue("server", "server-1", "DNS:localhost", "ca", 2),
             issue("expired", "server-old", "DNS:localhost", "ca", -1),
             issue("client-a", "client-a", "DNS:client-a.test", "ca", 2),
             issue("client-b", "client-b", "DNS:client-b.test", "ca", 2),
             issue("client-c", "someone", "URI:spiffe://test/client-c", "ca", 2),
             issue("stranger", "client-a", "DNS:client-a.test", "other-ca", 2),
         }) {
      std::string output;
      ASSERT_EQ(Shell(cmd, &output), 0) << cmd << "\n" << output;
    }
  }
  static void TearDownTestSuite() {
    delete certs_;
    certs_ = nullptr;
  }

  static std::string Cert(const std::string& name) { return certs_->File(name + ".pem"); }
  static std::string Key(const std::string& name) { return certs_->File(name + ".key"); }

  static TlsServerSettings Server(const std::string& name = "server") {
    TlsServerSettings s;
    s.cert_file = Cert(name);
    s.key_file = Key(name);
    return s;
  }

  SslCtxPtr Make(const TlsServerSettings& s) {
    errors_.clear();
    warnings_.clear();
    return MakeServerTlsContext(s, "tls", std::time(nullptr), &errors_, &warnings_);
  }

  // One handshake of an OpenSSL client (trusting `ca`, presenting `client`'s
  // certificate unless it is "") with a server made from `server_ctx`, over a
  // BIO pair; the server's result as the handshake metric names it.
  static TlsHandshakeResult Handshake(ssl_ctx_st* server_ctx, const std::string& client) {
    SslCtxPtr client_ctx(SSL_CTX_new(TLS_client_method()));
    EXPECT_EQ(SSL_CTX_load_verify_locations(client_ctx.get(), Cert("ca").c_str(), nullptr), 1);
    SSL_CTX_set_verify(client_ctx.get(), SSL_VERIFY_PEER, nullptr);
    if (!client.empty()) {
      EXPECT_EQ(SSL_CTX_use_certificate_chain_file(client_ctx.get(), Cert(client).c_str()), 1);
      EXPECT_EQ(
          SSL_CTX_use_PrivateKey_file(client_ctx.get(), Key(client).c_str(), SSL_FILETYPE_PEM), 1);
    }
    SSL* c = SSL_new(client_ctx.get());
    SSL* s = SSL_new(server_ctx);
    BIO* client_bio = nullptr;
    BIO* server_bio = nullptr;
    BIO_new_bio_pair(&client_bio, 0, &server_bio, 0);
    SSL_set_bio(c, client_bio, client_bio);
    SSL_set_bio(s, server_bio, server_bio);
    SSL_set_connect_state(c);
    SSL_set_accept_state(s);
    SSL_set1_host(c, "localhost");
    ERR_clear_error();
    TlsHandshakeResult result = TlsHandshakeResult::kTimeout;  // no end in the rounds below
    bool client_done = false;
    // A TLS 1.3 handshake takes a few flights; each round moves every pending one.
    for (int round = 0; round < 32; ++round) {
      if (!client_done) {
        int rc = SSL_do_handshake(c);
        int why = SSL_get_error(c, rc);
        client_done = rc == 1 || (why != SSL_ERROR_WANT_READ && why != SSL_ERROR_WANT_WRITE);
      }
      int rc = SSL_do_handshake(s);
      if (rc == 1) {
        // TLS 1.3: the server verifies the client's certificate in its last flight.
        result = TlsHandshakeResult::kOk;
        break;
      }
      int why = SSL_get_error(s, rc);
      if (why != SSL_ERROR_WANT_READ && why != SSL_ERROR_WANT_WRITE) {
        unsigned long err = ERR_get_error();
        result = ClassifyHandshakeFailure(s, err);
        break;
      }
    }
    ERR_clear_error();
    SSL_free(c);
    SSL_free(s);
    return result;
  }

  static ScopedTempDir* certs_;
  std::vector<ConfigError> errors_;
  std::vector<ConfigError> warnings_;
};

ScopedTempDir* TlsContextTest::certs_ = nullptr;

TEST_F(TlsContextTest, AValidCertificateAndKeyMakeAContextThatHandshakes) {
  SslCtxPtr ctx = Make(Server());
  ASSERT_NE(ctx, nullptr) << Messages(errors_);
  EXPECT_TRUE(errors_.empty()) << Messages(errors_);
  EXPECT_TRUE(warnings_.empty()) << Messages(warnings_);
  EXPECT_EQ(Handshake(ctx.get(), ""), TlsHandshakeResult::kOk);
}

TEST_F(TlsContextTest, AKeyOfAnotherCertificateIsAnErrorAtKeyFile) {
  TlsServerSettings s = Server();
  s.key_file = Key("client-a");
  EXPECT_EQ(Make(s), nullptr);
  ASSERT_EQ(errors_.size(), 1u) << Messages(errors_);
  EXPECT_EQ(errors_[0].path, "tls.key_file");
  EXPECT_EQ(errors_[0].message,
            Key("client-a") + ": does not match the certificate in " + Cert("server"));
}

TEST_F(TlsContextTest, MissingAndMalformedFilesAreErrorsAtTheirFields) {
  TlsServerSettings s = Server();
  s.cert_file = certs_->File("absent.pem");
  EXPECT_EQ(Make(s), nullptr);
  ASSERT_EQ(errors_.size(), 1u) << Messages(errors_);
  EXPECT_EQ(errors_[0].path, "tls.cert_file");
  EXPECT_EQ(errors_[0].message.rfind(certs_->File("absent.pem") + ": cannot read: ", 0), 0u)
      << errors_[0].message;

  s = Server();
  s.key_file = "";
  s.allowed_names = {"client-a"};  // without client_ca_file
  EXPECT_EQ(Make(s), nullptr);
  EXPECT_EQ(Messages(errors_),
            "tls.key_file: is required\n"
            "tls.allowed_names: needs client_ca_file (names are checked on client "
            "certificates)\n");

  s = Server();
  s.client_ca_file = Key("ca");  // a key, not a certificate
  EXPECT_EQ(Make(s), nullptr);
  EXPECT_EQ(Messages(errors_), "tls.client_ca_file: " + Key("ca") + ": holds no PEM certificate\n");
}

TEST_F(TlsContextTest, AnExpiredCertificateIsAWarningNotAnError) {
  SslCtxPtr ctx = Make(Server("expired"));
  EXPECT_NE(ctx, nullptr) << Messages(errors_);
  ASSERT_EQ(warnings_.size(), 1u);
  EXPECT_EQ(warnings_[0].path, "tls.cert_file");
  EXPECT_NE(warnings_[0].message.find("the certificate expired on "), std::string::npos)
      << warnings_[0].message;
}

TEST_F(TlsContextTest, ReadPemFileRefusesFilesOverOneMebibyte) {
  const std::string big = certs_->File("big.pem");
  std::ofstream(big) << std::string((size_t{1} << 20) + 1, 'A');
  std::string pem, why;
  EXPECT_FALSE(ReadPemFile(big, &pem, &why));
  EXPECT_EQ(why, big + ": larger than 1 MiB: not a PEM file");
  EXPECT_FALSE(ReadPemFile("", &pem, &why));
  EXPECT_EQ(why, "is required");
  EXPECT_TRUE(ReadPemFile(Cert("ca"), &pem, &why)) << why;
  EXPECT_EQ(pem.rfind("-----BEGIN CERTIFICATE-----", 0), 0u);
}

TEST_F(TlsContextTest, MutualTlsChecksTheChainAndTheAllowedNames) {
  TlsServerSettings s = Server();
  s.client_ca_file = Cert("ca");
  // DNS names compare without case, URIs exactly.
  s.allowed_names = {"CLIENT-A.test", "spiffe://test/client-c"};
  SslCtxPtr ctx = Make(s);
  ASSERT_NE(ctx, nullptr) << Messages(errors_);
  EXPECT_EQ(Handshake(ctx.get(), "client-a"), TlsHandshakeResult::kOk);
  EXPECT_EQ(Handshake(ctx.get(), "client-c"), TlsHandshakeResult::kOk);
  EXPECT_EQ(Handshake(ctx.get(), "client-b"), TlsHandshakeResult::kNameNotAllowed);
  EXPECT_EQ(Handshake(ctx.get(), "stranger"), TlsHandshakeResult::kBadClientCert);
  EXPECT_EQ(Handshake(ctx.get(), ""), TlsHandshakeResult::kNoClientCert);
}

TEST_F(TlsContextTest, HandshakeResultNamesAreTheMetricLabels) {
  EXPECT_EQ(TlsHandshakeResultName(TlsHandshakeResult::kOk), "ok");
  EXPECT_EQ(TlsHandshakeResultName(TlsHandshakeResult::kNameNotAllowed), "name_not_allowed");
  EXPECT_EQ(TlsHandshakeResultName(TlsHandshakeResult::kCount), "unknown");
  EXPECT_EQ(ClassifyHandshakeFailure(nullptr, 0), TlsHandshakeResult::kClosed);
}

}  // namespace
}  // namespace tollgate
