#pragma once
// kiln's settings from the environment: one table (ir/settings.def) names each KILN_*
// variable, its kind, what it accepts, its default and what it does; code reads settings only
// through it. A set value that does not parse is reported once on stderr (the variable, its
// value and what it accepts) and the default applies.
#include <cstdint>
#include <optional>
#include <span>
#include <string>

namespace kiln::detail {

enum class Setting : uint8_t {
#define KILN_SETTING(id, ...) id,
#include "ir/settings.def"
#undef KILN_SETTING
};

struct SettingInfo {
  enum class Kind : uint8_t { flag, integer, choice, text };
  Setting id;
  const char* variable;
  Kind kind;
  int64_t lo, hi;       // integer
  const char* accepts;  // choice: the values, separated by |; text: in words
  const char* fallback; // the default, in words
  const char* doc;
};

/// Every setting, in the table's order.
std::span<const SettingInfo> all_settings();
const SettingInfo& setting_info(Setting s);

/// The value set in the environment, if it parses (reading a setting of another kind is a
/// programming error and throws). Unset, empty or unparsable: nullopt.
std::optional<bool> setting_flag(Setting s);
std::optional<int64_t> setting_int(Setting s);
std::optional<std::string> setting_text(Setting s); // choice or text

} // namespace kiln::detail
