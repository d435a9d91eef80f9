// io/write_file: atomic text writes leave the new contents and no
// temporary file; durable directory creation makes every missing level,
// accepts a folder that exists, and names the path that is in the way.

#include "io/write_file.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "tests/support/expect_error.h"
#include "tests/support/temp_dir.h"

namespace reprise::io {
namespace {

namespace fs = std::filesystem;
using testing::expect_error;

std::string read_whole(const fs::path& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

TEST(WriteFile, TextReplacesTheFileAndLeavesNoTemporary) {
  const fs::path dir = testing::fresh_temp_dir("write_file_text");
  create_directories_durable(dir.string());
  const fs::path path = dir / "config.json";
  write_text_atomic(path.string(), "old\n");
  write_text_atomic(path.string(), "new\n");
  EXPECT_EQ(read_whole(path), "new\n");
  EXPECT_EQ(std::distance(fs::directory_iterator(dir), fs::directory_iterator()), 1);
}

TEST(WriteFile, TextIntoAMissingFolderNamesThePath) {
  const std::string path =
      (fs::path(testing::fresh_temp_dir("write_file_missing")) / "config.json").string();
  expect_error([&] { write_text_atomic(path, "x"); }, {path, "cannot create"});
}

TEST(WriteFile, CreatesEveryMissingLevelAndAcceptsOneThatExists) {
  const fs::path dir = testing::fresh_temp_dir("write_file_levels");
  const fs::path deep = dir / "a" / "b" / "c";
  create_directories_durable(deep.string());
  EXPECT_TRUE(fs::is_directory(deep));
  create_directories_durable(deep.string());                // already there: nothing to do
  create_directories_durable((dir / "a" / "d/").string());  // a trailing slash
  EXPECT_TRUE(fs::is_directory(dir / "a" / "d"));
}

TEST(WriteFile, AFileInTheWayIsAnError) {
  const fs::path dir = testing::fresh_temp_dir("write_file_in_the_way");
  create_directories_durable(dir.string());
  std::ofstream(dir / "taken") << "x";
  expect_error([&] { create_directories_durable((dir / "taken").string()); },
               {"taken", "a file of that name is in the way"});
  expect_error([&] { create_directories_durable((dir / "taken" / "below").string()); },
               {"cannot create directory", "taken"});
}

}  // namespace
}  // namespace reprise::io
