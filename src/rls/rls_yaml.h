// Import of envoyproxy/ratelimit YAML configuration files, as they are.
//
// One file holds one domain:
//   domain: <name>
//   descriptors:
//     - key: <key>            required
//       value: <value>        optional; `*` anywhere is a wildcard ("/api/*/x")
//       rate_limit:           optional
//         unit: second|minute|hour|day|week|month|year
//         requests_per_unit: <uint32>
//         name: <name>        optional, referenced by replaces
//         unlimited: <bool>   optional
//         replaces: [{name: <name>}, ...]
//         algorithm: <name>   tollgate extension: token_bucket, leaky_bucket,
//                             fixed_window (default), sliding_window, sliding_log
//         burst: <int>        tollgate extension: bucket capacity
//       shadow_mode: <bool>
//       quota_mode: <bool>       over is reported in the status; the call is over
//                                when every quota descriptor of it is (upstream)
//       charge_only: <bool>      tollgate extension: a cost > 0 is charged at once
//                                without a fit check (a stream-end charge, into
//                                debt); cost 0 checks, over with no token left
//       share_threshold: <bool>  a wildcard's values share the pattern's counter
//       metadata: {...}          sent in dynamic_metadata while within the limit
//                                (with RlsDecideOptions::response_metadata)
//       detailed_metric: <bool>  accepted, no effect on tollgate's counters
//       value_to_metric: <bool>  accepted, no effect on tollgate's counters
//       descriptors: [...]    nested, same shape
// Unknown keys are errors, as upstream (a key upstream accepts anywhere but
// ignores where it stands, e.g. `name` beside `key`, is ignored here too).
// Errors carry the file and a path such as "descriptors[0].rate_limit.unit",
// plus the line.
//
// Thread safety: pure functions. Errors are values; yaml-cpp's exceptions are
// caught inside (loading happens at startup or on reload, never per request).
#ifndef TOLLGATE_SRC_RLS_RLS_YAML_H_
#define TOLLGATE_SRC_RLS_RLS_YAML_H_

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "rls/rls_config.h"

namespace tollgate::rls {

struct RlsYamlResult {
  std::vector<RlsDomainSpec> domains;
  std::vector<ConfigError> errors;
};

// Files larger than this are refused (a config is kilobytes).
inline constexpr size_t kMaxRlsYamlBytes = 16 << 20;
// A document whose aliases expand it past max(65536, its size in bytes) nodes,
// or that nests deeper than 256 levels, is refused before it is walked: a
// 2 KB alias bomb (anchors each used ten times by the next) is an error, not
// minutes of work.

// Parses one YAML document (one domain); `source` names it in error paths.
RlsYamlResult ParseRlsYaml(std::string_view text, const std::string& source);

// Reads files; a directory contributes every *.yaml / *.yml file in it, in
// name order (like envoyproxy/ratelimit's runtime directory).
RlsYamlResult ReadRlsYamlFiles(const std::vector<std::string>& paths);

// Read (or parse) and compile in one step.
ParsedRlsConfig LoadRlsConfigFiles(const std::vector<std::string>& paths,
                                   const RlsCompileOptions& options = {},
                                   std::shared_ptr<RlsCounters> counters = nullptr);
ParsedRlsConfig LoadRlsConfigYaml(std::string_view text, const RlsCompileOptions& options = {},
                                  std::shared_ptr<RlsCounters> counters = nullptr);

}  // namespace tollgate::rls

#endif  // TOLLGATE_SRC_RLS_RLS_YAML_H_
