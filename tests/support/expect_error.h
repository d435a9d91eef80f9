#pragma once
// The bad-input check every test file needs: run a call, expect a
// reprise::Error, and check that its message names what it should (the op,
// the shapes, what was expected).

#include <functional>
#include <string>
#include <vector>

namespace reprise::testing {

// Runs f and adds a test failure unless it raises a reprise::Error whose
// message contains every one of `parts` (each missing part is a failure of
// its own, with the message).
void expect_error(const std::function<void()>& f, const std::vector<std::string>& parts);

// The message of the reprise::Error that f raises, or "no error".
std::string error_of(const std::function<void()>& f);

}  // namespace reprise::testing
