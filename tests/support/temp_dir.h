#pragma once
// Folders for tests that write files.

#include <string>

namespace reprise::testing {

// <GoogleTest's temp dir>/reprise_<name>, removed with anything in it
// (left by an earlier run) and not created: the path for a test to write to.
std::string fresh_temp_dir(const std::string& name);

}  // namespace reprise::testing
