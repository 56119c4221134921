#pragma once
// The kiln-cache commands. Each reads the scanned directory, prints a table (or JSON with
// --json) and returns the process's exit status.
#include "codegen/cache_inspect.h"
#include "here.h"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <string>

namespace kiln_cache {

using kiln::detail::cache_inspect::Directory;
using kiln::detail::cache_inspect::Entry;

struct Args {
  std::string dir;
  bool json = false;
  // list
  std::string sort = "used", filter;
  bool reverse = false;
  std::optional<int> only_arch;
  // show
  std::string what;
  bool ptx = false, sass = false;
  // verify, prune, clear, import
  bool fix = false, dry_run = false, foreign = false, all = false;
  std::optional<uint64_t> max_size;
  std::optional<int64_t> older_than;
  // export, import, why, warm
  std::string file;
  int jobs = 0; // warm: compile processes (0: one per CPU)
};

/// Whether this machine (and this kiln) can use e.
bool usable(const Entry& e, const Here& here);
/// e's metadata as JSON (what `list --json` prints per entry).
nlohmann::json entry_json(const Entry& e, const Here& here);
/// Prints `j` (indented) or, without --json, `text`.
void print(const Args& a, const nlohmann::json& j, const std::string& text);

int stats(const Directory& d, const Here& here, const Args& a);
int list(const Directory& d, const Here& here, const Args& a);
int show(const Directory& d, const Here& here, const Args& a);
int verify(const Directory& d, const Args& a);
int prune(const Directory& d, const Here& here, const Args& a);
int clear(const Directory& d, const Args& a);
int export_entries(const Directory& d, const Here& here, const Args& a);
int import_entries(const Args& a);
int why(const Directory& d, const Here& here, const Args& a);
int warm(const Directory& d, const Args& a); // built with the CUDA toolkit only
/// The compile worker libkiln starts (codegen/nvrtc/compile_workers.h); CUDA toolkit only.
int serve_compiles(const Args& a);

} // namespace kiln_cache
