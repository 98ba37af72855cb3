// Fuzz target: the fleet's rollback guards as Redis hands them back
// (src/redis/rollback_fleet.cc, tollgate/rollback_fleet.h): one record's
// text, and whole reads of the hash through a RollbackFleet whose Redis is
// the fuzzer.
//
// Input: a mode byte. Mode 0: a field name, NUL, a record value, for
// ParseRollbackRecord. Otherwise: bytes steering a scripted Redis that
// answers each HSCAN page (sane pages of mostly well-formed records, or
// hostile ones: wrong types, odd counts, bad cursors, oversized strings) and
// each publish, for a few Sync / PublishNow rounds.
// Properties: a record that parses prints back (FormatRollbackRecord) as the
// exact bytes it came from, within the documented bounds; `adopt` only ever
// sees records that parse, and a read adopts a rule at most once; nothing
// spins (the page cap ends an endless cursor). (Across reads a lower epoch
// may be adopted again: a counter that went back means the hash was lost.)
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz_input.h"
#include "tollgate/rollback_fleet.h"

namespace {

using tollgate::RedisReply;
using tollgate::RollbackRecord;

RedisReply Str(std::string s) {
  RedisReply r;
  r.type = RedisReply::Type::kString;
  r.str = std::move(s);
  return r;
}

// A record value: mostly valid, sometimes damaged in one place.
std::string RecordValue(tollgate::fuzz::Input& in) {
  RollbackRecord r;
  r.epoch = in.Range(0, 40);
  r.at_ms = in.Range(0, 2'000'000'000'000);
  r.tripped = in.Bool();
  r.fingerprint = in.Bits(1);
  static const char* kTriggers[] = {"reject_ratio", "admin", "none", "Bad", ""};
  r.trigger = kTriggers[in.Byte() % 5];
  r.origin = std::string(in.Short(16));
  r.reason = std::string(in.Short(40));
  std::string text = tollgate::FormatRollbackRecord(r);
  if (in.Byte() % 4 == 0 && !text.empty())
    text[in.Range(0, int64_t(text.size()) - 1)] = char(in.Byte());
  return text;
}

RedisReply Page(tollgate::fuzz::Input& in) {
  RedisReply page;
  const uint8_t shape = in.Byte();
  if (shape % 16 == 0) {  // hostile: some other type altogether
    page.type = static_cast<RedisReply::Type>(in.Byte() % 6);
    page.str = std::string(in.Short());
    return page;
  }
  page.type = RedisReply::Type::kArray;
  page.elements.push_back(
      Str(shape % 16 == 1 ? std::string(in.Short(24)) : std::to_string(in.Range(0, 3))));
  RedisReply items;
  items.type = RedisReply::Type::kArray;
  const int n = int(in.Range(0, 6));
  static const char* kRules[] = {"api", "login", "#epoch", "bad rule", "x"};
  for (int i = 0; i < n; ++i) {
    items.elements.push_back(Str(kRules[in.Byte() % 5]));
    if (in.Byte() % 8 == 0) {
      items.elements.push_back(RedisReply{});  // nil where a string belongs
    } else if (in.Byte() % 16 == 0) {
      items.elements.push_back(Str(std::string(2000, 'v')));
    } else {
      items.elements.push_back(Str(RecordValue(in)));
    }
  }
  if (shape % 16 == 2) items.elements.push_back(Str("api"));  // a field without a value
  page.elements.push_back(std::move(items));
  return page;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  tollgate::fuzz::Input in(data, size);
  if (in.Byte() == 0) {
    const std::string_view field = in.Until('\0');
    const std::string_view value = in.Rest();
    auto record = tollgate::ParseRollbackRecord(field, value);
    if (record.ok()) {
      FUZZ_CHECK(tollgate::FormatRollbackRecord(*record) == value, "a record does not print back");
      FUZZ_CHECK(record->rule == field && record->epoch > 0, "rule or epoch");
      FUZZ_CHECK(record->reason.size() <= tollgate::kMaxRollbackReason &&
                     record->origin.size() <= tollgate::kMaxRollbackOrigin,
                 "a record over its bounds");
    } else {
      FUZZ_CHECK(!record.status().message().empty(), "an error without a message");
    }
    return 0;
  }
  std::map<std::string, int64_t> last;
  auto adopt = [&](const RollbackRecord& r) {
    auto again = tollgate::ParseRollbackRecord(r.rule, tollgate::FormatRollbackRecord(r));
    FUZZ_CHECK(again.ok(), "adopted a record that does not parse");
    auto [it, fresh] = last.try_emplace(r.rule, r.epoch);
    FUZZ_CHECK(fresh, "adopted a rule twice in one read");
  };
  auto command = [&](std::vector<std::string> argv) -> tollgate::Result<RedisReply> {
    // A read starts (or a publish): what follows it is adopted afresh.
    if (argv[0] == "EVAL" || (argv.size() > 2 && argv[2] == "0")) last.clear();
    if (in.empty()) return tollgate::UnavailableError("no more input");
    if (argv[0] == "EVAL") return Str(RecordValue(in));
    return Page(in);
  };
  tollgate::RollbackFleetOptions options;
  options.instance_id = "fuzz";
  options.max_records = 8;
  auto fleet = tollgate::RollbackFleet::Create(options, command, adopt);
  FUZZ_CHECK(fleet.ok(), "options");
  for (int round = 0; round < 4 && !in.empty(); ++round) {
    if (in.Byte() % 3 == 0) {
      tollgate::RollbackChange change;
      change.rule = in.Bool() ? "api" : "login";
      change.fingerprint = in.Bits(1);
      change.tripped = in.Bool();
      change.trigger = "admin";
      change.reason = std::string(in.Short(300));
      auto stored = (*fleet)->PublishNow(change);
      if (stored.ok()) FUZZ_CHECK(stored->rule == change.rule, "a record of another rule");
    }
    (void)(*fleet)->Sync();
    const tollgate::RollbackFleetStats st = (*fleet)->stats();
    FUZZ_CHECK(st.pending <= 2, "more pending than rules published");
  }
  return 0;
}
