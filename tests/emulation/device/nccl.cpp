// The NCCL calls rotor makes (src/parallel/nccl_communicator.cpp), answered
// for ranks that are processes of their own, each with its emulated device
// (tests/emulation/device/README.md). Linked into an executable, these
// definitions take the place of libnccl's.
//
// The ranks meet in a directory that ncclGetUniqueId names inside the id
// (under $TMPDIR, else /tmp), as NCCL's id names rank 0's socket. A
// collective is the n-th of its communicator: each rank writes its send
// buffer to the file n.RANK (written whole, then renamed into place), waits
// until every rank's file n.* is there, and computes its receive buffer from
// them in rank order, so every rank gets the same bits. A rank deletes its
// file of collective n - 2 when it writes n (every rank has read it by then).
// Ranks run the same collectives in the same order, as NCCL asks of them.
// A collective is queued on its stream (runtime.cpp): it runs at once, or
// with ROTOR_EMU_STREAMS=lazy only when something needs it, reading its send
// buffer then. What this checks: the sizes and pointers each collective is
// given (held to the device's allocations when queued and when run), the
// non-blocking start (a communicator made with config.blocking = 0 answers
// ncclInProgress until every rank has joined), the order between the
// collectives' stream and the compute stream (events, waits), and the
// results the ranks compute. Not: speed, or NCCL's own ring and tree orders
// of summation.
//
// A rank that never comes fails the others' calls after
// ROTOR_EMU_NCCL_TIMEOUT seconds (default 300) with ncclRemoteError.
#include <nccl.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "device/device_memory.h"

namespace fs = std::filesystem;

struct ncclComm {
  fs::path dir;
  int nranks = 0, rank = 0;
  int device = 0;       // the rank's device (one GPU per rank)
  uint64_t next = 0;    // the number of the next collective
  bool joined = false;  // every rank's init file seen
  ncclResult_t async = ncclSuccess;
  bool aborted = false;  // by ncclCommAbort: its queued work does nothing
  std::mutex mutex;
};

namespace {

constexpr char kMagic[] = "rotor-emulated-nccl:";

[[noreturn]] void fail(const std::string& what) {
  std::fprintf(stderr, "emulated NCCL: FAILED: %s\n", what.c_str());
  std::fflush(stderr);
  std::abort();
}

double timeout_seconds() {
  const char* env = std::getenv("ROTOR_EMU_NCCL_TIMEOUT");
  return env && *env ? std::atof(env) : 300.0;
}

size_t element_bytes(ncclDataType_t t) {
  if (t == ncclFloat32) return 4;
  fail("datatype " + std::to_string(static_cast<int>(t)) + " is not emulated (ncclFloat32 is)");
}

// Writes bytes to dir/name whole: a rank never sees half a file.
void write_file(const fs::path& dir, const std::string& name, const void* data, size_t bytes) {
  const fs::path tmp = dir / ("." + name + ".tmp"), dst = dir / name;
  FILE* f = std::fopen(tmp.c_str(), "wb");
  if (!f || (bytes && std::fwrite(data, 1, bytes, f) != bytes) || std::fclose(f) != 0)
    fail("cannot write " + tmp.string());
  fs::rename(tmp, dst);
}

std::vector<unsigned char> read_file(const fs::path& p, size_t bytes) {
  std::vector<unsigned char> out(bytes);
  FILE* f = std::fopen(p.c_str(), "rb");
  if (!f) fail("cannot read " + p.string());
  const size_t got = bytes ? std::fread(out.data(), 1, bytes, f) : 0;
  const bool more = std::fgetc(f) != EOF;
  std::fclose(f);
  if (got != bytes || more)
    fail(p.string() + " does not hold " + std::to_string(bytes) +
         " bytes: the ranks disagree on a collective's size");
  return out;
}

bool all_there(const ncclComm& c, const std::string& prefix) {
  for (int r = 0; r < c.nranks; ++r)
    if (!fs::exists(c.dir / (prefix + std::to_string(r)))) return false;
  return true;
}

// Waits until every rank's file prefix.* exists; false after the timeout.
bool wait_all(const ncclComm& c, const std::string& prefix, double limit_s) {
  const auto t0 = std::chrono::steady_clock::now();
  int sleep_us = 50;
  while (!all_there(c, prefix)) {
    if (std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() > limit_s)
      return false;
    std::this_thread::sleep_for(std::chrono::microseconds(sleep_us));
    sleep_us = std::min(sleep_us * 2, 5000);
  }
  return true;
}

// NCCL takes one GPU per rank: when every rank has joined, two of them on one
// device (each rank's init file holds its device) fail the initialization
// with ncclInvalidUsage, as NCCL's "Duplicate GPU detected" does.
ncclResult_t check_one_gpu_each(const ncclComm& c) {
  for (int r = 0; r < c.nranks; ++r) {
    if (r == c.rank) continue;
    int other = -1;
    const auto bytes = read_file(c.dir / ("init." + std::to_string(r)), sizeof other);
    std::memcpy(&other, bytes.data(), sizeof other);
    if (other == c.device) {
      if (std::getenv("NCCL_DEBUG"))
        std::fprintf(stderr,
                     "emulated NCCL WARN Duplicate GPU detected : rank %d and rank %d both on "
                     "CUDA device %d\n",
                     c.rank, r, c.device);
      return ncclInvalidUsage;
    }
  }
  return ncclSuccess;
}

void check_device(const char* call, const void* p, size_t bytes) {
  emu_device::check_range(std::string("emulated NCCL ") + call, p, bytes);
}

// One collective: this rank's `send` bytes out, every rank's (in rank order)
// back to `combine`.
void exchange(ncclComm* c, const char* call, const void* send, size_t bytes,
              const std::function<void(const std::vector<std::vector<unsigned char>>&)>& combine) {
  std::lock_guard<std::mutex> lock(c->mutex);
  if (c->async != ncclSuccess || c->aborted) return;
  const uint64_t n = c->next++;
  std::vector<unsigned char> mine(bytes);
  if (bytes) std::memcpy(mine.data(), send, bytes);
  write_file(c->dir, std::to_string(n) + "." + std::to_string(c->rank), mine.data(), bytes);
  if (n >= 2) {
    std::error_code ec;
    fs::remove(c->dir / (std::to_string(n - 2) + "." + std::to_string(c->rank)), ec);
  }
  if (!wait_all(*c, std::to_string(n) + ".", timeout_seconds())) {
    std::fprintf(stderr, "emulated NCCL: rank %d: %s #%llu: not every rank came within %g s\n",
                 c->rank, call, static_cast<unsigned long long>(n), timeout_seconds());
    c->async = ncclRemoteError;
    return;
  }
  std::vector<std::vector<unsigned char>> all;
  for (int r = 0; r < c->nranks; ++r)
    all.push_back(r == c->rank
                      ? mine
                      : read_file(c->dir / (std::to_string(n) + "." + std::to_string(r)), bytes));
  combine(all);
}

// Queues one collective on its stream (device/runtime.cpp runs it at once,
// or when something needs it). `check` holds its buffers to the device's
// allocations, when queued and again when it runs; the result of the
// exchange is the communicator's asynchronous error, as on a GPU.
ncclResult_t queue(ncclComm* c, const char* call, cudaStream_t stream,
                   const std::function<void()>& check, const void* send, size_t bytes,
                   std::function<void(const std::vector<std::vector<unsigned char>>&)> combine) {
  if (!c) return ncclInvalidArgument;
  {
    std::lock_guard<std::mutex> lock(c->mutex);
    if (c->async != ncclSuccess) return c->async;
    if (!c->joined) fail(std::string(call) + " on a communicator that has not finished starting");
  }
  check();
  emu_device::enqueue(stream, [=] {
    if (c->aborted) return;
    check();
    exchange(c, call, send, bytes, combine);
  });
  return ncclSuccess;
}

const float* floats(const std::vector<unsigned char>& b) {
  return reinterpret_cast<const float*>(b.data());
}

}  // namespace

extern "C" {

const char* ncclGetErrorString(ncclResult_t r) {
  switch (r) {
    case ncclSuccess:
      return "no error";
    case ncclUnhandledCudaError:
      return "unhandled cuda error (emulated NCCL)";
    case ncclSystemError:
      return "unhandled system error (emulated NCCL)";
    case ncclInternalError:
      return "internal error (emulated NCCL)";
    case ncclInvalidArgument:
      return "invalid argument (emulated NCCL)";
    case ncclInvalidUsage:
      return "invalid usage (emulated NCCL)";
    case ncclRemoteError:
      return "remote process exited or there was a network error (emulated NCCL)";
    case ncclInProgress:
      return "NCCL operation in progress (emulated NCCL)";
    default:
      return "unknown result code (emulated NCCL)";
  }
}

ncclResult_t ncclGetUniqueId(ncclUniqueId* id) {
  if (!id) return ncclInvalidArgument;
  const char* tmp = std::getenv("TMPDIR");
  const fs::path base = tmp && *tmp ? fs::path(tmp) : fs::path("/tmp");
  std::random_device rd;
  char token[32];
  std::snprintf(token, sizeof token, "%08x%08x", rd(), rd());
  const std::string text = kMagic + (base / (std::string("rotor-emulated-nccl-") + token)).string();
  if (text.size() >= sizeof id->internal) fail("TMPDIR is too long for an NCCL id: " + text);
  std::memset(id->internal, 0, sizeof id->internal);
  std::memcpy(id->internal, text.data(), text.size());
  return ncclSuccess;
}

ncclResult_t ncclCommInitRankConfig(ncclComm_t* comm, int nranks, ncclUniqueId id, int rank,
                                    ncclConfig_t* config) {
  if (!comm || nranks < 1 || rank < 0 || rank >= nranks) return ncclInvalidArgument;
  const std::string text(id.internal, strnlen(id.internal, sizeof id.internal));
  if (text.rfind(kMagic, 0) != 0) {
    std::fprintf(stderr, "emulated NCCL: rank %d: an id that ncclGetUniqueId did not make\n", rank);
    return ncclInvalidArgument;
  }
  if (config && config->magic != 0xcafebeef)
    fail("ncclCommInitRankConfig: a config not set from NCCL_CONFIG_INITIALIZER");
  auto* c = new ncclComm;
  c->dir = text.substr(sizeof kMagic - 1);
  c->nranks = nranks;
  c->rank = rank;
  std::error_code ec;
  fs::create_directories(c->dir, ec);
  if (ec) fail("cannot make " + c->dir.string() + ": " + ec.message());
  c->device = emu_device::current_device();
  write_file(c->dir, "init." + std::to_string(rank), &c->device, sizeof c->device);
  *comm = c;
  if (config && config->blocking == 0) {
    c->joined = all_there(*c, "init.");
    if (c->joined) c->async = check_one_gpu_each(*c);
    return c->async != ncclSuccess ? c->async : c->joined ? ncclSuccess : ncclInProgress;
  }
  if (!wait_all(*c, "init.", timeout_seconds())) return ncclRemoteError;
  c->joined = true;
  return c->async = check_one_gpu_each(*c);
}

ncclResult_t ncclCommInitRank(ncclComm_t* comm, int nranks, ncclUniqueId id, int rank) {
  return ncclCommInitRankConfig(comm, nranks, id, rank, nullptr);
}

ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t* state) {
  if (!comm || !state) return ncclInvalidArgument;
  std::lock_guard<std::mutex> lock(comm->mutex);
  if (!comm->joined && comm->async == ncclSuccess) {
    comm->joined = all_there(*comm, "init.");
    if (comm->joined) comm->async = check_one_gpu_each(*comm);
  }
  *state = comm->async != ncclSuccess ? comm->async : comm->joined ? ncclSuccess : ncclInProgress;
  return ncclSuccess;
}

// The communicator stays allocated: work queued on a stream may still
// name it (and then does nothing).
ncclResult_t ncclCommAbort(ncclComm_t comm) {
  if (!comm) return ncclInvalidArgument;
  std::lock_guard<std::mutex> lock(comm->mutex);
  comm->aborted = true;
  return ncclSuccess;
}

// Every rank has read the others' last collective once all have written
// bye.*; then each deletes its files, and the last to leave (whoever sees
// every gone.* after writing its own) the directory. The caller has
// synchronized the streams it used (as NCCL asks before destroying).
ncclResult_t ncclCommDestroy(ncclComm_t comm) {
  if (!comm) return ncclInvalidArgument;
  const std::string me = std::to_string(comm->rank);
  write_file(comm->dir, "bye." + me, "", 0);
  if (wait_all(*comm, "bye.", std::min(30.0, timeout_seconds()))) {
    std::error_code ec;
    for (uint64_t n = comm->next >= 2 ? comm->next - 2 : 0; n < comm->next; ++n)
      fs::remove(comm->dir / (std::to_string(n) + "." + me), ec);
    write_file(comm->dir, "gone." + me, "", 0);
    if (all_there(*comm, "gone.")) fs::remove_all(comm->dir, ec);
  }
  delete comm;
  return ncclSuccess;
}

ncclResult_t ncclAllReduce(const void* send, void* recv, size_t count, ncclDataType_t type,
                           ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream) {
  if (op != ncclSum) fail("ncclAllReduce: only ncclSum is emulated");
  const size_t bytes = count * element_bytes(type);
  auto check = [=] {
    check_device("ncclAllReduce's send buffer", send, bytes);
    check_device("ncclAllReduce's receive buffer", recv, bytes);
  };
  return queue(comm, "ncclAllReduce", stream, check, send, bytes, [=](const auto& all) {
    auto* out = static_cast<float*>(recv);
    for (size_t i = 0; i < count; ++i) {
      float s = 0;
      for (const auto& b : all) s += floats(b)[i];
      out[i] = s;
    }
  });
}

ncclResult_t ncclReduceScatter(const void* send, void* recv, size_t count, ncclDataType_t type,
                               ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream) {
  if (op != ncclSum) fail("ncclReduceScatter: only ncclSum is emulated");
  if (!comm) return ncclInvalidArgument;
  const size_t bytes = count * element_bytes(type);
  const int rank = comm->rank, nranks = comm->nranks;
  auto check = [=] {
    check_device("ncclReduceScatter's send buffer", send, bytes * nranks);
    check_device("ncclReduceScatter's receive buffer", recv, bytes);
  };
  return queue(comm, "ncclReduceScatter", stream, check, send, bytes * nranks,
               [=](const auto& all) {
                 auto* out = static_cast<float*>(recv);
                 for (size_t i = 0; i < count; ++i) {
                   float s = 0;
                   for (const auto& b : all) s += floats(b)[rank * count + i];
                   out[i] = s;
                 }
               });
}

ncclResult_t ncclAllGather(const void* send, void* recv, size_t count, ncclDataType_t type,
                           ncclComm_t comm, cudaStream_t stream) {
  if (!comm) return ncclInvalidArgument;
  const size_t bytes = count * element_bytes(type);
  const int nranks = comm->nranks;
  auto check = [=] {
    check_device("ncclAllGather's send buffer", send, bytes);
    check_device("ncclAllGather's receive buffer", recv, bytes * nranks);
  };
  // In place only as NCCL allows it: send is this rank's slot of recv.
  const auto* s = static_cast<const unsigned char*>(send);
  auto* r = static_cast<unsigned char*>(recv);
  if (s + bytes > r && s < r + bytes * nranks && s != r + bytes * comm->rank)
    fail("ncclAllGather: the send buffer overlaps the receive buffer outside this rank's slot");
  return queue(comm, "ncclAllGather", stream, check, send, bytes, [=](const auto& all) {
    for (size_t k = 0; k < all.size(); ++k)
      if (bytes) std::memcpy(r + k * bytes, all[k].data(), bytes);
  });
}

ncclResult_t ncclBroadcast(const void* send, void* recv, size_t count, ncclDataType_t type,
                           int root, ncclComm_t comm, cudaStream_t stream) {
  if (!comm) return ncclInvalidArgument;
  if (root < 0 || root >= comm->nranks) return ncclInvalidArgument;
  const size_t bytes = count * element_bytes(type);
  const bool is_root = comm->rank == root;
  auto check = [=] {
    if (is_root) check_device("ncclBroadcast's send buffer", send, bytes);
    check_device("ncclBroadcast's receive buffer", recv, bytes);
  };
  return queue(comm, "ncclBroadcast", stream, check, is_root ? send : recv, bytes,
               [=](const auto& all) {
                 if (bytes) std::memcpy(recv, all[root].data(), bytes);
               });
}

}  // extern "C"
