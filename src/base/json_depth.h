// JsonNestingDepth: how deeply a JSON text nests arrays and objects, found by
// one linear scan that skips strings, so a parser can refuse a document that
// would recurse too deep before it parses it. The text's size should be
// bounded first (the scan is O(n)). Not a validator: malformed text gets a
// depth too, and the parser reports what is wrong with it.
//
// Thread safety: a pure function.
#ifndef TOLLGATE_BASE_JSON_DEPTH_H_
#define TOLLGATE_BASE_JSON_DEPTH_H_

#include <string_view>

namespace tollgate::base {

int JsonNestingDepth(std::string_view text);

}  // namespace tollgate::base

#endif  // TOLLGATE_BASE_JSON_DEPTH_H_
