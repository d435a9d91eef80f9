#pragma once
// reprise::Error is the one exception type the library throws for bad input:
// its message names the op, the shapes/dtypes/devices involved and what was
// expected.

#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>

namespace reprise {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& what) : std::runtime_error(what) {}
};

namespace detail {
template <class... Parts>
std::string concat(Parts&&... parts) {
  std::ostringstream s;
  (s << ... << std::forward<Parts>(parts));
  return s.str();
}
}  // namespace detail

}  // namespace reprise

// REPRISE_CHECK(cond, "op: ", "message parts", shape, ...) throws
// reprise::Error with the concatenated parts when cond is false.
#define REPRISE_CHECK(cond, ...)                                      \
  do {                                                                \
    if (!(cond)) {                                                    \
      throw ::reprise::Error(::reprise::detail::concat(__VA_ARGS__)); \
    }                                                                 \
  } while (false)

#define REPRISE_FAIL(...) throw ::reprise::Error(::reprise::detail::concat(__VA_ARGS__))
