#include "parallel/mpi_communicator.h"

#if ROTOR_WITH_MPI

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstdlib>
#include <thread>

namespace rotor::parallel {

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

void finalize_at_exit() {
  if (mpi_running()) MPI_Finalize();
}

constexpr int kTagPing = 7301, kTagPong = 7302;
constexpr int64_t kMaxCount = INT_MAX;

int to_count(int64_t n, const char* what) {
  ROTOR_CHECK(n >= 0 && n <= kMaxCount, "{}: {} elements exceed one MPI call", what, n);
  return static_cast<int>(n);
}

void check_cpu_f32(const Tensor& t, const char* what) {
  if (!t.defined()) ROTOR_FAIL("{}: undefined tensor", what);
  if (!t.is_cpu()) ROTOR_FAIL("{}: the MPI backend takes CPU tensors, got {}", what, t.str());
  if (t.dtype() != DType::F32) ROTOR_FAIL("{}: f32 tensors expected, got {}", what, t.str());
}

MPI_Op mpi_op(ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum:
      return MPI_SUM;
    case ReduceOp::Max:
      return MPI_MAX;
    case ReduceOp::Min:
      return MPI_MIN;
  }
  return MPI_SUM;
}

std::string mpi_error_string(int code) {
  char buf[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(code, buf, &len);
  return std::string(buf, static_cast<size_t>(std::max(len, 0)));
}

std::string rank_list(const std::vector<int>& ranks) {
  std::string s;
  for (size_t i = 0; i < ranks.size(); ++i) s += (i ? ", " : "") + std::to_string(ranks[i]);
  return s;
}

// An in-flight non-blocking collective of an MpiCommunicator.
class MpiWork final : public Work {
 public:
  MpiWork(MpiCommunicator* comm, std::vector<MPI_Request> reqs, const char* what, uint64_t seq,
          Tensor keep)
      : comm_(comm), reqs_(std::move(reqs)), what_(what), seq_(seq), keep_(std::move(keep)) {}
  ~MpiWork() override { MpiWork::wait(); }
  void wait() override {
    if (!finished_) comm_->wait_all(reqs_, what_, seq_);
    finished_ = true;
  }
  bool done() override {
    if (!finished_) finished_ = comm_->test_all(reqs_, what_, seq_);
    return finished_;
  }

 private:
  MpiCommunicator* comm_;
  std::vector<MPI_Request> reqs_;
  const char* what_;
  uint64_t seq_;
  Tensor keep_;  // holds the buffer alive until completion
  bool finished_ = false;
};

}  // namespace

bool mpi_running() {
  int init = 0, fin = 0;
  MPI_Initialized(&init);
  MPI_Finalized(&fin);
  return init && !fin;
}

void ensure_mpi_initialized() {
  int init = 0;
  MPI_Initialized(&init);
  if (!init) {
    int provided = 0;
    const int rc = MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided);
    if (rc != MPI_SUCCESS) ROTOR_FAIL("MPI_Init_thread failed: {}", mpi_error_string(rc));
    std::atexit(finalize_at_exit);
  }
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
}

MpiCommunicator::MpiCommunicator(MPI_Comm comm, double timeout_s, int local_rank) {
  ensure_mpi_initialized();
  timeout_s_ = timeout_s > 0 ? timeout_s : default_timeout_seconds();
  if (MPI_Comm_dup(comm, &comm_) != MPI_SUCCESS || MPI_Comm_dup(comm, &hb_comm_) != MPI_SUCCESS)
    ROTOR_FAIL("MPI_Comm_dup failed");
  MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN);
  MPI_Comm_set_errhandler(hb_comm_, MPI_ERRORS_RETURN);
  MPI_Comm_rank(comm_, &rank_);
  MPI_Comm_size(comm_, &size_);
  if (local_rank >= 0) {
    local_rank_ = local_rank;
  } else {
    MPI_Comm node;
    MPI_Comm_split_type(comm_, MPI_COMM_TYPE_SHARED, rank_, MPI_INFO_NULL, &node);
    MPI_Comm_rank(node, &local_rank_);
    MPI_Comm_free(&node);
  }
}

MpiCommunicator::~MpiCommunicator() {
  if (!mpi_running()) return;
  // Pings that arrived after their sender gave up are dropped here.
  int flag = 1;
  while (flag) {
    MPI_Status st;
    MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, hb_comm_, &flag, &st);
    if (flag) {
      int64_t buf[2];
      MPI_Recv(buf, 2, MPI_INT64_T, st.MPI_SOURCE, st.MPI_TAG, hb_comm_, MPI_STATUS_IGNORE);
    }
  }
  MPI_Comm_free(&hb_comm_);
  MPI_Comm_free(&comm_);
}

void MpiCommunicator::serve_pings() {
  for (;;) {
    int flag = 0;
    MPI_Status st;
    if (MPI_Iprobe(MPI_ANY_SOURCE, kTagPing, hb_comm_, &flag, &st) != MPI_SUCCESS || !flag) return;
    int64_t ping = 0;
    MPI_Recv(&ping, 1, MPI_INT64_T, st.MPI_SOURCE, kTagPing, hb_comm_, MPI_STATUS_IGNORE);
    int64_t pong[2] = {static_cast<int64_t>(waiting_seq_), static_cast<int64_t>(seq_)};
    MPI_Request req;
    MPI_Isend(pong, 2, MPI_INT64_T, st.MPI_SOURCE, kTagPong, hb_comm_, &req);
    MPI_Request_free(&req);  // 16 bytes: sent eagerly; the buffer is copied
  }
}

bool MpiCommunicator::test_all(std::vector<MPI_Request>& requests, const char* what, uint64_t seq) {
  int flag = 0;
  const int rc =
      MPI_Testall(static_cast<int>(requests.size()), requests.data(), &flag, MPI_STATUSES_IGNORE);
  if (rc != MPI_SUCCESS) report_error(what, seq, rc);
  return flag != 0;
}

void MpiCommunicator::wait_all(std::vector<MPI_Request>& requests, const char* what, uint64_t seq) {
  wait_until([&] { return test_all(requests, what, seq); }, what, seq);
}

void MpiCommunicator::wait_until(const std::function<bool()>& test, const char* what, uint64_t seq,
                                 const std::function<void()>& on_timeout) {
  const auto t0 = Clock::now();
  const uint64_t outer = waiting_seq_;
  waiting_seq_ = seq;
  auto last_ping = t0;
  int spins = 0;
  while (!test()) {
    const auto now = Clock::now();
    if (now - last_ping > std::chrono::milliseconds(20)) {
      serve_pings();
      last_ping = now;
      const double waited = seconds_since(t0);
      if (waited > timeout_s_) {
        if (on_timeout) on_timeout();
        report_timeout(what, seq, waited);
      }
    }
    // Spin briefly (latency), then back off (ranks may share cores).
    if (++spins < 200)
      std::this_thread::yield();
    else
      std::this_thread::sleep_for(std::chrono::microseconds(spins < 2000 ? 20 : 200));
  }
  waiting_seq_ = outer;
}

void MpiCommunicator::report_error(const char* what, uint64_t seq, int code) {
  fatal(rank_, fmt::format("collective {} #{} failed: {} (a rank died or the network failed)", what,
                           seq, mpi_error_string(code)));
}

void MpiCommunicator::report_timeout(const char* what, uint64_t seq, double waited) {
  // Ping every other rank; ranks that wait in a collective answer with its
  // number. Dead ranks and ranks hung outside MPI stay silent.
  const double grace = std::clamp(0.2 * timeout_s_, 0.5, 5.0);
  std::vector<MPI_Request> sends(static_cast<size_t>(size_), MPI_REQUEST_NULL);
  std::vector<MPI_Request> recvs(static_cast<size_t>(size_), MPI_REQUEST_NULL);
  std::vector<int64_t> pongs(2 * static_cast<size_t>(size_), -1);
  const int64_t ping = static_cast<int64_t>(seq);
  for (int r = 0; r < size_; ++r) {
    if (r == rank_) continue;
    MPI_Irecv(&pongs[2 * r], 2, MPI_INT64_T, r, kTagPong, hb_comm_, &recvs[r]);
    MPI_Isend(&ping, 1, MPI_INT64_T, r, kTagPing, hb_comm_, &sends[r]);
  }
  std::vector<bool> answered(static_cast<size_t>(size_), false);
  answered[rank_] = true;
  const auto t0 = Clock::now();
  while (seconds_since(t0) < grace) {
    serve_pings();
    bool all = true;
    for (int r = 0; r < size_; ++r) {
      if (answered[r]) continue;
      int flag = 0;
      if (MPI_Test(&recvs[r], &flag, MPI_STATUS_IGNORE) == MPI_SUCCESS && flag)
        answered[r] = true;
      else
        all = false;
    }
    if (all) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  std::vector<int> silent, behind;
  for (int r = 0; r < size_; ++r) {
    if (!answered[r])
      silent.push_back(r);
    else if (r != rank_ && pongs[2 * r + 1] < static_cast<int64_t>(seq))
      behind.push_back(r);
  }
  std::string who;
  if (!silent.empty()) who = fmt::format("rank(s) {} did not answer", rank_list(silent));
  if (!behind.empty())
    who += fmt::format("{}rank(s) {} did not reach it", who.empty() ? "" : "; ", rank_list(behind));
  if (who.empty()) who = "every rank answered: mismatched collectives or a stuck network";
  fatal(rank_,
        fmt::format("collective {} #{} timed out after {:.0f} s ({})", what, seq, waited, who));
}

void MpiCommunicator::abort(const std::string& message, int code) {
  fatal(rank_, message, code);
}

void MpiCommunicator::all_reduce_sum(Tensor& t) {
  all_reduce_async(t).wait();
}

Handle MpiCommunicator::all_reduce_async(Tensor t) {
  check_cpu_f32(t, "all_reduce");
  const uint64_t seq = next_seq();
  std::vector<MPI_Request> reqs;
  float* p = t.data<float>();
  for (int64_t off = 0; off < t.numel() || reqs.empty(); off += kMaxCount) {
    const int n = static_cast<int>(std::min<int64_t>(kMaxCount, t.numel() - off));
    MPI_Request r;
    const int rc = MPI_Iallreduce(MPI_IN_PLACE, p + off, n, MPI_FLOAT, MPI_SUM, comm_, &r);
    if (rc != MPI_SUCCESS) report_error("all_reduce", seq, rc);
    reqs.push_back(r);
    if (t.numel() == 0) break;
  }
  return Handle(std::make_unique<MpiWork>(this, std::move(reqs), "all_reduce", seq, std::move(t)));
}

void MpiCommunicator::reduce_scatter_sum(const Tensor& in, Tensor& out_shard) {
  check_cpu_f32(in, "reduce_scatter");
  check_cpu_f32(out_shard, "reduce_scatter");
  if (in.numel() != out_shard.numel() * size_)
    ROTOR_FAIL("reduce_scatter: input of {} elements is not world size {} x shard of {}",
               in.numel(), size_, out_shard.numel());
  const uint64_t seq = next_seq();
  std::vector<MPI_Request> reqs(1);
  const int rc = MPI_Ireduce_scatter_block(in.data<float>(), out_shard.data<float>(),
                                           to_count(out_shard.numel(), "reduce_scatter"), MPI_FLOAT,
                                           MPI_SUM, comm_, &reqs[0]);
  if (rc != MPI_SUCCESS) report_error("reduce_scatter", seq, rc);
  wait_all(reqs, "reduce_scatter", seq);
}

void MpiCommunicator::all_gather(const Tensor& shard, Tensor& out) {
  check_cpu_f32(shard, "all_gather");
  check_cpu_f32(out, "all_gather");
  const int64_t s = shard.numel();
  if (out.numel() != s * size_)
    ROTOR_FAIL("all_gather: output of {} elements is not world size {} x shard of {}", out.numel(),
               size_, s);
  const uint64_t seq = next_seq();
  const bool in_place = shard.data<float>() == out.data<float>() + rank_ * s;
  std::vector<MPI_Request> reqs(1);
  const int n = to_count(s, "all_gather");
  const int rc = MPI_Iallgather(in_place ? MPI_IN_PLACE : shard.data<float>(), n, MPI_FLOAT,
                                out.data<float>(), n, MPI_FLOAT, comm_, &reqs[0]);
  if (rc != MPI_SUCCESS) report_error("all_gather", seq, rc);
  wait_all(reqs, "all_gather", seq);
}

void MpiCommunicator::broadcast(Tensor& t, int root) {
  check_cpu_f32(t, "broadcast");
  ROTOR_CHECK(root >= 0 && root < size_, "broadcast root {} of world {}", root, size_);
  const uint64_t seq = next_seq();
  std::vector<MPI_Request> reqs(1);
  const int rc = MPI_Ibcast(t.data<float>(), to_count(t.numel(), "broadcast"), MPI_FLOAT, root,
                            comm_, &reqs[0]);
  if (rc != MPI_SUCCESS) report_error("broadcast", seq, rc);
  wait_all(reqs, "broadcast", seq);
}

void MpiCommunicator::barrier() {
  const uint64_t seq = next_seq();
  std::vector<MPI_Request> reqs(1);
  const int rc = MPI_Ibarrier(comm_, &reqs[0]);
  if (rc != MPI_SUCCESS) report_error("barrier", seq, rc);
  wait_all(reqs, "barrier", seq);
}

void MpiCommunicator::all_reduce_host(std::vector<double>& values, ReduceOp op) {
  const uint64_t seq = next_seq();
  std::vector<MPI_Request> reqs(1);
  const int rc = MPI_Iallreduce(MPI_IN_PLACE, values.data(),
                                to_count(static_cast<int64_t>(values.size()), "all_reduce_host"),
                                MPI_DOUBLE, mpi_op(op), comm_, &reqs[0]);
  if (rc != MPI_SUCCESS) report_error("all_reduce_host", seq, rc);
  wait_all(reqs, "all_reduce_host", seq);
}

void MpiCommunicator::broadcast_bytes(std::vector<uint8_t>& bytes, int root) {
  int64_t n = static_cast<int64_t>(bytes.size());
  {
    const uint64_t seq = next_seq();
    std::vector<MPI_Request> reqs(1);
    const int rc = MPI_Ibcast(&n, 1, MPI_INT64_T, root, comm_, &reqs[0]);
    if (rc != MPI_SUCCESS) report_error("broadcast_bytes", seq, rc);
    wait_all(reqs, "broadcast_bytes", seq);
  }
  bytes.resize(static_cast<size_t>(n));
  if (n == 0) return;
  const uint64_t seq = next_seq();
  std::vector<MPI_Request> reqs(1);
  const int rc =
      MPI_Ibcast(bytes.data(), to_count(n, "broadcast_bytes"), MPI_BYTE, root, comm_, &reqs[0]);
  if (rc != MPI_SUCCESS) report_error("broadcast_bytes", seq, rc);
  wait_all(reqs, "broadcast_bytes", seq);
}

std::unique_ptr<MpiCommunicator> MpiCommunicator::split(int color, int key) {
  MPI_Comm sub = MPI_COMM_NULL;
  // Collective over comm_, but short: guarded by a barrier with the deadline.
  barrier();
  if (MPI_Comm_split(comm_, color < 0 ? MPI_UNDEFINED : color, key, &sub) != MPI_SUCCESS)
    ROTOR_FAIL("MPI_Comm_split failed");
  if (sub == MPI_COMM_NULL) return nullptr;
  auto c = std::make_unique<MpiCommunicator>(sub, timeout_s_, -1);
  MPI_Comm_free(&sub);
  return c;
}

}  // namespace rotor::parallel

#endif  // ROTOR_WITH_MPI
