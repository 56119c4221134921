#pragma once
// Environment variables parsed one way everywhere (kiln's own go through the settings table,
// ir/settings.h). A set variable whose value does not parse is reported on stderr (the
// variable, its value and what was expected; each such value once per process) and treated as
// unset, so a typo is never silently taken for a setting.
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <vector>

namespace kiln::detail {

/// A decimal integer in [lo, hi].
std::optional<int64_t> env_int(const char* name, int64_t lo, int64_t hi);
/// 1/0, true/false, on/off, yes/no (any case).
std::optional<bool> env_flag(const char* name);
/// One of `choices`, exactly.
std::optional<std::string> env_choice(const char* name, const std::vector<std::string>& choices);
std::optional<std::string> env_choice(const char* name, std::initializer_list<const char*> choices);

} // namespace kiln::detail
