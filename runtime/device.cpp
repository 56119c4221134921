// Device selection and the backend registry: the CPU backend always, CUDA backends in builds
// with the toolkit on machines with a usable GPU.
#include "ir/errors.h"
#include "ir/settings.h"
#include "runtime/backend.h"
#include "runtime/cpu/cpu_backend.h"
#include "runtime/free_list.h"
#include "runtime/memory_stats.h"
#ifdef KILN_HAVE_CUDA
#include "runtime/cuda/cuda_backend.h"
#endif

#include <kiln/device.h>

#include <cctype>
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <optional>

namespace kiln {

std::string Device::str() const {
  switch (kind) {
  case Kind::cpu:
    return "cpu";
  case Kind::cuda:
    return "cuda:" + std::to_string(index);
  }
  return fmt::format("invalid device (kind {}, index {})", static_cast<int>(kind), index);
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
  if (!d.is_cuda()) return false;
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

// "cpu", "cuda" or "cuda:N" (N decimal digits only), else nullopt.
std::optional<Device> parse_device(const char* s) {
  if (std::strcmp(s, "cpu") == 0) return Device::cpu();
  if (std::strcmp(s, "cuda") == 0) return Device::cuda(0);
  if (std::strncmp(s, "cuda:", 5) != 0 || !std::isdigit(static_cast<unsigned char>(s[5])))
    return std::nullopt;
  char* end = nullptr;
  errno = 0;
  long index = std::strtol(s + 5, &end, 10);
  if (errno || *end || index > INT32_MAX) return std::nullopt;
  return Device::cuda(static_cast<int>(index));
}

} // namespace

Device detail::device_from_env() {
  const std::optional<std::string> value = setting_text(Setting::device);
  if (!value) return is_available(Device::cuda(0)) ? Device::cuda(0) : Device::cpu();
  const char* env = value->c_str();
  auto d = parse_device(env);
  if (!d)
    throw Error(
        fmt::format("[default_device] KILN_DEVICE={} is not one of cpu, cuda, cuda:N", env));
  if (!is_available(*d))
    throw Error(fmt::format("[default_device] KILN_DEVICE={} but {} is not available ({})", env,
                            d->str(), why_unavailable()));
  return *d;
}

Device default_device() {
  auto& slot = default_slot();
  if (!slot) slot = detail::device_from_env();
  return *slot;
}

void set_default_device(Device d) {
  if (!is_available(d))
    throw Error(
        fmt::format("[set_default_device] {} is not available ({})", d.str(), why_unavailable()));
  default_slot() = d;
}

namespace detail {

void wait_written(Buffer& b) {
  if (!b.writer) return;
  b.writer->wait_copy(b.write_ticket);
  b.writer = nullptr;
}

namespace {

constinit FreeList<sizeof(Buffer), 4096> free_buffers;

} // namespace

void* Buffer::operator new(std::size_t bytes) {
  return free_buffers.allocate(bytes);
}

void Buffer::operator delete(void* p, std::size_t bytes) noexcept {
  free_buffers.release(p, bytes);
}

Buffer::~Buffer() {
  if (owner) {
    owner->release(*this);
  } else if (release_external) {
    if (external_device) {
      try {
        external_device->synchronize();
      } catch (const std::exception& e) { // a destructor: report, and give the memory back
        std::fprintf(stderr, "kiln: waiting for work on adopted memory at %p failed (%s)\n", data,
                     e.what());
      }
    }
    release_external(data, external_ctx);
  }
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
  if (!d.is_cuda()) fail(op, "{} is not a device kiln knows", d.str());
  if (!is_available(d)) fail(op, "{} is not available ({})", d.str(), why_unavailable());
#ifdef KILN_HAVE_CUDA
  return cuda_backend(d.index);
#else
  fail(op, "{} is not available ({})", d.str(), why_unavailable());
#endif
}

bool& launch_thread() {
  static bool on = [] { return setting_flag(Setting::launch_thread).value_or(true); }();
  return on;
}

bool& allow_tf32() {
  static bool allow = [] { return setting_flag(Setting::allow_tf32).value_or(false); }();
  return allow;
}

bool& cublas_enabled() {
  static bool on = [] {
    const std::optional<std::string> v = setting_text(Setting::cublas);
    return !v || (*v != "0" && *v != "off" && *v != "false" && *v != "no");
  }();
  return on;
}

bool& cublas_waits() {
  static bool wait = [] { return setting_text(Setting::cublas) == "wait"; }();
  return wait;
}

int cublas_kind(DType t) {
  switch (t) {
  case DType::f32:
    return allow_tf32() ? 1 : 0;
  case DType::f64:
    return 2;
  case DType::f16:
    return 3;
  case DType::bf16:
    return 4;
  default:
    return -1;
  }
}

#ifndef KILN_HAVE_CUDA
uint32_t cublas_ready_kinds() {
  return 0;
}
bool compute_while_cublas_sets_up(Device, int) {
  return false;
}
#endif

bool& programmatic_launch() {
  static bool on = [] { return setting_flag(Setting::pdl).value_or(true); }();
  return on;
}

bool& merge_launches() {
  static bool on = [] { return setting_flag(Setting::merge_launches).value_or(false); }();
  return on;
}

void synchronize_all() {
  cpu_backend().synchronize();
#ifdef KILN_HAVE_CUDA
  cuda_synchronize_all();
#endif
}

} // namespace detail
} // namespace kiln
