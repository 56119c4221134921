#include "key_fields.h"

#include <fmt/format.h>

#include <cctype>

namespace kiln_cache {

namespace {

bool starts(const std::string& s, const char* prefix) {
  return s.rfind(prefix, 0) == 0;
}

// The label of a token of the variant and target part (after "|").
std::string variant_label(const std::string& tok) {
  if (starts(tok, "sm_")) return "target arch";
  if (starts(tok, "nvrtc")) return "NVRTC version";
  if (starts(tok, "cg")) return "codegen version";
  if (starts(tok, "dev")) return "hash of the pasted device code";
  if (starts(tok, "ix")) return "index kernel version";
  return "variant";
}

} // namespace

std::vector<KeyField> key_fields(const std::string& key) {
  std::vector<KeyField> out;
  int input = 0, inst = 0, segment = -1;
  bool variant = false;
  for (size_t at = 0; at < key.size();) {
    size_t end = key.find(' ', at);
    if (end == std::string::npos) end = key.size();
    const std::string tok = key.substr(at, end - at);
    at = end + 1;
    std::string what;
    if (tok == "{")
      what = fmt::format("segment {}", ++segment), input = inst = 0, variant = false;
    else if (tok == "}" || tok == "|")
      what = tok == "|" ? "(the variant follows)" : "(end of the segment)", variant = tok == "|";
    else if (variant || starts(tok, "sm_") || starts(tok, "nvrtc"))
      what = variant_label(tok);
    else if (tok == "ew" || tok == "reduce" || starts(tok, "seg"))
      what = "kind";
    else if (tok.size() > 1 && tok[0] == 'r' && std::isdigit(static_cast<unsigned char>(tok[1])))
      what = "rank";
    else if (starts(tok, "in:"))
      what = fmt::format("input {}", input++);
    else if (starts(tok, "out:"))
      what = "output (value:dtype:c|s|r)";
    else if (starts(tok, "axes"))
      what = "reduced axes (mask)";
    else if (starts(tok, "dot:"))
      what = "dot product (inputs, K group)";
    else if (tok == "repro")
      what = "reproducible: the same bits on every device";
    else
      what = fmt::format("v{} = op:dtype:operands", inst++);
    out.push_back({tok, what});
  }
  return out;
}

std::string key_fields_text(const std::string& key) {
  std::string out;
  for (const KeyField& f : key_fields(key))
    out += f.token == "{" ? fmt::format("  {}:\n", f.label)
                          : fmt::format("  {:<20} {}\n", f.token, f.label);
  return out;
}

} // namespace kiln_cache
