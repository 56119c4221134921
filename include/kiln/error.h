#pragma once
// kiln::Error: the one exception type kiln throws. Messages start with the op name in brackets,
// e.g. "[matmul] shapes (3, 4) and (5, 6) cannot be multiplied".
#include <stdexcept>
#include <string>

namespace kiln {

class Error : public std::runtime_error {
public:
  explicit Error(const std::string& what) : std::runtime_error(what) {}
};

} // namespace kiln
