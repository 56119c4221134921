#include "text.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>

namespace kiln_cache {

std::string human_bytes(uint64_t bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(bytes);
  int u = 0;
  while (v >= 1024 && u < 4) v /= 1024, ++u;
  return u == 0 ? fmt::format("{} B", bytes) : fmt::format("{:.1f} {}", v, units[u]);
}

std::string human_age(int64_t s) {
  if (s < 0) s = 0;
  if (s < 120) return fmt::format("{}s", s);
  if (s < 7200) return fmt::format("{}m", s / 60);
  if (s < 2 * 86400) return fmt::format("{}h", s / 3600);
  return fmt::format("{}d", s / 86400);
}

std::string human_ms(double ms) {
  if (ms < 1000) return fmt::format("{:.0f} ms", ms);
  if (ms < 120000) return fmt::format("{:.1f} s", ms / 1000);
  return fmt::format("{:.1f} min", ms / 60000);
}

namespace {

// The number before a one-letter unit (or none), and the unit's multiplier.
std::optional<int64_t> scaled(const std::string& s, const std::string& units,
                              const std::vector<int64_t>& factor, int64_t bare) {
  if (s.empty()) return std::nullopt;
  size_t digits = 0;
  while (digits < s.size() && std::isdigit(static_cast<unsigned char>(s[digits]))) ++digits;
  if (digits == 0 || digits + 1 < s.size() || digits > 15) return std::nullopt;
  int64_t f = bare;
  if (digits < s.size()) {
    const size_t u = units.find(static_cast<char>(std::tolower(s.back())));
    if (u == std::string::npos) return std::nullopt;
    f = factor[u];
  }
  return std::stoll(s.substr(0, digits)) * f;
}

} // namespace

std::optional<uint64_t> parse_size(const std::string& s) {
  auto v = scaled(s, "kmgt",
                  {int64_t(1) << 10, int64_t(1) << 20, int64_t(1) << 30, int64_t(1) << 40}, 1);
  return v ? std::optional<uint64_t>(static_cast<uint64_t>(*v)) : std::nullopt;
}

std::optional<int64_t> parse_duration(const std::string& s) {
  auto v = scaled(s, "smhdw", {1, 60, 3600, 86400, 7 * 86400}, -1); // a unit is required
  return v && *v >= 0 ? v : std::nullopt;
}

std::string Table::str() const {
  std::vector<size_t> width(header.size(), 0);
  auto text = [](const std::string& h) { return h.empty() || h[0] != '>' ? h : h.substr(1); };
  for (size_t c = 0; c < header.size(); ++c) width[c] = text(header[c]).size();
  for (const auto& r : rows)
    for (size_t c = 0; c < r.size() && c < width.size(); ++c)
      width[c] = std::max(width[c], r[c].size());
  auto line = [&](const std::vector<std::string>& cells, bool head) {
    std::string out;
    for (size_t c = 0; c < header.size(); ++c) {
      const std::string cell = head ? text(cells[c]) : c < cells.size() ? cells[c] : "";
      const bool right = !header[c].empty() && header[c][0] == '>';
      const std::string pad(width[c] - cell.size(), ' ');
      out += (c ? "  " : "") + (right ? pad + cell : cell + (c + 1 < header.size() ? pad : ""));
    }
    return out + "\n";
  };
  std::string out = line(header, true);
  for (const auto& r : rows) out += line(r, false);
  return out;
}

} // namespace kiln_cache
