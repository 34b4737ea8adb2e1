// Files as rotor writes them: whole-file reads with clear errors, and atomic
// writes (docs/design.md, "Checkpoints and run directories") — data goes to
// "PATH.tmp-<pid>", is fsync'ed, renamed over PATH and the directory is
// fsync'ed, so a crash leaves either the old file or the new one, never a torn
// one. Directories (a checkpoint made of several files) are published the same
// way under a temporary name.
//
// Only regular files and new paths are replaced that way. A symbolic link is
// followed and its target written (atomically, in the target's directory); a
// FIFO or a character device (/dev/null, a terminal) is opened and written
// directly, never replaced; a block device, a socket or a directory is refused.
// Reads of whole files accept regular files only, so that a FIFO or /dev/zero
// named as a config neither blocks nor fills memory.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

namespace rotor {

// No limit on what read_file() takes.
inline constexpr uint64_t kNoSizeLimit = UINT64_MAX;
// Limits for files of a natural size, so that a wrong file is an error that
// states the limit instead of a host out of memory: YAML configs (16 MiB) and
// line-per-example TSV data sets (4 GiB; GLUE's largest is under 100 MB).
inline constexpr uint64_t kMaxConfigBytes = uint64_t{16} << 20;
inline constexpr uint64_t kMaxTsvBytes = uint64_t{4} << 30;

// The whole file as bytes. A missing or unreadable file, a file that is not a
// regular file once links are followed (a FIFO, a device, a directory) or one
// larger than `max_bytes` is a rotor::Error naming the path and the reason
// (and the limit). Opening never blocks.
std::string read_file(const std::string& path, uint64_t max_bytes = kNoSizeLimit);

// "a FIFO", "a character device", ... : the kind of a file that is not a regular
// file, for messages (st_mode as stat() gives it).
const char* file_kind(unsigned st_mode);

// Writes a file atomically: either the old contents or all of `bytes` survive
// a crash. The parent directory must exist. Throws rotor::Error on failure and
// then leaves no temporary file behind (and the old file untouched). A FIFO or
// a character device at `path` is written directly (see above).
void atomic_write_file(const std::string& path, std::string_view bytes);

// Puts the finished file `temp` (written and fsync'ed by a library, in the
// directory of `path`) in place of `path` as AtomicFileWriter::commit would:
// renamed over a regular file or new path (a link's target), else copied into
// the FIFO or device and removed.
void move_into_place(const std::string& temp, const std::string& path);

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
  // fsync, rename into place, fsync the directory (for a FIFO or a device:
  // close it and report any error).
  void commit();

  const std::string& path() const { return path_; }
  // The temporary file; empty when `path` is a FIFO or a device written directly.
  const std::string& temp_path() const { return temp_path_; }
  // Whether the data goes straight into a FIFO or a character device.
  bool direct() const { return temp_path_.empty(); }

 private:
  void abort() noexcept;
  std::string path_, target_, temp_path_;
  int fd_ = -1;
  size_t written_ = 0;
  bool committed_ = false;
};

// Publishes a directory atomically: `fill` writes the contents into a fresh
// temporary directory ("PATH.tmp-<pid>", given to it as argument); every file
// in it and the directory itself are then fsync'ed and it is renamed to PATH.
// An existing PATH is replaced (swapped atomically with renameat2 where the
// file system supports it, else moved aside first); a PATH that is a symbolic
// link keeps its link, and the directory it points to is replaced. If `fill` throws, the
// temporary directory is removed and the exception propagates.
void publish_directory(const std::string& path,
                       const std::function<void(const std::string& temp_dir)>& fill);

// A directory that one command writes as a whole (an export, prepared EHR
// data): publish_directory, with what a writer of someone else's directory
// needs besides.
//   - An existing PATH is locked while it is written (core/dir_lock.h): a
//     second writer, or a run training there, fails at once naming the holder.
//   - It may hold only entries `owns` accepts (the files such a command
//     writes): anything else (a run, the user's own files) is refused before
//     any work, since the new directory replaces the old one whole.
//   - A file of the old directory that is a symbolic link stays a link: the new
//     file's contents are written through it (core/io.h's rule for links).
//   - Temporaries of killed writers beside PATH (PATH.tmp-<pid>, PATH.old-<pid>)
//     are removed first.
struct DirectoryWriter {
  std::string command;                                // "export", ...: the messages' prefix
  std::function<bool(const std::string& name)> owns;  // entries of an old PATH it may replace
};
void write_directory(const std::string& path, const DirectoryWriter& writer,
                     const std::function<void(const std::string& temp_dir)>& fill);

// Removes what writers killed mid-write left in DIR: entries
// "NAME.tmp-<pid>..." (an atomic write, a directory being published, a
// binarized corpus, a SentencePiece model being trained) and "NAME.old-<pid>"
// (a directory moved aside) whose process is gone; with `name`, only those
// of NAME. Regular files, and directories unless `files_only`.
void remove_stale_temporaries_in(const std::string& dir, const std::string& name = "",
                                 bool files_only = false);

// fsync of a file written by someone else (a library), before it is renamed
// into place.
void fsync_file(const std::string& path);

// fsync of a directory, so that a rename inside it is durable.
void fsync_directory(const std::string& dir);

// Creates `dir` and its parents when missing (rotor::Error on failure).
void ensure_directory(const std::string& dir);

// True when `path` is `dir` or lies inside it, both made absolute with their
// links resolved (as far as they exist).
bool path_inside(const std::string& path, const std::string& dir);

// `s` as a JSON string literal with its quotes: ", \ and control characters
// escaped; other bytes (UTF-8) are copied as they are.
std::string json_quote(std::string_view s);

}  // namespace rotor
