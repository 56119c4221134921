// A shared library for tests/dlpack/torch_dlpack.py: kiln's DLPack export and import, called
// from Python through ctypes, so that PyTorch's DLPack reads what kiln exports and kiln reads
// what PyTorch exports, without a copy either way.
#include <kiln/kiln.h>

#include <dlpack/dlpack.h>

#include <cstdio>

using namespace kiln;

namespace {
Device device_of(int cuda) {
  return cuda ? Device::cuda(0) : Device::cpu();
}
} // namespace

extern "C" {

/// The transpose of arange(12).reshape(3, 4) * 0.5 (strides 1, 4), exported; null on error.
DLManagedTensor* kiln_dlpack_export(int cuda) try {
  Tensor x = arange(0, 12, 1, DType::f32, device_of(cuda)).reshape({3, 4}) * 0.5f;
  eval(x);
  return to_dlpack(transpose(x, 0, 1));
} catch (const Error& e) {
  std::fprintf(stderr, "kiln_dlpack_export: %s\n", e.what());
  return nullptr;
}

/// Imports `m`: its sum (in f64), and in `*same` whether kiln reads the producer's memory
/// (`expected` is the address of its first element). NaN on error.
double kiln_dlpack_import_sum(DLManagedTensor* m, const void* expected, int* same) try {
  Tensor t = from_dlpack(m);
  *same = t.data_ptr() == expected;
  return sum(t.astype(DType::f64)).item<double>();
} catch (const Error& e) {
  std::fprintf(stderr, "kiln_dlpack_import_sum: %s\n", e.what());
  return 0.0 / 0.0;
}

} // extern "C"
