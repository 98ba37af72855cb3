// The config-error collector under its in-tree name: ConfigErrors and the path
// helpers are public (tollgate/config_error.h, which states their contract);
// the parsers in src/ name them base::ConfigErrors, base::FieldPath, ...
//
// Thread safety and ownership: as tollgate/config_error.h.
#ifndef TOLLGATE_SRC_BASE_CONFIG_ERRORS_H_
#define TOLLGATE_SRC_BASE_CONFIG_ERRORS_H_

#include "tollgate/config_error.h"

namespace tollgate::base {

using tollgate::ConfigErrors;
using tollgate::FieldPath;
using tollgate::IndexPath;
using tollgate::PrintableText;

}  // namespace tollgate::base

#endif  // TOLLGATE_SRC_BASE_CONFIG_ERRORS_H_
