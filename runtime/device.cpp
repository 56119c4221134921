// Device selection and the backend registry: the CPU backend always, CUDA backends in builds
// with the toolkit on machines with a usable GPU.
#include "engine/errors.h"
#include "runtime/backend.h"
#include "runtime/cpu/cpu_backend.h"
#include "runtime/memory_stats.h"
#ifdef KILN_HAVE_CUDA
#include "runtime/cuda/cuda_backend.h"
#endif

#include <kiln/device.h>

#include <cstdlib>
#include <cstring>
#include <optional>

namespace kiln {

std::string Device::str() const {
  return is_cpu() ? std::string("cpu") : "cuda:" + std::to_string(index);
}
std::ostream& operator<<(std::ostream& os, Device d) {
  return os << d.str();
}

namespace {
std::string why_unavailable() {
#ifdef KILN_HAVE_CUDA
  if (detail::cuda_device_count() > 0)
    return fmt::format("this machine has {} CUDA device(s)", detail::cuda_device_count());
  return "no usable CUDA device or driver: " + detail::cuda_unavailable_reason();
#else
  return "this build of kiln has no CUDA backend";
#endif
}
} // namespace

bool is_available(Device d) {
  if (d.is_cpu()) return true;
#ifdef KILN_HAVE_CUDA
  return d.index >= 0 && d.index < detail::cuda_device_count();
#else
  return false;
#endif
}

namespace {
std::optional<Device>& default_slot() {
  static std::optional<Device> d;
  return d;
}
} // namespace

Device default_device() {
  auto& slot = default_slot();
  if (slot) return *slot;
  const char* env = std::getenv("KILN_DEVICE");
  if (env && std::strncmp(env, "cuda", 4) == 0) {
    int index = env[4] == ':' ? std::atoi(env + 5) : 0;
    Device d = Device::cuda(index);
    if (!is_available(d))
      throw Error(fmt::format("[default_device] KILN_DEVICE={} but {} is not available (this "
                              "build of kiln has no CUDA backend)",
                              env, d.str()));
    return *(slot = d);
  }
  if (env && *env && std::strcmp(env, "cpu") != 0)
    throw Error(
        fmt::format("[default_device] KILN_DEVICE={} is not one of cpu, cuda, cuda:N", env));
  return *(slot = Device::cpu());
}

void set_default_device(Device d) {
  if (!is_available(d))
    throw Error(
        fmt::format("[set_default_device] {} is not available ({})", d.str(), why_unavailable()));
  default_slot() = d;
}

namespace detail {

Buffer::~Buffer() {
  if (owner) owner->release(*this);
}

BufferRef Backend::adopt(void* data, size_t bytes) {
  BufferRef b(new Buffer);
  b->data = data;
  b->bytes = bytes;
  b->owner = this;
  memory_stats().on_alloc(static_cast<int64_t>(bytes));
  return b;
}

Backend& backend_for(Device d, const char* op) {
  if (d.is_cpu()) return cpu_backend();
  if (!is_available(d)) fail(op, "{} is not available ({})", d.str(), why_unavailable());
#ifdef KILN_HAVE_CUDA
  return cuda_backend(d.index);
#else
  fail(op, "{} is not available ({})", d.str(), why_unavailable());
#endif
}

bool& launch_thread() {
  static bool on = [] {
    const char* v = std::getenv("KILN_LAUNCH_THREAD");
    return !(v && std::strcmp(v, "0") == 0);
  }();
  return on;
}

bool& allow_tf32() {
  static bool allow = [] {
    const char* v = std::getenv("KILN_ALLOW_TF32");
    return v && *v && *v != '0';
  }();
  return allow;
}

void synchronize_all() {
  cpu_backend().synchronize();
#ifdef KILN_HAVE_CUDA
  cuda_synchronize_all();
#endif
}

} // namespace detail
} // namespace kiln
