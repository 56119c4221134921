// kiln-cache: inspect and maintain kiln's on-disk kernel cache (docs/kernel-cache.md,
// "kiln-cache"). Exit status: 0 done, 1 damage found (verify) or a failed operation, 2 bad
// arguments or no such entry.
#include "codegen/cache_files.h"
#include "commands.h"
#include "text.h"

#include <CLI/CLI.hpp>

#include <cstdio>

using namespace kiln_cache;

namespace {

// --older-than / --max-size values, checked as CLI11 parses them.
template <class T, class Parse>
CLI::Option* parsed(CLI::App* c, const char* name, std::optional<T>& out, Parse parse,
                    const char* help) {
  return c->add_option_function<std::string>(
      name,
      [&out, parse, name](const std::string& s) {
        out = parse(s);
        if (!out) throw CLI::ValidationError(name, "cannot read '" + s + "'");
      },
      help);
}

} // namespace

int main(int argc, char** argv) {
  CLI::App app{"kiln-cache: inspect and maintain kiln's JIT kernel cache"};
  app.require_subcommand(1);
  Args a;
  std::optional<int> arch, nvrtc;
  app.add_option("--dir", a.dir,
                 "the cache directory (default: $KILN_CACHE_DIR, $XDG_CACHE_HOME/kiln or "
                 "~/.cache/kiln)");
  app.add_option("--arch", arch, "judge usability for this arch (e.g. 90) instead of GPU 0's");
  app.add_option("--nvrtc", nvrtc, "and this NVRTC version (e.g. 13000) instead of the installed");
  auto with_json = [&](CLI::App* c) {
    c->add_flag("--json", a.json, "print JSON");
    return c;
  };

  CLI::App* stats_cmd =
      with_json(app.add_subcommand("stats", "totals, hits and time saved, by target"));
  CLI::App* list_cmd = with_json(app.add_subcommand("list", "one line per entry"));
  list_cmd->add_option("--sort", a.sort, "used (default), age, name, size, hits or compile")
      ->check(CLI::IsMember({"used", "age", "name", "size", "hits", "compile"}));
  list_cmd->add_flag("--reverse", a.reverse, "reverse the order");
  list_cmd->add_option("--filter", a.filter, "entries whose name contains this, or hash starts so");
  list_cmd->add_option("--only-arch", a.only_arch, "entries built for this arch (e.g. 90)");
  CLI::App* show_cmd =
      with_json(app.add_subcommand("show", "an entry: metadata, key, source, log"));
  show_cmd->add_option("entry", a.what, "kernel name or hash (at least 4 hex digits)")->required();
  show_cmd->add_flag("--ptx", a.ptx, "also the PTX (cuobjdump for a cubin)");
  show_cmd->add_flag("--sass", a.sass, "also the SASS (cuobjdump)");
  CLI::App* verify_cmd = with_json(app.add_subcommand("verify", "check every entry; 1 if damaged"));
  verify_cmd->add_flag("--fix", a.fix, "remove damaged entries and kiln's litter");
  CLI::App* prune_cmd = with_json(app.add_subcommand(
      "prune", "remove damaged entries, and those --foreign, --older-than or over --max-size"));
  parsed(prune_cmd, "--max-size", a.max_size, parse_size,
         "keep at most this much, least recently used out first (e.g. 1G, 500M)");
  parsed(prune_cmd, "--older-than", a.older_than, parse_duration,
         "remove entries not used for this long (e.g. 30d, 12h)");
  prune_cmd->add_flag("--foreign", a.foreign, "remove entries this machine and kiln cannot use");
  prune_cmd->add_flag("--dry-run", a.dry_run, "only say what would be removed");
  CLI::App* clear_cmd = with_json(app.add_subcommand("clear", "remove every entry"));
  clear_cmd->add_flag("--dry-run", a.dry_run, "only say what would be removed");
  CLI::App* export_cmd = with_json(app.add_subcommand("export", "write entries to one archive"));
  export_cmd->add_option("file", a.file, "the archive to write")->required();
  export_cmd->add_flag("--all", a.all, "also entries this machine cannot use");
  CLI::App* why_cmd = with_json(app.add_subcommand(
      "why", "for each kernel a run missed (KILN_CACHE_MISS_LOG), how it differs from the cache"));
  why_cmd->add_option("log", a.file, "the miss log the run wrote")->required();
  CLI::App* warm_cmd = nullptr;
  CLI::App* serve_cmd = nullptr;
#ifdef KILN_CACHE_WARM
  // libkiln's compile worker (codegen/nvrtc/compile_workers.h): not for people, so unlisted.
  serve_cmd = app.add_subcommand("serve-compiles", "")->group("");
  warm_cmd = with_json(app.add_subcommand(
      "warm", "compile a run's kernels (its KILN_CACHE_MANIFEST) into the cache, in parallel"));
  warm_cmd->add_option("manifest", a.file, "the manifest the run wrote")->required();
  warm_cmd->add_option("--jobs,-j", a.jobs, "compile processes (default: one per CPU)");
#endif
  CLI::App* import_cmd = with_json(app.add_subcommand("import", "add an archive's entries"));
  import_cmd->add_option("file", a.file, "the archive to read")->required();
  import_cmd->add_flag("--all", a.all, "also entries of another kiln code generator");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }

  a.dir = kiln::detail::cache_files::resolve_dir(a.dir);
  if (a.dir.empty()) {
    std::fprintf(stderr, "kiln-cache: no cache directory: set KILN_CACHE_DIR or HOME\n");
    return 2;
  }
  if (import_cmd->parsed()) return import_entries(a);
#ifdef KILN_CACHE_WARM
  if (serve_cmd->parsed()) return serve_compiles(a); // before the scan: workers start quickly
#endif
  const Here here = detect_here(arch, nvrtc);
  const Directory d = kiln::detail::cache_inspect::scan(a.dir);
  if (stats_cmd->parsed()) return stats(d, here, a);
  if (list_cmd->parsed()) return list(d, here, a);
  if (show_cmd->parsed()) return show(d, here, a);
  if (verify_cmd->parsed()) return verify(d, a);
  if (prune_cmd->parsed()) return prune(d, here, a);
  if (clear_cmd->parsed()) return clear(d, a);
  if (why_cmd->parsed()) return why(d, here, a);
#ifdef KILN_CACHE_WARM
  if (warm_cmd->parsed()) return warm(d, a);
#endif
  return export_entries(d, here, a);
}
