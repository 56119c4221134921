// kiln-cache verify, prune, clear, export and import: checking and changing the cache. Every
// removal goes through cache_inspect, which never deletes an entry a kiln process replaced
// since the scan, and only ever deletes names of kiln's own patterns.
#include "commands.h"
#include "text.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <ctime>

namespace kiln_cache {

namespace ci = kiln::detail::cache_inspect;
using nlohmann::json;

namespace {

// What a change removes: entries (with why) and other files of kiln's.
struct Removal {
  std::vector<std::pair<const Entry*, std::string>> entries;
  std::vector<std::string> files;
  uint64_t bytes = 0;

  void add(const Entry& e, std::string why) {
    if (std::any_of(entries.begin(), entries.end(), [&](const auto& x) { return x.first == &e; }))
      return;
    bytes += e.file_bytes + e.use_bytes;
    entries.emplace_back(&e, std::move(why));
  }
  void add_litter(const Directory& d) {
    for (const auto* list : {&d.orphan_uses, &d.stale_temps})
      files.insert(files.end(), list->begin(), list->end());
  }
  // Carries it out unless dry; prints what was (or would be) removed.
  void apply(const Directory& d, const Args& a, const char* verb) const {
    json j = {
        {"dry_run", a.dry_run}, {"bytes", bytes}, {"entries", json::array()}, {"files", files}};
    std::string text;
    for (const auto& [e, why] : entries) {
      if (!a.dry_run) ci::remove(d, *e);
      j["entries"].push_back({{"hash", e->hash}, {"path", e->path}, {"why", why}});
      text += fmt::format("{} {} ({})\n", a.dry_run ? "would remove" : "removed", e->path, why);
    }
    for (const std::string& f : files) {
      if (!a.dry_run) ci::remove_file(f);
      text += fmt::format("{} {}\n", a.dry_run ? "would remove" : "removed", f);
    }
    text += fmt::format("{}: {} entries ({}) and {} other files {}\n", verb, entries.size(),
                        human_bytes(bytes), files.size(), a.dry_run ? "would go" : "removed");
    print(a, j, text);
  }
};

} // namespace

int verify(const Directory& d, const Args& a) {
  json j = {
      {"dir", d.dir}, {"checked", d.entries.size()}, {"damaged", json::array()}, {"fixed", a.fix}};
  std::string text;
  int damaged = 0;
  for (const Entry& e : d.entries) {
    if (e.valid()) continue;
    damaged++;
    if (a.fix) ci::remove(d, e);
    j["damaged"].push_back({{"path", e.path}, {"problem", e.problem}});
    text += fmt::format("{}: {}{}\n", e.path, e.problem, a.fix ? " (removed)" : "");
  }
  for (const std::string& p : d.unreadable) {
    damaged++; // not ours to remove: a FIFO or a link where an entry belongs
    j["damaged"].push_back({{"path", p}, {"problem", "not a regular file (left alone)"}});
    text += fmt::format("{}: not a regular file (left alone)\n", p);
  }
  if (a.fix) {
    Removal litter;
    litter.add_litter(d);
    for (const std::string& f : litter.files) ci::remove_file(f);
  }
  const bool ok = damaged == 0 || (a.fix && d.unreadable.empty());
  text += fmt::format("{} entries checked, {} damaged{}\n", d.entries.size(), damaged,
                      a.fix && damaged ? ", damaged entries removed" : "");
  j["ok"] = ok;
  print(a, j, text);
  return ok ? 0 : 1;
}

int prune(const Directory& d, const Here& here, const Args& a) {
  Removal r;
  r.add_litter(d);
  const int64_t now = std::time(nullptr);
  std::vector<const Entry*> kept;
  for (const Entry& e : d.entries) {
    if (!e.valid())
      r.add(e, "damaged: " + e.problem);
    else if (a.foreign && !usable(e, here))
      r.add(e, fmt::format("foreign: sm_{} nvrtc {} codegen {}", e.meta.arch, e.meta.nvrtc,
                           e.meta.codegen));
    else if (a.older_than && now - e.last_used > *a.older_than)
      r.add(e, fmt::format("last used {} ago", human_age(now - e.last_used)));
    else
      kept.push_back(&e);
  }
  if (a.max_size) { // least recently used first until the rest fits
    uint64_t total = 0;
    for (const Entry* e : kept) total += e->file_bytes + e->use_bytes;
    std::stable_sort(kept.begin(), kept.end(),
                     [](const Entry* x, const Entry* y) { return x->last_used < y->last_used; });
    for (const Entry* e : kept) {
      if (total <= *a.max_size) break;
      total -= e->file_bytes + e->use_bytes;
      r.add(*e, fmt::format("over {}: least recently used", human_bytes(*a.max_size)));
    }
  }
  r.apply(d, a, "prune");
  return 0;
}

int clear(const Directory& d, const Args& a) {
  Removal r;
  r.add_litter(d);
  for (const Entry& e : d.entries) r.add(e, "clear");
  r.apply(d, a, "clear");
  return 0;
}

int export_entries(const Directory& d, const Here& here, const Args& a) {
  std::vector<const Entry*> es;
  int skipped = 0;
  for (const Entry& e : d.entries)
    if (e.valid() && (a.all || usable(e, here)))
      es.push_back(&e);
    else
      skipped++;
  if (std::string why = ci::write_archive(a.file, es); !why.empty()) {
    std::fprintf(stderr, "kiln-cache export: %s\n", why.c_str());
    return 1;
  }
  uint64_t bytes = 0;
  for (const Entry* e : es) bytes += e->file_bytes;
  print(a, {{"file", a.file}, {"entries", es.size()}, {"bytes", bytes}, {"skipped", skipped}},
        fmt::format("exported {} entries ({}) to {}; {} skipped ({})\n", es.size(),
                    human_bytes(bytes), a.file, skipped,
                    a.all ? "damaged" : "damaged, or not usable here: --all exports those"));
  return 0;
}

int import_entries(const Args& a) {
  ci::ImportReport r;
  if (std::string why = ci::import_archive(a.file, a.dir, a.all, r); !why.empty()) {
    std::fprintf(stderr, "kiln-cache import: %s\n", why.c_str());
    return 1;
  }
  std::string text;
  for (const std::string& s : r.skipped) text += "skipped " + s + "\n";
  text += fmt::format("imported {} entries into {}; {} already there, {} skipped\n", r.added, a.dir,
                      r.unchanged, r.skipped.size());
  print(a, {{"added", r.added}, {"unchanged", r.unchanged}, {"skipped", r.skipped}}, text);
  return 0;
}

} // namespace kiln_cache
