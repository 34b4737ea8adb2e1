// The file rendezvous (docs/distributed.md, "File rendezvous"): the ranks of
// one job meet in DIR/RUN_ID through a FileStore, then share a session store
// that no other job, and no earlier job with the same run id, has written.
//
//   every rank r:  draws a random nonce N_r and publishes arrive-r = N_r
//   rank 0:        first moves a stale DIR/RUN_ID aside (a crashed job's
//                  files), publishes arrive-0, waits for every arrive-r, then
//                  publishes go = its own nonce and every rank's nonce
//   rank r != 0:   waits for a `go` that lists N_r as rank r's nonce (a stale
//                  one cannot: nonces are fresh); republishes arrive-r if the
//                  directory was moved aside under it
//   all:           use the session store DIR/RUN_ID/s-<N_0>, empty at the start
//
// A rank missing past the timeout is a rotor::Error naming it, on rank 0 (it
// knows exactly who is missing) and on the others (from the arrival files).
// Two jobs mix only if they run at the same time with the same run id in the
// same directory: rotor launch draws a fresh id, SLURM jobs use their job and
// step ids.
#pragma once

#include <memory>
#include <string>

#include "parallel/file_store.h"

namespace rotor::parallel {

class Rendezvous {
 public:
  // Blocks until the `world` ranks of run `run_id` arrived in `dir`, or throws
  // a rotor::Error naming the missing ranks after `timeout_s`.
  Rendezvous(const std::string& dir, const std::string& run_id, int rank, int world,
             double timeout_s);
  // Marks this rank done; the last rank of the job to finish removes the
  // run's directory (a crashed job leaves it, and the next one moves it aside).
  ~Rendezvous();
  Rendezvous(const Rendezvous&) = delete;
  Rendezvous& operator=(const Rendezvous&) = delete;

  FileStore& store() { return *session_; }
  int rank() const { return rank_; }
  int world_size() const { return world_; }
  double timeout_seconds() const { return timeout_s_; }
  // "file:DIR (run ID)", for messages.
  const std::string& describe() const { return describe_; }

 private:
  void join_as_root(FileStore& run, const std::string& nonce);
  std::string join_as_peer(FileStore& run, const std::string& nonce);

  std::string dir_, run_dir_, describe_;
  int rank_, world_;
  double timeout_s_;
  std::unique_ptr<FileStore> session_;
};

// Rank `root` publishes `bytes` (an ncclUniqueId, say) under `key` of the
// session store; the others wait for it, up to the rendezvous timeout, and
// fail naming the root when it does not come. Returns the bytes on every rank.
std::string share_bytes(Rendezvous& rendezvous, const std::string& key, int root,
                        const std::string& bytes);

// 16 random hex digits (nonces, run ids), fresh in every process and call.
std::string random_nonce();

}  // namespace rotor::parallel
