#pragma once
// Reading a whole (small) file, with a size limit so that a wrong path or a
// hostile file cannot make the reader allocate without bound.

#include <cstdint>
#include <string>

namespace reprise::io {

// The bytes of the file at `path`. Raises Error naming the path when it
// cannot be opened or read, is not a regular file, or holds more than
// max_bytes bytes (`what` names the kind of file expected, for the message).
std::string read_file(const std::string& path, uint64_t max_bytes, const std::string& what);

}  // namespace reprise::io
