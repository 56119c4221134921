#pragma once
// Human-readable sizes, durations and tables for kiln-cache, and their parsers.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace kiln_cache {

std::string human_bytes(uint64_t bytes); // "1.5 MiB"
std::string human_age(int64_t seconds);  // "3m", "2h", "5d"
std::string human_ms(double ms);         // "42 ms", "3.1 s", "2.5 min"
/// "500M", "1G", "64K", "1234" (bytes; K/M/G/T are powers of 1024); nullopt if malformed.
std::optional<uint64_t> parse_size(const std::string& s);
/// "90s", "15m", "12h", "30d", "2w"; nullopt if malformed.
std::optional<int64_t> parse_duration(const std::string& s);

/// A table printed with its columns aligned; columns whose header starts with '>' are right
/// aligned (the '>' is not printed).
struct Table {
  std::vector<std::string> header;
  std::vector<std::vector<std::string>> rows;
  std::string str() const;
};

} // namespace kiln_cache
