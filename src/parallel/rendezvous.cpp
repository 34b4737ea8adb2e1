#include "parallel/rendezvous.h"

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <random>
#include <sstream>
#include <vector>

#include "core/error.h"

namespace fs = std::filesystem;

namespace rotor::parallel {

namespace {

using Clock = std::chrono::steady_clock;

Clock::time_point deadline_after(double seconds) {
  return Clock::now() +
         std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
}

std::string arrive_key(int r) {
  return "arrive-" + std::to_string(r);
}

std::string rank_list(const std::vector<int>& ranks) {
  std::string s;
  for (size_t i = 0; i < ranks.size(); ++i) s += (i ? ", " : "") + std::to_string(ranks[i]);
  return s;
}

// Moves `path` aside under a unique name and deletes it. Renaming first makes
// the removal atomic for every other process: they see the old directory or
// none, never a half-deleted one.
void discard_directory(const std::string& path, const std::string& parent, const std::string& tag) {
  const std::string aside = parent + "/.discard-" + tag;
  std::error_code ec;
  fs::rename(path, aside, ec);
  if (!ec) fs::remove_all(aside, ec);
}

}  // namespace

std::string random_nonce() {
  thread_local std::mt19937_64 rng{
      std::random_device{}() ^ (static_cast<uint64_t>(::getpid()) << 32) ^
      static_cast<uint64_t>(std::chrono::high_resolution_clock::now().time_since_epoch().count())};
  char buf[17];
  std::snprintf(buf, sizeof(buf), "%016llx", static_cast<unsigned long long>(rng()));
  return buf;
}

Rendezvous::Rendezvous(const std::string& dir, const std::string& run_id, int rank, int world,
                       double timeout_s)
    : dir_(dir), run_dir_(dir + "/" + run_id), rank_(rank), world_(world), timeout_s_(timeout_s) {
  ROTOR_CHECK(world >= 1 && rank >= 0 && rank < world, "rank {} of world {}", rank, world);
  ROTOR_CHECK(!run_id.empty() && run_id.find('/') == std::string::npos, "run id '{}'", run_id);
  describe_ = "file:" + dir + " (run " + run_id + ")";
  const std::string nonce = random_nonce();
  std::string session;
  if (rank == 0) {
    // Whatever DIR/RUN_ID holds now is a stale job's: ours has not begun.
    std::error_code ec;
    if (fs::exists(run_dir_, ec)) discard_directory(run_dir_, dir_, run_id + "-" + nonce);
    FileStore run(run_dir_);
    join_as_root(run, nonce);
    session = nonce;
  } else {
    FileStore run(run_dir_);
    session = join_as_peer(run, nonce);
  }
  session_ = std::make_unique<FileStore>(run_dir_ + "/s-" + session);
}

void Rendezvous::join_as_root(FileStore& run, const std::string& nonce) {
  run.set(arrive_key(0), nonce);
  std::vector<std::string> nonces(static_cast<size_t>(world_));
  nonces[0] = nonce;
  std::vector<int> missing;
  for (int r = 1; r < world_; ++r) missing.push_back(r);
  const auto deadline = deadline_after(timeout_s_);
  PollBackoff backoff;
  while (!missing.empty()) {
    std::vector<int> still;
    for (int r : missing) {
      auto v = run.get(arrive_key(r));
      if (v && !v->empty())
        nonces[static_cast<size_t>(r)] = *v;
      else
        still.push_back(r);
    }
    missing.swap(still);
    if (missing.empty()) break;
    if (Clock::now() >= deadline)
      ROTOR_FAIL("rendezvous {}: rank(s) {} of {} did not arrive within {:.0f} s", describe_,
                 rank_list(missing), world_, timeout_s_);
    backoff.sleep();
  }
  std::string go = nonce + "\n";
  for (int r = 0; r < world_; ++r) go += (r ? " " : "") + nonces[static_cast<size_t>(r)];
  run.set("go", go);
}

std::string Rendezvous::join_as_peer(FileStore& run, const std::string& nonce) {
  const std::string mine = arrive_key(rank_);
  run.set(mine, nonce);
  const auto deadline = deadline_after(timeout_s_);
  PollBackoff backoff;
  for (;;) {
    if (auto go = run.get("go")) {
      // "SESSION\nN_0 N_1 ...": ours only if it lists our nonce as our rank's.
      std::istringstream in(*go);
      std::string session, token;
      std::getline(in, session);
      for (int r = 0; in >> token; ++r)
        if (r == rank_ && token == nonce && !session.empty()) return session;
    }
    // Rank 0 moved a stale directory aside, ours inside it: arrive again.
    auto v = run.get(mine);
    if (!v || *v != nonce) run.set(mine, nonce);
    if (Clock::now() >= deadline) break;
    backoff.sleep();
  }
  std::vector<int> missing;
  for (int r = 0; r < world_; ++r)
    if (!run.get(arrive_key(r))) missing.push_back(r);
  if (missing.empty())
    ROTOR_FAIL(
        "rendezvous {}: every rank arrived but rank 0 did not open the session within "
        "{:.0f} s (is another job using run id and directory?)",
        describe_, timeout_s_);
  ROTOR_FAIL("rendezvous {}: rank(s) {} of {} did not arrive within {:.0f} s", describe_,
             rank_list(missing), world_, timeout_s_);
}

Rendezvous::~Rendezvous() {
  if (!session_) return;
  try {
    session_->set("done-" + std::to_string(rank_), "");
    std::vector<std::string> keys;
    for (int r = 0; r < world_; ++r) keys.push_back("done-" + std::to_string(r));
    if (session_->wait(keys, 0.0).empty())
      discard_directory(run_dir_, dir_,
                        fs::path(run_dir_).filename().string() + "-" + random_nonce());
  } catch (...) {
    // Best effort: a leftover directory is moved aside by the next job.
  }
}

std::string share_bytes(Rendezvous& rendezvous, const std::string& key, int root,
                        const std::string& bytes) {
  if (rendezvous.rank() == root) {
    rendezvous.store().set(key, bytes);
    return bytes;
  }
  auto v = rendezvous.store().get_wait(key, rendezvous.timeout_seconds());
  if (!v)
    ROTOR_FAIL("rendezvous {}: rank {} did not publish {} within {:.0f} s", rendezvous.describe(),
               root, key, rendezvous.timeout_seconds());
  return *v;
}

}  // namespace rotor::parallel
