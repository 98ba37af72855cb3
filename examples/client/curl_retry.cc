// A polite HTTP client with libcurl and tollgate's client helpers:
//  - retries 429/503 (and transport errors) with exponential backoff and full
//    jitter, never earlier than Retry-After (delay-seconds or HTTP-date);
//  - paces itself by the RateLimit fields: spreads the remaining quota over the
//    time to reset, and waits for the reset when nothing remains.
//
//   curl_retry URL [--requests N] [--header 'Name: value'] [--max-attempts N] [--max-total-ms N]
//
// Prints one line per attempt; exits 0 when every request finally succeeded.
#include <curl/curl.h>

#include <tollgate/client.h>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace {

constexpr size_t kMaxHeaders = 100;
constexpr size_t kMaxHeaderBytes = 16 * 1024;

struct Response {
  long status = 0;
  std::vector<std::pair<std::string, std::string>> headers;
  size_t header_bytes = 0;
};

std::string Trim(std::string s) {
  while (!s.empty() && (s.back() == '\r' || s.back() == '\n' || s.back() == ' ')) s.pop_back();
  size_t i = 0;
  while (i < s.size() && (s[i] == ' ' || s[i] == '\t')) ++i;
  return s.substr(i);
}

size_t OnHeader(char* data, size_t size, size_t n, void* user) {
  auto* r = static_cast<Response*>(user);
  const std::string line(data, size * n);
  r->header_bytes += line.size();
  if (line.rfind("HTTP/", 0) == 0) r->headers.clear();  // a new response (redirects, 100)
  const size_t colon = line.find(':');
  if (colon != std::string::npos && r->headers.size() < kMaxHeaders &&
      r->header_bytes <= kMaxHeaderBytes) {
    r->headers.emplace_back(line.substr(0, colon), Trim(line.substr(colon + 1)));
  }
  return size * n;
}

size_t Discard(char*, size_t size, size_t n, void*) { return size * n; }

// One attempt; false on a transport error.
bool Fetch(CURL* curl, const std::string& url, curl_slist* headers, Response* out,
           std::string* error) {
  *out = Response{};
  curl_easy_setopt(curl, CURLOPT_URL, url.c_str());
  curl_easy_setopt(curl, CURLOPT_HTTPHEADER, headers);
  curl_easy_setopt(curl, CURLOPT_HEADERFUNCTION, OnHeader);
  curl_easy_setopt(curl, CURLOPT_HEADERDATA, out);
  curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, Discard);
  curl_easy_setopt(curl, CURLOPT_CONNECTTIMEOUT_MS, 3000L);
  curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS, 10000L);
  curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
  const CURLcode rc = curl_easy_perform(curl);
  if (rc != CURLE_OK) {
    *error = curl_easy_strerror(rc);
    return false;
  }
  curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &out->status);
  return true;
}

double Seconds(tollgate::Nanos d) { return static_cast<double>(d.count()) / 1e9; }

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr,
                 "usage: %s URL [--requests N] [--header 'Name: value'] [--max-attempts N] "
                 "[--max-total-ms N]\n",
                 argv[0]);
    return 2;
  }
  const std::string url = argv[1];
  int requests = 1;
  tollgate::RetryOptions retry;
  curl_global_init(CURL_GLOBAL_DEFAULT);
  curl_slist* headers = nullptr;
  for (int i = 2; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--requests") {
      requests = std::max(1, std::atoi(argv[i + 1]));
    } else if (flag == "--header") {
      headers = curl_slist_append(headers, argv[i + 1]);
    } else if (flag == "--max-attempts") {
      retry.max_attempts = std::max(1, std::atoi(argv[i + 1]));
    } else if (flag == "--max-total-ms") {
      retry.max_total = std::chrono::milliseconds(std::atoll(argv[i + 1]));
    } else {
      std::fprintf(stderr, "unknown flag %s\n", flag.c_str());
      return 2;
    }
  }

  const tollgate::Clock& clock = tollgate::SystemClock::Instance();
  tollgate::RetryPolicy policy(retry, clock, std::random_device{}());
  CURL* curl = curl_easy_init();
  int succeeded = 0;
  for (int request = 1; request <= requests; ++request) {
    policy.Reset();
    while (true) {
      Response response;
      std::string error;
      tollgate::RetryDecision next;
      tollgate::RateLimitInfo info;
      if (Fetch(curl, url, headers, &response, &error)) {
        std::vector<tollgate::HeaderPair> pairs;
        for (const auto& [name, value] : response.headers) pairs.emplace_back(name, value);
        info = tollgate::ParseRateLimitHeaders(pairs, clock.WallNow());
        const tollgate::RateLimitQuota* q = info.Tightest();
        std::printf("request %d attempt %d: %ld remaining=%lld source=%s", request,
                    policy.attempts() + 1, response.status,
                    q ? static_cast<long long>(*q->remaining) : -1LL,
                    std::string(tollgate::RateLimitSourceName(info.source)).c_str());
        if (info.retry_after) std::printf(" retry-after=%.3fs", Seconds(*info.retry_after));
        next = policy.OnResponse(static_cast<int>(response.status), info);
      } else {
        std::printf("request %d attempt %d: transport error: %s", request, policy.attempts() + 1,
                    error.c_str());
        next = policy.OnTransportError();
      }
      if (next.retry) {
        std::printf(" -> retry in %.3fs (%s)\n", Seconds(next.delay),
                    std::string(next.reason).c_str());
        std::fflush(stdout);
        std::this_thread::sleep_for(next.delay);
        continue;
      }
      const bool ok = response.status >= 200 && response.status < 300;
      succeeded += ok ? 1 : 0;
      // Pace the next request by what the server said is left.
      const tollgate::Nanos pace = ok ? tollgate::PaceDelay(info) : tollgate::Nanos(0);
      std::printf(" -> %s", ok ? "done" : std::string(next.reason).c_str());
      if (pace > tollgate::Nanos(0) && request < requests) {
        std::printf(", pacing %.3fs", Seconds(pace));
        std::fflush(stdout);
        std::this_thread::sleep_for(pace);
      }
      std::printf("\n");
      break;
    }
  }
  std::printf("%d of %d requests succeeded\n", succeeded, requests);
  curl_easy_cleanup(curl);
  curl_slist_free_all(headers);
  curl_global_cleanup();
  return succeeded == requests ? 0 : 1;
}
