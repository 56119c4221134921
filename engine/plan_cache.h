#pragma once
// The plan cache: schedules keyed by the structure of the pending graph they were planned for,
// so that an evaluation repeating an earlier one (every step of a loop) is not planned again.
#include "engine/schedule.h"

namespace kiln::detail {

/// Drop least recently used plans until the cache is within engine().max_plans.
void trim_plan_cache();

} // namespace kiln::detail
