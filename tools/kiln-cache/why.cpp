// kiln-cache why: the kernels a run missed (its KILN_CACHE_MISS_LOG), and for each the key
// fields in which it differs from the nearest kernel the cache holds: a kernel compiled for
// another GPU shows "target arch", a changed kiln "codegen version", a new size class a
// variant field, a new program an op.
#include "commands.h"
#include "key_fields.h"
#include "text.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <map>

namespace kiln_cache {

namespace ci = kiln::detail::cache_inspect;
using nlohmann::json;

namespace {

struct Miss {
  std::string name, key, why, standin;
  int count = 0;
};

// The miss log's "standin": whether the run waited for this compile.
std::string standin_line(const std::string& standin) {
  if (standin.empty()) return "";
  if (standin == "covered") return "  stand-in: covered (the run went on while it compiled)\n";
  return fmt::format("  stand-in: not covered ({}): the run waited for this compile\n", standin);
}

// The log's misses, one per key in first-seen order; malformed lines are counted.
std::vector<Miss> read_log(const std::string& path, int& malformed, bool& opened) {
  std::ifstream in(path);
  opened = bool(in);
  std::vector<Miss> misses;
  std::map<std::string, size_t> seen;
  for (std::string line; std::getline(in, line);) {
    const json j = json::parse(line, nullptr, false);
    if (j.is_discarded() || !j.contains("key") || !j["key"].is_string()) {
      malformed += !line.empty();
      continue;
    }
    const std::string key = j["key"];
    auto [it, fresh] = seen.emplace(key, misses.size());
    if (fresh)
      misses.push_back({j.value("name", std::string()), key, j.value("why", std::string()),
                        j.value("standin", std::string()), 0});
    misses[it->second].count++;
  }
  return misses;
}

// The fields in which `b` differs from `a`: position by position when they have as many
// fields, else the fields of a not in their longest common subsequence with b.
std::vector<std::pair<KeyField, std::string>> differences(const std::vector<KeyField>& a,
                                                          const std::vector<KeyField>& b) {
  std::vector<std::pair<KeyField, std::string>> d;
  if (a.size() == b.size()) {
    for (size_t i = 0; i < a.size(); ++i)
      if (a[i].token != b[i].token) d.push_back({a[i], b[i].token});
    return d;
  }
  std::vector<std::vector<int>> lcs(a.size() + 1, std::vector<int>(b.size() + 1, 0));
  for (size_t i = a.size(); i-- > 0;)
    for (size_t j = b.size(); j-- > 0;)
      lcs[i][j] =
          a[i].token == b[j].token ? lcs[i + 1][j + 1] + 1 : std::max(lcs[i + 1][j], lcs[i][j + 1]);
  for (size_t i = 0, j = 0; i < a.size();) {
    if (j < b.size() && a[i].token == b[j].token)
      ++i, ++j;
    else if (j < b.size() && lcs[i][j + 1] >= lcs[i + 1][j])
      ++j;
    else
      d.push_back({a[i++], "(absent)"});
  }
  return d;
}

struct Cached {
  const Entry* entry;
  std::vector<KeyField> fields;
};

} // namespace

int why(const Directory& d, const Here& here, const Args& a) {
  int malformed = 0;
  bool opened = false;
  const std::vector<Miss> misses = read_log(a.file, malformed, opened);
  if (!opened) {
    std::fprintf(stderr, "kiln-cache why: cannot read the miss log %s\n", a.file.c_str());
    return 1;
  }
  std::vector<Cached> cached;
  for (const Entry& e : d.entries) {
    ci::Sections s;
    if (e.valid() && ci::read_sections(e, s).empty()) cached.push_back({&e, key_fields(s.key)});
  }
  json j = json::array();
  std::string text;
  for (const Miss& m : misses) {
    const std::vector<KeyField> fields = key_fields(m.key);
    const Cached* nearest = nullptr;
    std::vector<std::pair<KeyField, std::string>> diff;
    for (const Cached& c : cached) {
      auto dc = differences(fields, c.fields);
      if (!nearest || dc.size() < diff.size()) nearest = &c, diff = std::move(dc);
    }
    json jm = {{"name", m.name}, {"misses", m.count}, {"why", m.why}, {"key", m.key}};
    if (!m.standin.empty()) jm["standin"] = m.standin;
    text += fmt::format("{} (missed {}x: {})\n", m.name, m.count, m.why) + standin_line(m.standin);
    if (nearest && diff.empty()) {
      jm["cached_now"] = true;
      text += "  cached now (compiled by that run or a later one)\n";
    } else if (nearest) {
      jm["nearest"] = {{"name", nearest->entry->meta.name},
                       {"hash", nearest->entry->hash},
                       {"usable_here", usable(*nearest->entry, here)}};
      jm["differences"] = json::array();
      text += fmt::format("  nearest cached: {} ({})\n", nearest->entry->meta.name,
                          nearest->entry->hash);
      for (const auto& [f, theirs] : diff) {
        jm["differences"].push_back({{"field", f.label}, {"missed", f.token}, {"cached", theirs}});
        text += fmt::format("    {:<32} {} here, {} there\n", f.label, f.token, theirs);
      }
    } else {
      text += "  the cache holds no kernel to compare with\n";
    }
    j.push_back(jm);
  }
  if (malformed) text += fmt::format("({} malformed lines in {} skipped)\n", malformed, a.file);
  if (misses.empty()) text += fmt::format("no misses in {}\n", a.file);
  print(a, j, text);
  return 0;
}

} // namespace kiln_cache
