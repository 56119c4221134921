#include "ir/env.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <set>

namespace kiln::detail {

namespace {

const char* set_value(const char* name) {
  const char* v = std::getenv(name);
  return v && *v ? v : nullptr;
}

// Once per variable and value: a setting read at every use would otherwise repeat it.
void report(const char* name, const char* value, const std::string& expected) {
  static auto* m = new std::mutex; // never destroyed: threads may read settings at exit
  static auto* said = new std::set<std::string>;
  {
    std::lock_guard<std::mutex> lock(*m);
    if (!said->insert(std::string(name) + "=" + value).second) return;
  }
  std::fprintf(stderr, "kiln: ignoring %s=%s: expected %s\n", name, value, expected.c_str());
}

std::string lower(const char* s) {
  std::string r(s);
  std::transform(r.begin(), r.end(), r.begin(), [](unsigned char c) { return std::tolower(c); });
  return r;
}

} // namespace

std::optional<int64_t> env_int(const char* name, int64_t lo, int64_t hi) {
  const char* v = set_value(name);
  if (!v) return std::nullopt;
  char* end = nullptr;
  errno = 0;
  long long x = std::strtoll(v, &end, 10);
  const bool digits = std::isdigit(static_cast<unsigned char>(v[0])) || v[0] == '-';
  if (digits && errno == 0 && *end == 0 && x >= lo && x <= hi) return x;
  report(name, v, fmt::format("an integer in [{}, {}]", lo, hi));
  return std::nullopt;
}

std::optional<bool> env_flag(const char* name) {
  const char* v = set_value(name);
  if (!v) return std::nullopt;
  const std::string s = lower(v);
  for (const char* yes : {"1", "true", "on", "yes"})
    if (s == yes) return true;
  for (const char* no : {"0", "false", "off", "no"})
    if (s == no) return false;
  report(name, v, "1/0, true/false, on/off or yes/no");
  return std::nullopt;
}

std::optional<std::string> env_choice(const char* name, const std::vector<std::string>& choices) {
  const char* v = set_value(name);
  if (!v) return std::nullopt;
  std::string expected;
  for (const std::string& c : choices) {
    if (c == v) return c;
    expected += expected.empty() ? "one of " : ", ";
    expected += c;
  }
  report(name, v, expected);
  return std::nullopt;
}

std::optional<std::string> env_choice(const char* name,
                                      std::initializer_list<const char*> choices) {
  return env_choice(name, std::vector<std::string>(choices.begin(), choices.end()));
}

} // namespace kiln::detail
