#include "ir/settings.h"

#include "ir/env.h"
#include "ir/errors.h"

#include <cstdlib>
#include <iterator>
#include <vector>

namespace kiln::detail {

namespace {

constexpr SettingInfo kSettings[] = {
#define KILN_SETTING(id, variable, kind, lo, hi, accepts, fallback, doc)                           \
  {Setting::id, variable, SettingInfo::Kind::kind, lo, hi, accepts, fallback, doc},
#include "ir/settings.def"
#undef KILN_SETTING
};

constexpr bool in_table_order() {
  for (size_t i = 0; i < std::size(kSettings); ++i)
    if (static_cast<size_t>(kSettings[i].id) != i) return false;
  return true;
}
static_assert(in_table_order());

const SettingInfo& of_kind(Setting s, SettingInfo::Kind k) {
  const SettingInfo& i = setting_info(s);
  if (i.kind != k) fail("settings", "internal error: {} read as another kind", i.variable);
  return i;
}

std::vector<std::string> split_choices(const char* accepts) {
  std::vector<std::string> out(1);
  for (const char* c = accepts; *c; ++c)
    if (*c == '|')
      out.emplace_back();
    else
      out.back() += *c;
  return out;
}

} // namespace

std::span<const SettingInfo> all_settings() {
  return kSettings;
}

const SettingInfo& setting_info(Setting s) {
  return kSettings[static_cast<size_t>(s)];
}

std::optional<bool> setting_flag(Setting s) {
  return env_flag(of_kind(s, SettingInfo::Kind::flag).variable);
}

std::optional<int64_t> setting_int(Setting s) {
  const SettingInfo& i = of_kind(s, SettingInfo::Kind::integer);
  return env_int(i.variable, i.lo, i.hi);
}

std::optional<std::string> setting_text(Setting s) {
  const SettingInfo& i = setting_info(s);
  if (i.kind == SettingInfo::Kind::choice) return env_choice(i.variable, split_choices(i.accepts));
  const char* v = std::getenv(of_kind(s, SettingInfo::Kind::text).variable);
  return v && *v ? std::optional<std::string>(v) : std::nullopt;
}

} // namespace kiln::detail
