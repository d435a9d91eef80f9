#include "io/read_file.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <fstream>

#include "base/error.h"

namespace reprise::io {

std::string read_file(const std::string& path, uint64_t max_bytes, const std::string& what) {
  struct stat st {};
  REPRISE_CHECK(::stat(path.c_str(), &st) == 0, path, ": cannot open ", what, " (",
                std::strerror(errno), ")");
  REPRISE_CHECK(S_ISREG(st.st_mode), path, ": expected ", what,
                ", found something that is not a file");
  REPRISE_CHECK(uint64_t(st.st_size) <= max_bytes, path, ": ", st.st_size, " bytes, more than the ",
                max_bytes, " accepted for ", what);
  std::ifstream in(path, std::ios::binary);
  REPRISE_CHECK(in.good(), path, ": cannot open ", what, " (", std::strerror(errno), ")");
  std::string bytes(size_t(st.st_size), '\0');
  in.read(bytes.data(), std::streamsize(bytes.size()));
  // A file that changed size since stat is read as far as it goes, and
  // refused if it grew past what was read.
  bytes.resize(size_t(in.gcount()));
  REPRISE_CHECK(!in.bad() && in.peek() == std::char_traits<char>::eof(), path,
                ": read failed or the file grew while reading");
  return bytes;
}

}  // namespace reprise::io
