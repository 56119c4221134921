#pragma once
// NVRTC's functions, loaded at first use (ir/shared_library.h) instead of linked, so that
// libkiln loads on machines without the CUDA toolkit. Call them as nvrtc_api().nvrtcX(...).
#include <nvrtc.h>

#include <string>

namespace kiln::detail {

// Every NVRTC function kiln calls.
#define KILN_NVRTC_FUNCTIONS(X)                                                                    \
  X(nvrtcVersion)                                                                                  \
  X(nvrtcGetNumSupportedArchs)                                                                     \
  X(nvrtcGetSupportedArchs)                                                                        \
  X(nvrtcCreateProgram)                                                                            \
  X(nvrtcCompileProgram)                                                                           \
  X(nvrtcDestroyProgram)                                                                           \
  X(nvrtcGetProgramLogSize)                                                                        \
  X(nvrtcGetProgramLog)                                                                            \
  X(nvrtcGetCUBINSize)                                                                             \
  X(nvrtcGetCUBIN)                                                                                 \
  X(nvrtcGetPTXSize)                                                                               \
  X(nvrtcGetPTX)                                                                                   \
  X(nvrtcGetErrorString)

struct NvrtcApi {
#define KILN_NVRTC_MEMBER(name) decltype(&::name) name = nullptr;
  KILN_NVRTC_FUNCTIONS(KILN_NVRTC_MEMBER)
#undef KILN_NVRTC_MEMBER
};

/// NVRTC, loaded on the first call; throws kiln::Error naming the library and why it could not
/// be loaded (each later call tries again).
const NvrtcApi& nvrtc_api();
/// "" when NVRTC loads, else why not (never throws).
std::string nvrtc_unavailable_reason();

} // namespace kiln::detail
