// kernel-lab: times hand-edited variants of kiln's generated row kernels side by side, so that a
// codegen idea is measured before it is built into the emitter. Each .cu file given is compiled
// with kiln's NVRTC options, launched as kiln's row layout launches it (one row per block,
// block = 256, grid = min(O, 2 * 8 * SMs)), timed with CUDA events (median of 20 after 3
// warm-ups), and its output compared bit for bit with the first file's.
//
//   nvcc -O2 -std=c++17 tools/kernel-lab/lab.cu -lnvrtc -o /tmp/lab
//   /tmp/lab bf16 8192 8192 a.cu b.cu ...     (dtype of every buffer: f32 or bf16)
//
// Params fields are filled by name: O, R -> the sizes; sh0, sh1 -> O, R; in0 -> the O x R input;
// in1.. -> R-element inputs (weights); in<k>_s1 -> 1; out0 -> the output; c<k> -> 1e-5.
#include <cuda_runtime.h>
#include <nvrtc.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <random>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#define CK(x)                                                                                      \
  do {                                                                                             \
    cudaError_t e_ = (x);                                                                          \
    if (e_ != cudaSuccess) {                                                                       \
      std::fprintf(stderr, "%s: %s\n", #x, cudaGetErrorString(e_));                                \
      std::exit(1);                                                                                \
    }                                                                                              \
  } while (0)

static std::string read(const char* path) {
  std::ifstream f(path);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

int main(int argc, char** argv) {
  if (argc < 5) {
    std::fprintf(stderr, "usage: lab f32|bf16 O R kernel.cu...\n");
    return 2;
  }
  const bool bf16 = std::string(argv[1]) == "bf16";
  const long long O = std::atoll(argv[2]), R = std::atoll(argv[3]);
  const size_t esize = bf16 ? 2 : 4;
  cudaDeviceProp prop;
  CK(cudaGetDeviceProperties(&prop, 0));
  std::mt19937 rng(42);
  std::normal_distribution<float> nd;
  auto host_data = [&](size_t n) {
    std::vector<unsigned char> h(n * esize);
    for (size_t i = 0; i < n; ++i) {
      float f = nd(rng);
      if (bf16) {
        unsigned u;
        std::memcpy(&u, &f, 4);
        unsigned short b = (unsigned short)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
        std::memcpy(&h[i * 2], &b, 2);
      } else {
        std::memcpy(&h[i * 4], &f, 4);
      }
    }
    return h;
  };
  auto upload = [&](const std::vector<unsigned char>& h) {
    void* d;
    CK(cudaMalloc(&d, h.size()));
    CK(cudaMemcpy(d, h.data(), h.size(), cudaMemcpyHostToDevice));
    return d;
  };
  void* x = upload(host_data(O * R));
  void* w[3] = {upload(host_data(R)), upload(host_data(R)), upload(host_data(R))};
  void* out;
  CK(cudaMalloc(&out, O * R * esize));
  std::vector<unsigned char> ref, got(O * R * esize);
  cudaEvent_t e0, e1;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));
  const double bytes = 2.0 * O * R * esize;
  std::printf("| kernel | regs | median us | GB/s | bits differing from the first "
              "|\n|---|---:|---:|---:|---:|\n");
  for (int a = 4; a < argc; ++a) {
    std::string src = read(argv[a]);
    std::smatch m;
    if (!std::regex_search(src, m,
                           std::regex(R"(__global__ void __launch_bounds__\(\d+\) (\w+)\()"))) {
      std::fprintf(stderr, "%s: no kernel\n", argv[a]);
      return 1;
    }
    std::string name = m[1];
    nvrtcProgram prog;
    nvrtcCreateProgram(&prog, src.c_str(), "k.cu", 0, nullptr, nullptr);
    const char* opts[] = {"--gpu-architecture=sm_90", "-std=c++17",
                          "--include-path=/usr/local/cuda/include", "-default-device",
                          "--fmad=false"};
    if (nvrtcCompileProgram(prog, 5, opts) != NVRTC_SUCCESS) {
      size_t n;
      nvrtcGetProgramLogSize(prog, &n);
      std::string log(n, 0);
      nvrtcGetProgramLog(prog, log.data());
      std::fprintf(stderr, "%s: %s\n", argv[a], log.c_str());
      return 1;
    }
    size_t n;
    nvrtcGetCUBINSize(prog, &n);
    std::vector<char> cubin(n);
    nvrtcGetCUBIN(prog, cubin.data());
    std::string cubin_path = std::string(argv[a]) + ".cubin";
    std::ofstream(cubin_path, std::ios::binary).write(cubin.data(), n);
    cudaLibrary_t lib;
    CK(cudaLibraryLoadData(&lib, cubin.data(), nullptr, nullptr, 0, nullptr, nullptr, 0));
    cudaKernel_t k;
    CK(cudaLibraryGetKernel(&k, lib, name.c_str()));
    cudaFuncAttributes attr;
    CK(cudaFuncGetAttributes(&attr, (const void*)k));
    // Params: 8-byte fields, filled by name.
    size_t p0 = src.find("struct Params {"), p1 = src.find("};", p0);
    std::string body = src.substr(p0, p1 - p0);
    std::vector<unsigned long long> params;
    std::regex field(R"(\s([\w:<>\* ]+?)\s*\b(\w+);)");
    for (auto it = std::sregex_iterator(body.begin(), body.end(), field);
         it != std::sregex_iterator(); ++it) {
      std::string f = (*it)[2];
      unsigned long long v = 0;
      double c = 1e-5;
      if (f == "O" || f == "sh0")
        v = O;
      else if (f == "R" || f == "sh1")
        v = R;
      else if (f == "in0")
        v = (unsigned long long)x;
      else if (f.size() == 3 && f.rfind("in", 0) == 0)
        v = (unsigned long long)w[f[2] - '1'];
      else if (f.rfind("in", 0) == 0 && f.find("_s1") != std::string::npos)
        v = 1;
      else if (f == "out0")
        v = (unsigned long long)out;
      else if (f[0] == 'c')
        std::memcpy(&v, &c, 8);
      else if (f.rfind("in", 0) == 0 && f.find("_s") != std::string::npos)
        v = 0;
      else {
        std::fprintf(stderr, "%s: unknown Params field %s\n", argv[a], f.c_str());
        return 1;
      }
      params.push_back(v);
    }
    void* args[] = {params.data()};
    dim3 grid((unsigned)std::min<long long>(O, 2LL * 8 * prop.multiProcessorCount)), block(256);
    size_t smem = 0;
    if (src.find("extern __shared__") != std::string::npos) {
      smem = R * esize;
      CK(cudaFuncSetAttribute((const void*)k, cudaFuncAttributeMaxDynamicSharedMemorySize,
                              (int)smem));
    }
    CK(cudaMemset(out, 0xff, O * R * esize));
    std::vector<float> ms;
    for (int r = 0; r < 23; ++r) {
      CK(cudaEventRecord(e0));
      CK(cudaLaunchKernel((const void*)k, grid, block, args, smem, 0));
      CK(cudaEventRecord(e1));
      CK(cudaEventSynchronize(e1));
      float t;
      CK(cudaEventElapsedTime(&t, e0, e1));
      if (r >= 3) ms.push_back(t);
    }
    std::sort(ms.begin(), ms.end());
    double us = ms[ms.size() / 2] * 1e3;
    CK(cudaMemcpy(got.data(), out, got.size(), cudaMemcpyDeviceToHost));
    long long diff = 0;
    if (ref.empty())
      ref = got;
    else
      for (size_t i = 0; i < got.size(); i += esize)
        diff += std::memcmp(&got[i], &ref[i], esize) != 0;
    std::printf("| %s | %d | %.1f | %.0f | %lld |\n", argv[a], attr.numRegs, us, bytes / us / 1e3,
                diff);
    nvrtcDestroyProgram(&prog);
  }
  return 0;
}
