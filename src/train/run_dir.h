// A run directory belongs to one run (docs/design.md, Checkpoints and run
// directories):
//
//   - the run holds a lock on OUTPUT_DIR/.rotor.lock (flock: the kernel
//     releases it when the process dies, so a lock is never stale); its
//     holder's pid, host and start time are written in it, and a second
//     writer fails at once with a line that names them;
//   - a directory that already holds a run (checkpoints, checkpoint_last or
//     metrics.jsonl) is continued only with --resume; --overwrite starts
//     afresh after moving the earlier run's files into
//     OUTPUT_DIR/previous-<date>-<time>/ (and says so); without either it is an
//     error that changes nothing;
//   - what interrupted writers left behind (temporary files and directories
//     of checkpoints, of prepared data, of a tokenizer being trained) is
//     removed.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/dir_lock.h"

namespace rotor::train {

enum class RunStart { Fresh, Resume, Overwrite };

class RunDirectory {
 public:
  // Creates OUTPUT_DIR when missing, takes its lock and applies the rules
  // above. Throws rotor::Error, leaving the directory as it found it: also
  // when --overwrite would move one of `inputs` (config key, path: the
  // checkpoint model.init_from names, say) aside with the earlier run.
  RunDirectory(const std::string& output_dir, RunStart start,
               const std::vector<std::pair<std::string, std::string>>& inputs = {});
  ~RunDirectory();  // releases the lock (core/dir_lock.h)
  RunDirectory(const RunDirectory&) = delete;
  RunDirectory& operator=(const RunDirectory&) = delete;

  // Where --overwrite moved the earlier run ("" when nothing was moved).
  const std::string& moved_to() const { return moved_to_; }

 private:
  std::unique_ptr<DirectoryLock> lock_;
  std::string moved_to_;
};

// Whether OUTPUT_DIR holds an earlier run (checkpoints, checkpoint_last or
// metrics.jsonl), and a description of it for messages.
bool holds_run(const std::string& output_dir, std::string* what = nullptr);

// Whether PATH (a file or directory to write, existing or not; links are
// followed) belongs to training, as a clause for messages: "lies in the
// checkpoint DIR" inside a checkpoint directory (one holding
// model.safetensors and config.yaml, which a run replaces or prunes whole),
// "is part of the run in DIR (its NAME)" when it is, or lies inside, one of
// a run directory's own files (config.yaml, metrics.jsonl, train.log,
// checkpoint_last, checkpoints/, data/, tensorboard/, its tokenizer, its
// lock), and "" when neither. PATH itself may be a checkpoint directory
// only when `may_be_checkpoint` (`rotor average` replaces an earlier
// average); a run directory itself owns nothing of PATH's.
std::string owner_of_path(const std::string& path, bool may_be_checkpoint = false);

}  // namespace rotor::train
