#pragma once
// Structural identity of a FusedKernel (tape, dtypes, index class and broadcast pattern of each
// input, rank, reduction, dots) with sizes left out, so one kernel serves all sizes: as key text
// and as compact signature bytes, both from one visit of the fields (kernel_key.cpp); and a
// readable name with a short hash, e.g. "kiln_mul_add_tanh_f32_3fa2c1".
#include "ir/fused_kernel.h"

#include <llvm/ADT/SmallVector.h>

#include <string>

namespace kiln::detail {

// The two sinks of an identity visit (kernel_key.cpp; the CUDA variant's in codegen). A visit
// calls, for every field that changes the generated code:
//   field(sep, code, text)  its separator and text in the key (sep 0: none; text: a callable,
//                           never called by the byte sink), its code in the bytes;
//   count(n)                a list's length: bytes only (the key's fields delimit themselves).
/// The readable key.
struct KeyText {
  std::string out;
  template <class Text> void field(char sep, int64_t, Text text) {
    if (sep) out += sep;
    out += text();
  }
  void count(size_t) {}
};

/// Compact bytes, built without formatting (tens of nanoseconds).
struct SignatureBytes {
  llvm::SmallVectorImpl<char>& out;
  void put(int64_t v) { // small non-negative values in one byte, others in nine
    if (v >= 0 && v < 255) {
      out.push_back(static_cast<char>(v));
      return;
    }
    out.push_back(static_cast<char>(255));
    for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>(v >> (8 * i)));
  }
  template <class Text> void field(char, int64_t code, Text) { put(code); }
  void count(size_t n) { put(static_cast<int64_t>(n)); }
};

std::string kernel_key(const FusedKernel& k);
/// The same structure as kernel_key, as compact bytes built without formatting (tens of
/// nanoseconds): what the in-memory kernel cache looks kernels up by.
void kernel_signature(const FusedKernel& k, llvm::SmallVectorImpl<char>& out);
std::string kernel_name(const FusedKernel& k);
/// The same, from k's kernel_key computed already.
std::string kernel_name(const FusedKernel& k, const std::string& key);

} // namespace kiln::detail
