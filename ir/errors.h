#pragma once
// Throwing kiln::Error with "[op] message" text, formatted with fmt.
#include <kiln/error.h>
#include <kiln/shape.h>

#include <fmt/format.h>
#include <fmt/ostream.h>

template <> struct fmt::formatter<kiln::Shape> : fmt::ostream_formatter {};

namespace kiln::detail {

template <class... Args>
[[noreturn]] void fail(const char* op, fmt::format_string<Args...> f, Args&&... args) {
  throw Error(fmt::format("[{}] ", op) + fmt::format(f, std::forward<Args>(args)...));
}

} // namespace kiln::detail
