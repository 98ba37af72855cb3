// Fuzz target: envoyproxy/ratelimit YAML (src/rls/rls_yaml.cc) compiled to
// an RlsConfig (src/rls/rls_config.cc), then matched.
//
// Input: one YAML document. Operator input, but --check and reload run the
// parser on whatever file they are given, and YAML has aliases: a 2 KB alias
// bomb must be refused quickly (libFuzzer's -timeout catches a slow input).
// Properties: errors xor a config (in both merge modes); a config dumps one
// line per rule; Match() of any entries on a compiled config is a rule of it
// or null.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz_input.h"
#include "rls/rls_config.h"
#include "rls/rls_yaml.h"

namespace {

void Check(const tollgate::rls::ParsedRlsConfig& parsed, std::string_view text) {
  FUZZ_CHECK((parsed.config == nullptr) == !parsed.errors.empty(),
             "a config and errors, or neither");
  for (const auto& e : parsed.errors) FUZZ_CHECK(!e.message.empty(), "an error without a message");
  if (!parsed.config) return;
  const std::string dump = parsed.config->Dump();
  size_t lines = 0;
  for (char c : dump) lines += c == '\n' ? 1 : 0;
  FUZZ_CHECK(
      lines == parsed.config->rule_count() || (dump.empty() == (parsed.config->rule_count() == 0)),
      "Dump() lines and rule count disagree");
  // Match entries made of the document's own words against every domain word.
  std::vector<std::string> words;
  for (size_t start = 0; start < text.size() && words.size() < 8;) {
    const size_t end = std::min(text.find_first_of(" :\n-", start), text.size());
    if (end > start) words.emplace_back(text.substr(start, end - start));
    start = end + 1;
  }
  for (const std::string& domain : words) {
    if (!parsed.config->HasDomain(domain)) continue;
    std::vector<tollgate::rls::RlsEntry> entries;
    for (size_t i = 0; i + 1 < words.size(); i += 2) {
      entries.push_back({words[i], words[i + 1]});
      const tollgate::rls::RlsRule* rule = parsed.config->Match(domain, entries);
      if (rule) FUZZ_CHECK(!rule->full_key.empty(), "a rule without a key");
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  Check(tollgate::rls::LoadRlsConfigYaml(text), text);
  tollgate::rls::RlsCompileOptions merge;
  merge.merge_domains = true;
  merge.default_algorithm = tollgate::Algorithm::kFixedWindow;
  Check(tollgate::rls::LoadRlsConfigYaml(text, merge), text);
  return 0;
}
