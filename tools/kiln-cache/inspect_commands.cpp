// kiln-cache stats, list and show: reading the cache.
#include "commands.h"
#include "ir/settings.h"
#include "key_fields.h"
#include "text.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <map>
#include <tuple>

namespace kiln_cache {

namespace ci = kiln::detail::cache_inspect;
using nlohmann::json;

bool usable(const Entry& e, const Here& here) {
  return e.valid() && e.meta.codegen == here.codegen &&
         (!here.nvrtc || e.meta.nvrtc == *here.nvrtc) && (!here.arch || e.meta.arch == *here.arch);
}

json entry_json(const Entry& e, const Here& here) {
  json j = {{"hash", e.hash},
            {"path", e.path},
            {"bytes", e.file_bytes + e.use_bytes},
            {"valid", e.valid()}};
  if (!e.valid()) {
    j["problem"] = e.problem;
    return j;
  }
  j.update({{"name", e.meta.name},
            {"arch", e.meta.arch},
            {"nvrtc", e.meta.nvrtc},
            {"codegen", e.meta.codegen},
            {"format", e.meta.is_cubin ? "cubin" : "ptx"},
            {"compile_ms", e.meta.compile_us / 1000.0},
            {"hits", e.hits},
            {"created", e.meta.created},
            {"last_used", e.last_used},
            {"usable_here", usable(e, here)},
            {"sections",
             {{"key", e.key_bytes},
              {"source", e.source_bytes},
              {"log", e.log_bytes},
              {"binary", e.binary_bytes}}}});
  return j;
}

void print(const Args& a, const json& j, const std::string& text) {
  std::fputs(a.json ? (j.dump(2) + "\n").c_str() : text.c_str(), stdout);
}

int stats(const Directory& d, const Here& here, const Args& a) {
  struct Group {
    int64_t entries = 0, hits = 0;
    uint64_t bytes = 0;
    double saved_ms = 0;
  };
  std::map<std::tuple<int64_t, int64_t, int64_t>, Group> groups; // (arch, nvrtc, codegen)
  Group total;
  int64_t damaged = 0, usable_count = 0;
  for (const Entry& e : d.entries) {
    total.entries++;
    total.bytes += e.file_bytes + e.use_bytes;
    if (!e.valid()) {
      damaged++;
      continue;
    }
    Group& g = groups[{e.meta.arch, e.meta.nvrtc, e.meta.codegen}];
    const double saved = double(e.hits) * double(e.meta.compile_us) / 1000.0;
    for (Group* x : {&g, &total}) {
      x->hits += e.hits, x->saved_ms += saved;
      if (x == &g) x->entries++, x->bytes += e.file_bytes + e.use_bytes;
    }
    usable_count += usable(e, here);
  }
  auto opt = [](std::optional<int> v) { return v ? json(*v) : json(nullptr); };
  // What a kiln process storing here keeps the cache within (codegen/disk_cache.h).
  const uint64_t limit = uint64_t(
      kiln::detail::setting_int(kiln::detail::Setting::cache_max_bytes).value_or(int64_t(1) << 30));
  json j = {
      {"dir", d.dir},
      {"entries", total.entries},
      {"bytes", total.bytes},
      {"hits", total.hits},
      {"compile_ms_saved", total.saved_ms},
      {"damaged", damaged},
      {"usable_here", usable_count},
      {"max_bytes", limit},
      {"here", {{"arch", opt(here.arch)}, {"nvrtc", opt(here.nvrtc)}, {"codegen", here.codegen}}},
      {"groups", json::array()}};
  Table t{{"arch", "nvrtc", "codegen", ">entries", ">size", ">hits", ">compile time saved", "here"},
          {}};
  for (const auto& [k, g] : groups) {
    const auto [arch, nvrtc, codegen] = k;
    Entry probe; // usable() of the group's target
    probe.meta.arch = arch, probe.meta.nvrtc = nvrtc, probe.meta.codegen = codegen;
    const bool here_ok = usable(probe, here);
    j["groups"].push_back({{"arch", arch},
                           {"nvrtc", nvrtc},
                           {"codegen", codegen},
                           {"entries", g.entries},
                           {"bytes", g.bytes},
                           {"hits", g.hits},
                           {"compile_ms_saved", g.saved_ms},
                           {"usable_here", here_ok}});
    t.rows.push_back(
        {fmt::format("sm_{}", arch), fmt::format("{}.{}", nvrtc / 1000, nvrtc % 1000 / 10),
         std::to_string(codegen), std::to_string(g.entries), human_bytes(g.bytes),
         std::to_string(g.hits), human_ms(g.saved_ms), here_ok ? "usable" : "foreign"});
  }
  auto known = [](std::optional<int> v, const char* f) {
    return v ? fmt::format(fmt::runtime(f), *v) : std::string("unknown");
  };
  std::string text = fmt::format(
      "cache directory     {}{}\nentries             {} ({} of {}), {} damaged\n"
      "hits                {}\n"
      "compile time saved  {} (hits x compile time)\nthis machine        arch {}, NVRTC {}, "
      "codegen {}: {} entries usable\n",
      d.dir, d.exists ? "" : " (does not exist)", total.entries, human_bytes(total.bytes),
      limit ? fmt::format("at most {}, KILN_CACHE_MAX_BYTES", human_bytes(limit)) : "no limit",
      damaged, total.hits, human_ms(total.saved_ms), known(here.arch, "sm_{}"),
      known(here.nvrtc, "{}"), here.codegen, usable_count);
  if (!t.rows.empty()) text += "\n", text += t.str();
  print(a, j, text);
  return 0;
}

namespace {

std::vector<const Entry*> listed(const Directory& d, const Args& a) {
  std::vector<const Entry*> es;
  for (const Entry& e : d.entries)
    if ((a.filter.empty() || (e.valid() && e.meta.name.find(a.filter) != std::string::npos) ||
         e.hash.rfind(a.filter, 0) == 0) &&
        (!a.only_arch || (e.valid() && e.meta.arch == *a.only_arch)))
      es.push_back(&e);
  auto key = [&](const Entry* e) -> std::tuple<int64_t, std::string> {
    if (a.sort == "name") return {0, e->valid() ? e->meta.name : ""};
    if (a.sort == "size") return {-int64_t(e->file_bytes), ""};
    if (a.sort == "hits") return {-e->hits, ""};
    if (a.sort == "compile") return {-e->meta.compile_us, ""};
    if (a.sort == "age") return {-e->meta.created, ""}; // newest first
    return {-e->last_used, ""};                         // used: most recent first
  };
  std::stable_sort(es.begin(), es.end(),
                   [&](const Entry* x, const Entry* y) { return key(x) < key(y); });
  if (a.reverse) std::reverse(es.begin(), es.end());
  return es;
}

} // namespace

int list(const Directory& d, const Here& here, const Args& a) {
  const std::vector<const Entry*> es = listed(d, a);
  json j = json::array();
  Table t{
      {"hash", "name", "arch", "format", ">size", ">compile", ">hits", ">used", ">age", "state"},
      {}};
  const int64_t now = std::time(nullptr);
  for (const Entry* e : es) {
    j.push_back(entry_json(*e, here));
    if (!e->valid()) {
      t.rows.push_back({e->hash, "", "", "", human_bytes(e->file_bytes), "", "", "", "",
                        "damaged: " + e->problem});
      continue;
    }
    t.rows.push_back({e->hash, e->meta.name, fmt::format("sm_{}", e->meta.arch),
                      e->meta.is_cubin ? "cubin" : "ptx", human_bytes(e->file_bytes + e->use_bytes),
                      fmt::format("{:.0f} ms", e->meta.compile_us / 1000.0),
                      std::to_string(e->hits), human_age(now - e->last_used) + " ago",
                      human_age(now - e->meta.created), usable(*e, here) ? "usable" : "foreign"});
  }
  print(a, j, es.empty() ? fmt::format("no entries in {}\n", d.dir) : t.str());
  return 0;
}

namespace {

// cuobjdump from PATH, else from the CUDA toolkit ($CUDA_HOME, /usr/local/cuda).
std::string cuobjdump() {
  if (std::system("command -v cuobjdump >/dev/null 2>&1") == 0) return "cuobjdump";
  const char* home = std::getenv("CUDA_HOME");
  for (const std::string& dir : {std::string(home ? home : ""), std::string("/usr/local/cuda")})
    if (!dir.empty() && std::filesystem::exists(dir + "/bin/cuobjdump"))
      return dir + "/bin/cuobjdump";
  return "cuobjdump";
}

// cuobjdump `flag` on the binary written to a temp file; its output, or why not.
std::string disassemble(const std::string& binary, const std::string& flag) {
  char path[] = "/tmp/kiln-cache-XXXXXX";
  const int fd = ::mkstemp(path);
  if (fd < 0) return "cannot create a temp file\n";
  std::FILE* f = ::fdopen(fd, "wb");
  std::fwrite(binary.data(), 1, binary.size(), f);
  std::fclose(f);
  std::string out;
  const std::string tool = cuobjdump();
  if (std::FILE* p = ::popen(fmt::format("{} {} {} 2>&1", tool, flag, path).c_str(), "r")) {
    char buf[4096];
    for (size_t n; (n = std::fread(buf, 1, sizeof buf, p)) > 0;) out.append(buf, n);
    if (::pclose(p) != 0)
      out = "cuobjdump failed or is not installed (it comes with the CUDA "
            "toolkit):\n" +
            out;
  }
  std::filesystem::remove(path);
  return out;
}

} // namespace

int show(const Directory& d, const Here& here, const Args& a) {
  const std::vector<const Entry*> found = ci::find(d, a.what);
  if (found.size() != 1) {
    std::fprintf(stderr, "kiln-cache show: %s '%s' in %s\n",
                 found.empty() ? "no entry named or hashed" : "several entries match",
                 a.what.c_str(), d.dir.c_str());
    return 2;
  }
  const Entry& e = *found[0];
  ci::Sections s;
  std::string why = e.valid() ? ci::read_sections(e, s) : e.problem;
  if (!why.empty()) {
    std::fprintf(stderr, "kiln-cache show: %s: %s\n", e.path.c_str(), why.c_str());
    return 1;
  }
  json j = entry_json(e, here);
  j.update({{"key", s.key}, {"source", s.source}, {"log", s.log}});
  std::string text = fmt::format(
      "entry      {}\nname       {}\ntarget     sm_{}, NVRTC {}, codegen {} ({})\nformat     {}, "
      "{}\ncompiled   in {:.1f} ms\nhits       {}\n\nkey ({} bytes), field by field:\n{}\n",
      e.path, e.meta.name, e.meta.arch, e.meta.nvrtc, e.meta.codegen,
      usable(e, here) ? "usable here" : "not usable here", e.meta.is_cubin ? "cubin" : "ptx",
      human_bytes(e.binary_bytes), e.meta.compile_us / 1000.0, e.hits, e.key_bytes,
      key_fields_text(s.key));
  text += fmt::format("NVRTC log: {}\n", s.log.empty() ? "(empty)" : "\n" + s.log);
  text += "\nCUDA source:\n" + s.source;
  if (a.ptx) {
    const std::string ptx =
        e.meta.is_cubin ? disassemble(s.binary, "-ptx") : std::string(s.binary.c_str());
    j["ptx"] = ptx;
    text += "\nPTX:\n" + ptx;
  }
  if (a.sass) {
    const std::string sass = e.meta.is_cubin ? disassemble(s.binary, "-sass")
                                             : std::string("(a PTX entry has no SASS)\n");
    j["sass"] = sass;
    text += "\nSASS:\n" + sass;
  }
  print(a, j, text);
  return 0;
}

} // namespace kiln_cache
