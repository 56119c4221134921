#include "engine/plan_cache.h"

namespace kiln::detail {

void trim_plan_cache() {}

} // namespace kiln::detail
