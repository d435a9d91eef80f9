#pragma once
// Durable writes: readers see a file's old contents or the complete new
// ones, never a torn write, and what was written survives a power loss
// once the call returns.

#include <string>

namespace reprise::io {

// Writes `text` to a temporary file beside `path`, fsyncs it, renames it
// over `path` and fsyncs the directory. Raises Error naming the path when
// any step fails, and leaves no temporary file behind.
void write_text_atomic(const std::string& path, const std::string& text);

// The directory that holds `path` ("." for a bare file name).
std::string parent_dir(const std::string& path);

// Fsyncs the directory that holds `path`, so that a rename or a creation in
// it is durable. `where` starts the Error raised when that fails;
// filesystems that cannot sync a directory (EINVAL) are accepted.
void sync_parent_dir(const std::string& path, const std::string& where);

// Creates `dir` and any missing parents, fsyncing the folder above each one
// it creates, so that the new folder cannot vanish in a crash after its
// files were synced. Raises Error naming the folder when any step fails.
void create_directories_durable(const std::string& dir);

}  // namespace reprise::io
