// The typed JSON field reader under its in-tree name: JsonFields, JsonTypeName
// and NumberText are public (tollgate/json_fields.h, which states their
// contract); the parsers in src/ name them base::JsonFields, ...
//
// Thread safety and ownership: as tollgate/json_fields.h.
#ifndef TOLLGATE_SRC_BASE_JSON_FIELDS_H_
#define TOLLGATE_SRC_BASE_JSON_FIELDS_H_

#include "base/config_errors.h"
#include "tollgate/json_fields.h"

namespace tollgate::base {

using Json = nlohmann::json;
using tollgate::JsonFields;
using tollgate::JsonTypeName;
using tollgate::NumberText;

}  // namespace tollgate::base

#endif  // TOLLGATE_SRC_BASE_JSON_FIELDS_H_
