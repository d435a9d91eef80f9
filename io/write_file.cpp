#include "io/write_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <vector>

#include "base/error.h"

namespace reprise::io {

void write_text_atomic(const std::string& path, const std::string& text) {
  // A unique name in the target's directory, so the rename stays in one filesystem.
  static std::atomic<uint64_t> counter{0};
  const std::string tmp =
      path + ".tmp." + std::to_string(::getpid()) + "." + std::to_string(counter++);
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  REPRISE_CHECK(fd >= 0, path, ": cannot create ", tmp, " (", std::strerror(errno), ")");
  size_t done = 0;
  bool ok = true;
  while (ok && done < text.size()) {
    ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    ok = n > 0;
    if (ok) done += size_t(n);
  }
  ok = ok && ::fsync(fd) == 0;
  ok = (::close(fd) == 0) && ok;
  if (!ok || ::rename(tmp.c_str(), path.c_str()) != 0) {
    int err = errno;
    ::unlink(tmp.c_str());
    REPRISE_FAIL(path, ": write failed (", std::strerror(err), ")");
  }
  sync_parent_dir(path, path + ": the file is written, but");
}

std::string parent_dir(const std::string& path) {
  std::string parent = std::filesystem::path(path).parent_path().string();
  return parent.empty() ? "." : parent;
}

void sync_parent_dir(const std::string& path, const std::string& where) {
  const std::string parent = parent_dir(path);
  int dir = ::open(parent.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  REPRISE_CHECK(dir >= 0, where, " opening its directory ", parent,
                " to sync it failed: ", std::strerror(errno));
  int rc = ::fsync(dir);
  int err = errno;
  ::close(dir);
  REPRISE_CHECK(rc == 0 || err == EINVAL, where, " syncing its directory ", parent,
                " failed: ", std::strerror(err));
}

void create_directories_durable(const std::string& dir) {
  // The missing folders, innermost first.
  std::vector<std::filesystem::path> missing;
  std::error_code ec;
  for (std::filesystem::path p = std::filesystem::path(dir).lexically_normal();
       !p.empty() && !std::filesystem::exists(p, ec); p = p.parent_path()) {
    missing.push_back(p);
    if (p == p.parent_path()) break;
  }
  for (auto it = missing.rbegin(); it != missing.rend(); ++it) {
    const std::string folder = it->string();
    if (!std::filesystem::create_directory(*it, ec) && ec)
      REPRISE_FAIL("cannot create directory '", folder, "': ", ec.message());
    sync_parent_dir(folder, "created directory '" + folder + "', but");
  }
  REPRISE_CHECK(std::filesystem::is_directory(dir, ec), "cannot create directory '", dir,
                "': a file of that name is in the way");
}

}  // namespace reprise::io
