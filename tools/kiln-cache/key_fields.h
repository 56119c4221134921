#pragma once
// A kernel key (codegen/cuda_codegen.h, CudaKernelSource::key) field by field, labelled: the
// structure (kind, rank, inputs, tape, outputs; per segment), the variant after "|", then the
// target and versions.
#include <string>
#include <vector>

namespace kiln_cache {

struct KeyField {
  std::string token; // as in the key
  std::string label; // what it is ("input 0", "v3 = op:dtype:operands", "target arch", ...)
};

std::vector<KeyField> key_fields(const std::string& key);
/// One field per line, segments as headings.
std::string key_fields_text(const std::string& key);

} // namespace kiln_cache
