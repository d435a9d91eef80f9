#pragma once
// What the targets that read folders share: a scratch folder for the
// process and a way to put an input's bytes in it.

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

namespace reprise::fuzz {

// A fresh folder, removed when the process exits normally; one per process,
// so parallel fuzzers never share one. It lives in /dev/shm where there is
// one: on a disk filesystem such as ext4, a file truncated and rewritten is
// flushed to the disk when it is closed, which made each input wait on the
// disk (2000 inputs took 10 s on ext4 against 0.8 s on tmpfs).
inline const std::string& scratch_dir() {
  struct Dir {
    std::string path;
    Dir() {
      const std::filesystem::path shm = "/dev/shm";
      const std::filesystem::path parent =
          std::filesystem::is_directory(shm) ? shm : std::filesystem::temp_directory_path();
      std::string pattern = (parent / "reprise_fuzz_XXXXXX").string();
      if (::mkdtemp(pattern.data()) == nullptr) __builtin_trap();
      path = pattern;
    }
    ~Dir() {
      std::error_code ec;
      std::filesystem::remove_all(path, ec);
    }
  };
  static const Dir dir;
  return dir.path;
}

// Replaces the file at `path` with `size` bytes from `data`.
inline void write_file(const std::string& path, const uint8_t* data, size_t size) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(data), std::streamsize(size));
  if (!out) __builtin_trap();  // the harness failed, not the reader
}

}  // namespace reprise::fuzz
