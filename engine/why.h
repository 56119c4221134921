#pragma once
// Why a value crosses memory at a kernel boundary (engine/why.def): the planner records one
// per written node and per step input, the plan dump prints why_text, tests compare the enum.
#include <cstdint>

namespace kiln::detail {

enum class Why : uint8_t {
#define KILN_WHY(id, text) id,
#include "engine/why.def"
#undef KILN_WHY
};

const char* why_text(Why w);

} // namespace kiln::detail
