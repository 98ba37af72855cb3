// JsonNestingDepth under its in-tree name: public in tollgate/json_fields.h,
// which states its contract; src/ names it base::JsonNestingDepth.
//
// Thread safety: a pure function.
#ifndef TOLLGATE_BASE_JSON_DEPTH_H_
#define TOLLGATE_BASE_JSON_DEPTH_H_

#include "tollgate/json_fields.h"

namespace tollgate::base {

using tollgate::JsonNestingDepth;

}  // namespace tollgate::base

#endif  // TOLLGATE_BASE_JSON_DEPTH_H_
