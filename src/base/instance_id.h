// The name an instance goes by in shared Redis state (the fleet registry, the
// fleet's rollback guards): "<hostname>:<pid>:<32 random bits in hex>", so two
// processes on one host, or one host's restarts, never share a name.
#ifndef TOLLGATE_SRC_BASE_INSTANCE_ID_H_
#define TOLLGATE_SRC_BASE_INSTANCE_ID_H_

#include <string>

namespace tollgate {

std::string DefaultInstanceId();

}  // namespace tollgate

#endif  // TOLLGATE_SRC_BASE_INSTANCE_ID_H_
