// Fuzz target: the lease scripts' replies (src/redis/lease_script.cc
// AcquireLease / ParseAcquireLeaseReply, ReleaseLease / IntegerReply): what a
// Redis server answers to the acquire and release EVALs of a concurrency
// lease, through the functions RedisStore and RedisClusterStore call.
//
// Input: a lease limit (max_in_flight, lease time), then the acquire's reply
// and the release's: each either structure-aware ({allowed, live, wait_us},
// mostly in range) or any reply tree (fuzz_reply.h), sometimes a failed call.
// Properties: each callback runs exactly once; a reply other than an array of
// three integers in range is an error (kScript, or kServer for an error reply,
// or the call's own failure), never a decision; an allowed decision carries
// the 32-hex-digit id the call drew (128 random bits) and the lease time, a
// denial no id and a wait within the longest lease, both 0 <= remaining <=
// max_in_flight; a release is true only for the integer 1, an
// error for anything but an integer, and refuses a malformed id before any call.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "fuzz_input.h"
#include "fuzz_reply.h"
#include "redis/lease_script.h"

namespace {

using tollgate::LeaseDecision;
using tollgate::LeaseLimit;
using tollgate::Nanos;
using tollgate::RedisOptions;
using tollgate::RedisReply;
using tollgate::Result;
using tollgate::StatusCode;
using tollgate::fuzz::Input;
namespace redis = tollgate::redis;

RedisReply AcquireReply(Input& in, const LeaseLimit& limit) {
  if (in.Bool()) return tollgate::fuzz::AnyReply(in);
  RedisReply r = tollgate::fuzz::IntegerArray(in, 0, 0, 0);
  const int64_t max = limit.max_in_flight();
  for (auto [lo, hi] : {std::pair<int64_t, int64_t>{-1, 2},
                        {-1, max + 1},
                        {-1, 2 * LeaseLimit::kMaxLeaseNs / 1000}}) {
    RedisReply e;
    e.type = RedisReply::Type::kInteger;
    e.integer = (in.Byte() & 3) == 0 ? in.Int64() : in.Range(lo, hi);
    r.elements.push_back(e);
  }
  if ((in.Byte() & 7) == 0) r.elements.pop_back();  // a short array
  return r;
}

void CheckAcquire(const Result<LeaseDecision>& d, const Result<RedisReply>& reply,
                  const LeaseLimit& limit) {
  if (!d.ok()) {
    // A failed call or an error reply passes its own text on, which may be empty ("-\r\n").
    const bool passed_on = !reply.ok() || reply->type == RedisReply::Type::kError;
    FUZZ_CHECK(passed_on || !d.status().message().empty(), "an error without a message");
    if (!reply.ok()) {
      FUZZ_CHECK(d.status().code() == reply.status().code(),
                 "the call's failure was not passed on");
    } else if (reply->type == RedisReply::Type::kError) {
      FUZZ_CHECK(d.status().code() == StatusCode::kServer, "an error reply is not kServer");
    } else {
      FUZZ_CHECK(d.status().code() == StatusCode::kScript, "a bad shape is not kScript");
    }
    return;
  }
  FUZZ_CHECK(reply.ok() && reply->type == RedisReply::Type::kArray && reply->elements.size() == 3,
             "a decision from a reply that is not an array of three");
  FUZZ_CHECK(d->limit == limit.max_in_flight(), "limit is not max_in_flight");
  FUZZ_CHECK(d->remaining >= 0 && d->remaining <= limit.max_in_flight(), "remaining out of range");
  if (d->allowed) {
    FUZZ_CHECK(d->lease_id.size() == 32 && tollgate::ValidLeaseId(d->lease_id),
               "an allowed lease without a 128-bit id: " + d->lease_id);
    FUZZ_CHECK(d->expires_in == Nanos(limit.lease_ns()), "expires_in is not the lease time");
    FUZZ_CHECK(d->retry_after == Nanos(0), "allowed with a wait");
  } else {
    FUZZ_CHECK(d->lease_id.empty(), "a denial with an id");
    FUZZ_CHECK(d->retry_after >= Nanos(0) && d->retry_after <= Nanos(LeaseLimit::kMaxLeaseNs),
               "a denial's wait out of range");
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  Input in(data, size);
  const int64_t max_in_flight = in.Bool() ? in.Range(1, 4) : in.Range(1, LeaseLimit::kMaxInFlight);
  const Nanos lease_time(in.Range(LeaseLimit::kMinLeaseNs, LeaseLimit::kMaxLeaseNs));
  auto limit = LeaseLimit::Create(max_in_flight, lease_time);
  FUZZ_CHECK(limit.ok(), "a limit in range refused");
  const RedisOptions options;

  const Result<RedisReply> acquire_reply =
      tollgate::fuzz::AnyCallResult(in, AcquireReply(in, *limit));
  int calls = 0, done = 0;
  std::string sent_id;
  redis::AcquireLease(
      [&](std::vector<std::string> argv, std::function<void(Result<RedisReply>)> reply) {
        ++calls;
        FUZZ_CHECK(argv.size() == 7 && argv[0] == "EVAL" && argv[3] == "k|cc", "acquire argv");
        sent_id = argv[6];
        reply(acquire_reply);
      },
      "k|cc", *limit, options,
      [&](Result<LeaseDecision> d) {
        ++done;
        CheckAcquire(d, acquire_reply, *limit);
        if (d.ok() && d->allowed) FUZZ_CHECK(d->lease_id == sent_id, "not the id sent");
      });
  FUZZ_CHECK(calls == 1 && done == 1, "acquire: one call, one callback");

  std::string id(in.Short(40));
  if (in.Bool()) id = sent_id;
  const Result<RedisReply> release_reply =
      tollgate::fuzz::AnyCallResult(in, tollgate::fuzz::AnyReply(in));
  calls = 0;
  done = 0;
  redis::ReleaseLease(
      [&](std::vector<std::string> argv, std::function<void(Result<RedisReply>)> reply) {
        ++calls;
        FUZZ_CHECK(argv.size() == 5 && argv[4] == id, "release argv");
        reply(release_reply);
      },
      "k|cc", id, options,
      [&](Result<bool> released) {
        ++done;
        if (!tollgate::ValidLeaseId(id)) {
          FUZZ_CHECK(!released.ok() && released.status().code() == StatusCode::kInvalidArgument,
                     "a malformed id was not refused");
          return;
        }
        const bool integer =
            release_reply.ok() && release_reply->type == RedisReply::Type::kInteger;
        FUZZ_CHECK(released.ok() == integer, "release: ok for anything but an integer reply");
        if (released.ok()) {
          FUZZ_CHECK(*released == (release_reply->integer == 1), "released for a reply not 1");
        }
      });
  FUZZ_CHECK(done == 1, "release: one callback");
  FUZZ_CHECK(calls == (tollgate::ValidLeaseId(id) ? 1 : 0), "release: a call for a malformed id");
  return 0;
}
