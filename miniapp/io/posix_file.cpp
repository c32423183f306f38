// Offset reads and writes, and the directory steps of an atomic save (see posix_file.hpp).
#include "io/posix_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <stdexcept>

namespace kformer {
namespace {
std::runtime_error sys_error(const std::string& what, const std::string& path) {
  return std::runtime_error(what + " " + path + ": " + std::strerror(errno));
}
std::string parent_of(const std::string& path) {
  const auto slash = path.find_last_of('/');
  return slash == std::string::npos ? "." : slash == 0 ? "/" : path.substr(0, slash);
}
}  // namespace

PosixFile::PosixFile(const std::string& path, Mode mode) : path_(path) {
  const int flags = mode == Mode::read ? O_RDONLY : mode == Mode::write ? O_WRONLY : (O_WRONLY | O_CREAT | O_TRUNC);
  fd_ = ::open(path.c_str(), flags | O_CLOEXEC, 0644);
  if (fd_ < 0) throw sys_error(mode == Mode::read ? "cannot open" : "cannot write", path);
}

PosixFile::~PosixFile() {
  if (fd_ >= 0) ::close(fd_);
}

void PosixFile::write_at(const void* data, std::uint64_t bytes, std::uint64_t offset) {
  const char* p = static_cast<const char*>(data);
  while (bytes > 0) {
    const ssize_t n = ::pwrite(fd_, p, bytes, static_cast<off_t>(offset));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) throw sys_error("writing", path_);
    p += n, bytes -= std::uint64_t(n), offset += std::uint64_t(n);
  }
}

void PosixFile::read_at(void* data, std::uint64_t bytes, std::uint64_t offset) const {
  char* p = static_cast<char*>(data);
  while (bytes > 0) {
    const ssize_t n = ::pread(fd_, p, bytes, static_cast<off_t>(offset));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw sys_error("reading", path_);
    if (n == 0) throw std::runtime_error(path_ + " is truncated: it ends before byte " + std::to_string(offset + bytes));
    p += n, bytes -= std::uint64_t(n), offset += std::uint64_t(n);
  }
}

void PosixFile::resize(std::uint64_t bytes) {
  if (::ftruncate(fd_, static_cast<off_t>(bytes)) != 0) throw sys_error("cannot size", path_);
}

void PosixFile::sync() {
  if (::fsync(fd_) != 0) throw sys_error("cannot sync", path_);
}

void PosixFile::close() {
  const int fd = fd_;
  fd_ = -1;
  if (fd >= 0 && ::close(fd) != 0) throw sys_error("closing", path_);
}

void sync_directory(const std::string& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) throw sys_error("cannot open directory", dir);
  ::fsync(fd);  // some file systems refuse fsync on a directory: the rename is then as safe as it gets
  ::close(fd);
}

void write_file_atomic(const std::string& path, const std::string& text) {
  const std::string tmp = path + ".tmp";
  {
    PosixFile f(tmp, PosixFile::Mode::create);
    f.write_at(text.data(), text.size(), 0);
    f.sync();
    f.close();
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) throw sys_error("cannot rename " + tmp + " to", path);
  sync_directory(parent_of(path));
}

std::string read_text_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error(path + " is missing or unreadable");
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

}  // namespace kformer
