// Entry and use-record (de)serialization for the kernel cache; see docs/kernel-cache.md.
#include "codegen/disk_cache_format.h"

#include <fmt/format.h>

#include <array>
#include <cctype>
#include <charconv>

namespace kiln::detail {
namespace {

constexpr std::array<std::string_view, 4> kSections = {"key", "source", "log", "binary"};

bool parse_int(std::string_view s, int64_t& out) {
  if (s.empty()) return false;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  return ec == std::errc() && p == s.data() + s.size();
}

bool parse_hex16(std::string_view s, uint64_t& out) {
  if (s.size() != 16) return false;
  for (char c : s)
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), out, 16);
  return ec == std::errc() && p == s.data() + s.size();
}

std::string hex16(uint64_t v) {
  return fmt::format("{:016x}", v);
}

std::string section_line(std::string_view field, std::string_view data) {
  return fmt::format("{} {} {}\n", field, data.size(), hex16(fnv1a64(data)));
}

/// Splits "field value" lines off `text` one at a time.
struct Lines {
  std::string_view text;
  size_t pos = 0;
  /// false at the end of `text` or on a line without '\n' (truncated).
  bool next(std::string_view& field, std::string_view& value) {
    size_t nl = text.find('\n', pos);
    if (nl == std::string_view::npos) return false;
    std::string_view line = text.substr(pos, nl - pos);
    pos = nl + 1;
    size_t sp = line.find(' ');
    field = line.substr(0, sp);
    value = sp == std::string_view::npos ? std::string_view() : line.substr(sp + 1);
    return true;
  }
};

} // namespace

std::string entry_base_name(std::string_view key) {
  std::string text = fmt::format("{} {}\n", kEntryMagic, kCacheFormatVersion);
  text.append(key);
  return hex16(fnv1a64(text));
}

namespace {

// Consumes `n` characters (or, with n == 0, one or more) of the class `is` from the front of s.
template <class Pred> bool take(std::string_view& s, size_t n, Pred is) {
  size_t len = 0;
  while (len < s.size() && (n == 0 || len < n) && is(static_cast<unsigned char>(s[len]))) ++len;
  if (len == 0 || (n != 0 && len != n)) return false;
  s.remove_prefix(len);
  return true;
}

bool take_text(std::string_view& s, std::string_view text) {
  if (s.substr(0, text.size()) != text) return false;
  s.remove_prefix(text.size());
  return true;
}

bool is_hex_digit(unsigned char c) {
  return std::isdigit(c) || (c >= 'a' && c <= 'f');
}
bool is_digit(unsigned char c) {
  return std::isdigit(c);
}

} // namespace

bool is_temp_name(std::string_view s) {
  if (!take_text(s, kTempPrefix)) return false;
  std::string_view file = s;
  if (take(file, 16, is_hex_digit) &&
      (take_text(file, kEntrySuffix) || take_text(file, kUseSuffix)))
    s = file;
  else if (!take_text(s, "probe") && !take_text(s, "removed"))
    return false;
  return take_text(s, "-") && take(s, 0, is_digit) && take_text(s, "-") && take(s, 0, is_digit) &&
         take_text(s, "-") && take(s, 8, is_hex_digit) && s.empty();
}

std::string format_header(const EntryMeta& m, std::string_view key, std::string_view source,
                          std::string_view log, std::string_view binary) {
  std::string name = m.name;
  for (char& c : name)
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = '_';
  std::string h = fmt::format("{} {}\n", kEntryMagic, kCacheFormatVersion);
  h += fmt::format("name {}\narch {}\nnvrtc {}\ncodegen {}\nformat {}\ncompile_us {}\n"
                   "created {}\n",
                   name, m.arch, m.nvrtc, m.codegen, m.is_cubin ? "cubin" : "ptx", m.compile_us,
                   m.created);
  h += section_line("key", key);
  h += section_line("source", source);
  h += section_line("log", log);
  h += section_line("binary", binary);
  h += fmt::format("header {}\n", hex16(fnv1a64(h)));
  return h;
}

std::optional<int64_t> entry_format_version(std::string_view file) {
  Lines lines{file.substr(0, kMaxHeaderBytes)};
  std::string_view field, value;
  int64_t version = 0;
  if (!lines.next(field, value) || field != kEntryMagic) return std::nullopt;
  auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), version);
  if (ec != std::errc() || end != value.data() + value.size()) return std::nullopt;
  return version;
}

std::string parse_entry(std::string_view file, EntryView& v) {
  if (file.empty()) return "empty file";
  Lines lines{file.substr(0, kMaxHeaderBytes)};
  std::string_view field, value;
  if (!lines.next(field, value) || field != kEntryMagic) return "not a kiln cache entry";
  if (value != std::to_string(kCacheFormatVersion))
    return fmt::format("format version {}, expected {}", value.substr(0, 16), kCacheFormatVersion);

  int64_t* ints[] = {&v.arch, &v.nvrtc, &v.codegen, &v.compile_us, &v.created};
  constexpr std::array<std::string_view, 5> int_fields = {"arch", "nvrtc", "codegen", "compile_us",
                                                          "created"};
  uint32_t seen = 0; // bit per required field: ints, name, format, sections
  std::array<uint64_t, 4> size{}, sum{};
  auto once = [&](int bit) {
    bool first = !(seen & (1u << bit));
    seen |= 1u << bit;
    return first;
  };
  for (;;) {
    size_t line_start = lines.pos;
    if (!lines.next(field, value))
      return file.size() < kMaxHeaderBytes ? "truncated header" : "header too long";
    if (field == "header") {
      uint64_t hs;
      if (!parse_hex16(value, hs)) return "bad header checksum field";
      if (fnv1a64(file.substr(0, line_start)) != hs) return "header checksum mismatch";
      v.header_sum = hs;
      break;
    }
    bool ok = true, known = false;
    for (size_t i = 0; i < int_fields.size(); ++i)
      if (field == int_fields[i]) known = true, ok = once(int(i)) && parse_int(value, *ints[i]);
    if (field == "name") known = true, ok = once(5), v.name = std::string(value);
    if (field == "format") {
      known = true;
      ok = once(6) && (value == "cubin" || value == "ptx");
      v.is_cubin = value == "cubin";
    }
    for (size_t i = 0; i < kSections.size(); ++i) {
      if (field != kSections[i]) continue;
      known = true;
      size_t sp = value.find(' ');
      int64_t n = -1;
      ok = once(7 + int(i)) && sp != std::string_view::npos && parse_int(value.substr(0, sp), n) &&
           n >= 0 && uint64_t(n) <= kMaxEntryBytes && parse_hex16(value.substr(sp + 1), sum[i]);
      size[i] = uint64_t(n);
    }
    if (known && !ok) return fmt::format("bad or repeated header field '{}'", field.substr(0, 32));
    // Unknown fields are ignored: later writers may add informational ones.
  }
  if (seen != (1u << 11) - 1) return "header lacks a required field";

  uint64_t pos = lines.pos, total = pos;
  for (uint64_t n : size) total += n;
  if (file.size() < total) return fmt::format("truncated ({} of {} bytes)", file.size(), total);
  if (file.size() > total) return fmt::format("{} trailing bytes", file.size() - total);
  std::string_view* views[] = {&v.key, &v.source, &v.log, &v.binary};
  for (size_t i = 0; i < kSections.size(); ++i) {
    *views[i] = file.substr(pos, size[i]);
    pos += size[i];
    if (fnv1a64(*views[i]) != sum[i]) return fmt::format("{} checksum mismatch", kSections[i]);
  }
  return {};
}

std::string format_use(uint64_t entry_header_sum, int64_t hits, int64_t last_used) {
  return fmt::format("{} {}\nentry {}\nhits {}\nlast_used {}\n", kUseMagic, kCacheFormatVersion,
                     hex16(entry_header_sum), hits, last_used);
}

UseRecord parse_use(std::string_view text, uint64_t entry_header_sum) {
  Lines lines{text};
  std::string_view field, value;
  UseRecord r;
  uint64_t entry = 0;
  int seen = 0;
  if (!lines.next(field, value) || field != kUseMagic ||
      value != std::to_string(kCacheFormatVersion))
    return {};
  while (lines.next(field, value)) {
    if (field == "entry" && parse_hex16(value, entry)) seen |= 1;
    if (field == "hits" && parse_int(value, r.hits) && r.hits >= 0) seen |= 2;
    if (field == "last_used" && parse_int(value, r.last_used)) seen |= 4;
  }
  if (seen != 7 || entry != entry_header_sum) return {};
  return r;
}

} // namespace kiln::detail
