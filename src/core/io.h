// Files as rotor writes them: whole-file reads with clear errors, and atomic
// writes (docs/design.md, "Checkpoints and run directories") — data goes to "PATH.tmp-<pid>", is fsync'ed,
// renamed over PATH and the directory is fsync'ed, so a crash leaves either the
// old file or the new one, never a torn one. Directories (a checkpoint made of
// several files) are published the same way under a temporary name.
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <string_view>

namespace rotor {

// The whole file as bytes. A missing or unreadable file is a rotor::Error
// naming the path and the reason.
std::string read_file(const std::string& path);

// Writes a file atomically: either the old contents or all of `bytes` survive
// a crash. The parent directory must exist. Throws rotor::Error on failure and
// then leaves no temporary file behind (and the old file untouched).
void atomic_write_file(const std::string& path, std::string_view bytes);

// The streaming form of atomic_write_file, for files too large to assemble in
// memory: write() pieces, then commit(). Destroyed without commit() (an
// exception on the way), it removes its temporary file and the old file stays.
// Not for concurrent writers of one path within one process (the temporary
// name is per process).
class AtomicFileWriter {
 public:
  explicit AtomicFileWriter(std::string path);
  ~AtomicFileWriter();
  AtomicFileWriter(const AtomicFileWriter&) = delete;
  AtomicFileWriter& operator=(const AtomicFileWriter&) = delete;

  void write(const void* data, size_t bytes);
  void write(std::string_view bytes) { write(bytes.data(), bytes.size()); }
  size_t bytes_written() const { return written_; }
  // fsync, rename into place, fsync the directory.
  void commit();

  const std::string& path() const { return path_; }
  const std::string& temp_path() const { return temp_path_; }

 private:
  void abort() noexcept;
  std::string path_, temp_path_;
  int fd_ = -1;
  size_t written_ = 0;
  bool committed_ = false;
};

// Publishes a directory atomically: `fill` writes the contents into a fresh
// temporary directory ("PATH.tmp-<pid>", given to it as argument); every file
// in it and the directory itself are then fsync'ed and it is renamed to PATH.
// An existing PATH is replaced (swapped atomically with renameat2 where the
// file system supports it, else moved aside first). If `fill` throws, the
// temporary directory is removed and the exception propagates.
void publish_directory(const std::string& path,
                       const std::function<void(const std::string& temp_dir)>& fill);

// fsync of a file written by someone else (a library), before it is renamed
// into place.
void fsync_file(const std::string& path);

// fsync of a directory, so that a rename inside it is durable.
void fsync_directory(const std::string& dir);

// Creates `dir` and its parents when missing (rotor::Error on failure).
void ensure_directory(const std::string& dir);

// `s` as a JSON string literal with its quotes: ", \ and control characters
// escaped; other bytes (UTF-8) are copied as they are.
std::string json_quote(std::string_view s);

}  // namespace rotor
