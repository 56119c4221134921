#pragma once
#include "runtime/backend.h"

namespace kiln::detail {

/// The process's CPU backend (always available).
Backend& cpu_backend();

} // namespace kiln::detail
