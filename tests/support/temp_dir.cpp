#include "tests/support/temp_dir.h"

#include <gtest/gtest.h>

#include <filesystem>

namespace reprise::testing {

std::string fresh_temp_dir(const std::string& name) {
  const std::filesystem::path dir =
      std::filesystem::path(::testing::TempDir()) / ("reprise_" + name);
  std::filesystem::remove_all(dir);
  return dir.string();
}

}  // namespace reprise::testing
