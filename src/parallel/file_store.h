// A key-value store in a directory that every rank reaches: a shared file
// system across nodes (NFS, Lustre, GPFS), any directory on one node. One file
// per key, written under a temporary name and renamed into place, so a reader
// sees a key whole or not at all; rename() is atomic on every POSIX file
// system, including NFS, whose servers perform it. Readers poll (1 ms, backing
// off to 100 ms). It holds rendezvous metadata only (addresses, ids, flags):
// a few small keys per rank.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace rotor::parallel {

class FileStore {
 public:
  // Creates `dir` (and its parents) when missing.
  explicit FileStore(std::string dir);

  const std::string& dir() const { return dir_; }

  // Creates or replaces `key`. Keys are any non-empty strings (escaped into
  // file names). Recreates the directory when it vanished underneath (another
  // process moved a stale one away).
  void set(const std::string& key, const std::string& value);
  // The value, or nullopt when the key does not exist (yet).
  std::optional<std::string> get(const std::string& key) const;
  // Waits until every key exists or `timeout_s` has passed; returns the keys
  // still missing (empty: all there).
  std::vector<std::string> wait(const std::vector<std::string>& keys, double timeout_s) const;
  // get, waiting up to `timeout_s`; nullopt when it did not appear.
  std::optional<std::string> get_wait(const std::string& key, double timeout_s) const;
  bool remove(const std::string& key);

  // The file that holds `key` (for tests and messages).
  std::string path_of(const std::string& key) const;

 private:
  std::string dir_;
};

// Sleeps the next step of a polling loop: 1 ms, doubling up to 100 ms.
class PollBackoff {
 public:
  void sleep();

 private:
  int micros_ = 1000;
};

}  // namespace rotor::parallel
