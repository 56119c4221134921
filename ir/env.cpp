#include "ir/env.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace kiln::detail {

namespace {

const char* set_value(const char* name) {
  const char* v = std::getenv(name);
  return v && *v ? v : nullptr;
}

void report(const char* name, const char* value, const std::string& expected) {
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

std::optional<std::string> env_choice(const char* name,
                                      std::initializer_list<const char*> choices) {
  const char* v = set_value(name);
  if (!v) return std::nullopt;
  std::string expected;
  for (const char* c : choices) {
    if (std::strcmp(v, c) == 0) return std::string(v);
    expected += expected.empty() ? "one of " : ", ";
    expected += c;
  }
  report(name, v, expected);
  return std::nullopt;
}

} // namespace kiln::detail
