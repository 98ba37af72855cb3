// A cpp-httplib server with tollgate in front of its routes.
//
//   embed_httplib serve 8080     serve until killed: curl -i localhost:8080/hello -H 'X-Api-Key:
//   k1' embed_httplib                self-test: serve on a free port, send 4 requests, expect 200
//   200 429 ...
#include <httplib.h>

#include <tollgate/local_store.h>
#include <tollgate/middleware/httplib.h>
#include <tollgate/policy.h>
#include <cstdio>
#include <cstring>
#include <thread>

int main(int argc, char** argv) {
  auto policies = tollgate::PolicyStore::FromText(R"({"rules": [{
      "name": "per-key", "limit_keys": ["header:x-api-key"],
      "algorithm": "token_bucket", "algorithm_config": {"rps": 1, "burst": 2}}]})");
  auto store = tollgate::LocalStore::Create({.max_keys = 100000});
  if (!policies.ok() || !store.ok()) return 1;
  auto enforcer =
      tollgate::Enforcer::Create(*policies, store->get(), &tollgate::SystemClock::Instance());
  if (!enforcer.ok()) return 1;

  httplib::Server server;
  // Rate limiting first; authentication runs only for requests that passed it.
  tollgate::middleware::InstallHttplib(server, **enforcer, {.skip_paths = {"/healthz"}},
                                       [](const httplib::Request& req, httplib::Response& res) {
                                         if (req.get_header_value("X-Api-Key").empty()) {
                                           res.status = 401;
                                           return httplib::Server::HandlerResponse::Handled;
                                         }
                                         return httplib::Server::HandlerResponse::Unhandled;
                                       });
  server.Get("/hello", [](const httplib::Request&, httplib::Response& res) {
    res.set_content("hello\n", "text/plain");
  });

  if (argc >= 3 && std::strcmp(argv[1], "serve") == 0) {
    return server.listen("0.0.0.0", std::atoi(argv[2])) ? 0 : 1;
  }

  const int port = server.bind_to_any_port("127.0.0.1");
  std::thread thread([&] { server.listen_after_bind(); });
  httplib::Client client("127.0.0.1", port);
  client.set_read_timeout(5);
  int statuses[4] = {};
  for (int& status : statuses) {
    auto res = client.Get("/hello", {{"X-Api-Key", "k1"}});
    status = res ? res->status : -1;
    std::printf("GET /hello -> %d %s\n", status,
                res ? res->get_header_value("RateLimit").c_str() : "");
  }
  server.stop();
  thread.join();
  const bool ok = statuses[0] == 200 && statuses[1] == 200 && statuses[2] == 429;
  std::printf(ok ? "httplib example: ok\n" : "httplib example: UNEXPECTED\n");
  return ok ? 0 : 1;
}
