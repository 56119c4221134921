#pragma once
// Tensor: a handle to a node of kiln's lazy graph. Creating tensors and calling ops records
// work; reading values (item, to_vector, printing) or kiln::eval runs it.
//
// Threading: kiln's graph is used by one thread at a time (an op from a second thread while
// another uses kiln throws kiln::Error; see kiln::release_thread). Handle counting is
// deliberately non-atomic because it sits on every op's hot path.
#include <kiln/device.h>
#include <kiln/dtype.h>
#include <kiln/shape.h>

#include <cstdint>
#include <ostream>
#include <ranges>
#include <type_traits>
#include <vector>

namespace kiln {

namespace detail {
struct Node;
/// Readies fresh host memory that is about to be written whole (to_vector's result): asks for
/// huge pages and faults the pages in on several threads. A first write to fresh memory costs
/// a page fault per 4 KiB, on one thread about 2.4 GB/s (the H100 host): slower than the
/// link. Small sizes are left alone. The memory's contents are unspecified afterwards.
void prepare_host_pages(void* data, size_t bytes);
} // namespace detail

class Tensor {
public:
  Tensor() = default; // an undefined tensor; ops on it throw
  Tensor(const Tensor& o);
  Tensor(Tensor&& o) noexcept : node_(o.node_) { o.node_ = nullptr; }
  Tensor& operator=(const Tensor& o);
  Tensor& operator=(Tensor&& o) noexcept;
  ~Tensor();

  bool defined() const { return node_ != nullptr; }
  const Shape& shape() const;
  /// Strides in elements. For pending values these are the strides the value will have once
  /// computed (contiguous for computed values; views keep their view strides).
  const Shape& strides() const;
  int64_t size(int dim) const; // negative dims count from the end
  DType dtype() const;
  Device device() const;
  int64_t numel() const { return shape().numel(); }
  int ndim() const { return shape().size(); }
  /// True once the value is computed and held in memory.
  bool is_realized() const;
  bool is_contiguous() const;

  /// The single element, converted to T. Evaluates. Throws unless numel() == 1.
  template <class T> T item() const {
    T v{};
    copy_to_host(&v, dtype_of_v<T>, 1, "item");
    return v;
  }
  /// All elements in row-major order, converted to T as astype would. Evaluates.
  template <class T> std::vector<T> to_vector() const {
    if constexpr (std::is_same_v<T, bool>) { // std::vector<bool> has no data(): go via bytes
      std::vector<uint8_t> bytes = to_vector<uint8_t>();
      return std::vector<bool>(bytes.begin(), bytes.end());
    } else {
      const size_t n = static_cast<size_t>(numel());
      std::vector<T> v;
      v.reserve(n);
      detail::prepare_host_pages(v.data(), n * sizeof(T));
      v.resize(n);
      copy_to_host(v.data(), dtype_of_v<T>, n, "to_vector");
      return v;
    }
  }
  /// All elements in row-major order, converted to the element type as astype would, into
  /// memory the caller owns: a std::span, std::vector, std::array, ... of exactly numel()
  /// elements. No vector in between. Evaluates.
  template <std::ranges::contiguous_range R> void copy_to(R&& out) const {
    using T = std::ranges::range_value_t<R>;
    static_assert(!std::is_const_v<std::remove_reference_t<std::ranges::range_reference_t<R>>>,
                  "copy_to writes into its argument");
    copy_to_host(std::ranges::data(out), dtype_of_v<T>, static_cast<size_t>(std::ranges::size(out)),
                 "copy_to");
  }
  /// The address of the first element of the value in its device's memory (a device pointer
  /// for a GPU tensor), laid out by strides(). Evaluates and waits for it. Valid while this
  /// tensor (or another handle to the same value) lives; kiln never writes into it meanwhile.
  const void* data_ptr() const;

  /// Copy to another device (lazy); returns *this if already there.
  Tensor to(Device d) const;
  /// This value in page-locked (pinned) host memory, from a pool: a CPU tensor whose copies to
  /// a GPU (`to(Device::cuda())`) read it directly, at the link's speed, without the caller
  /// waiting for them. Evaluates and copies once; returns *this if already pinned. Only for
  /// CPU tensors; needs a usable CUDA device (the memory comes from its driver).
  Tensor pin_memory() const;
  /// Whether the value is held in pinned host memory (pin_memory).
  bool is_pinned() const;
  /// Cast (lazy, fusible); returns *this if the dtype already matches.
  Tensor astype(DType t) const;
  /// A contiguous copy if this is a non-contiguous view, else *this.
  Tensor contiguous() const;
  Tensor reshape(const Shape& s) const;

  /// Autodiff (kiln/autograd.h). Whether gradients flow to this value: set on a leaf with
  /// requires_grad_(), and carried by every differentiable op that reads one.
  bool requires_grad() const;
  /// Mark a floating-point leaf as one to differentiate with respect to (or unmark it). The
  /// flag belongs to the value, so every handle to it sees it. Throws for integer and boolean
  /// tensors, and for unmarking a value computed from others (detach() it instead).
  Tensor& requires_grad_(bool on = true);
  /// The same value without gradient history (shares memory; costs no copy).
  Tensor detach() const;

  detail::Node* node() const { return node_; }
  explicit Tensor(detail::Node* adopt); // takes over one handle count

private:
  void copy_to_host(void* dst, DType as, size_t count, const char* op) const;
  detail::Node* node_ = nullptr;
};

/// PyTorch-like repr: values (abbreviated when large), shape, dtype and device. Evaluates.
std::ostream& operator<<(std::ostream& os, const Tensor& t);

} // namespace kiln
