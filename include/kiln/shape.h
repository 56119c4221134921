#pragma once
// Shape: up to kMaxRank extents stored inline (no heap), so recording an op never allocates
// for its shape. Also used for strides. The public API cannot expose llvm::SmallVector, and a
// fixed-capacity array is what a tensor shape needs.
#include <cstdint>
#include <initializer_list>
#include <ostream>
#include <string>
#include <vector>

namespace kiln {

inline constexpr int kMaxRank = 8;

class Shape {
public:
  Shape() = default;
  Shape(std::initializer_list<int64_t> dims);
  explicit Shape(const std::vector<int64_t>& dims);
  template <class It> Shape(It first, It last) {
    for (; first != last; ++first) push_back(static_cast<int64_t>(*first));
  }

  int size() const { return n_; }
  bool empty() const { return n_ == 0; }
  int64_t operator[](int i) const { return d_[i]; }
  int64_t& operator[](int i) { return d_[i]; }
  const int64_t* begin() const { return d_; }
  const int64_t* end() const { return d_ + n_; }
  int64_t* begin() { return d_; }
  int64_t* end() { return d_ + n_; }
  const int64_t* data() const { return d_; }
  int64_t back() const { return d_[n_ - 1]; }
  void push_back(int64_t v); // throws kiln::Error past kMaxRank
  void pop_back() { --n_; }
  void resize(int n, int64_t fill = 0);
  void insert(int pos, int64_t v);
  void erase(int pos);
  /// Product of the extents (1 for rank 0).
  int64_t numel() const {
    int64_t p = 1;
    for (int i = 0; i < n_; ++i) p *= d_[i];
    return p;
  }
  std::vector<int64_t> vec() const { return {begin(), end()}; }
  /// "(2, 3)" like PyTorch's torch.Size printing without the name; "()" for rank 0.
  std::string str() const;

  friend bool operator==(const Shape& a, const Shape& b) {
    if (a.n_ != b.n_) return false;
    for (int i = 0; i < a.n_; ++i)
      if (a.d_[i] != b.d_[i]) return false;
    return true;
  }
  friend bool operator!=(const Shape& a, const Shape& b) { return !(a == b); }

private:
  int64_t d_[kMaxRank] = {};
  int n_ = 0;
};

std::ostream& operator<<(std::ostream& os, const Shape& s);

} // namespace kiln
