#include "tests/support/expect_error.h"

#include <gtest/gtest.h>

#include "base/error.h"

namespace reprise::testing {

void expect_error(const std::function<void()>& f, const std::vector<std::string>& parts) {
  try {
    f();
    ADD_FAILURE() << "expected an error mentioning " << (parts.empty() ? "anything" : parts[0]);
  } catch (const Error& e) {
    const std::string message = e.what();
    for (const std::string& p : parts)
      EXPECT_NE(message.find(p), std::string::npos) << message << "\n  lacks " << p;
  }
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
}

}  // namespace reprise::testing
