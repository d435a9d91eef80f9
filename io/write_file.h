#pragma once
// Writing a small text file atomically: readers see the old file or the
// complete new one, never a torn write.

#include <string>

namespace reprise::io {

// Writes `text` to a temporary file beside `path`, fsyncs it and renames it
// over `path`. Raises Error naming the path when any step fails, and
// leaves no temporary file behind.
void write_text_atomic(const std::string& path, const std::string& text);

}  // namespace reprise::io
