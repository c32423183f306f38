// A file several ranks write or read at computed offsets (pwrite/pread), with errors that name
// the path and the system's reason; plus the directory steps of an atomic save (fsync of a
// directory so that a rename survives a crash).
#pragma once

#include <cstdint>
#include <string>

namespace kformer {

class PosixFile {
 public:
  enum class Mode { read, write, create };  // create: truncate or make it, then write
  PosixFile(const std::string& path, Mode mode);
  ~PosixFile();
  PosixFile(const PosixFile&) = delete;
  PosixFile& operator=(const PosixFile&) = delete;

  void write_at(const void* data, std::uint64_t bytes, std::uint64_t offset);
  void read_at(void* data, std::uint64_t bytes, std::uint64_t offset) const;
  void resize(std::uint64_t bytes);
  void sync();  // data on stable storage
  void close();  // throws if closing reports a deferred write error

 private:
  std::string path_;
  int fd_ = -1;
};

void sync_directory(const std::string& dir);
// Writes `text` (any bytes) to PATH atomically: PATH.tmp, fsync, rename, fsync of the directory.
// The one atomic writer: reports, traces, safetensors exports and checkpoint metadata use it.
void write_file_atomic(const std::string& path, const std::string& text);
std::string read_text_file(const std::string& path);  // throws naming the path

}  // namespace kformer
