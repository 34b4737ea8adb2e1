// A CUDA thread block run on the CPU, for the emulators of the kernels
// (flash_tc_emulate.cpp, flash_sm70_emulate.cpp, kernel_emulation.h): every
// CUDA thread of a block is a fiber (a ucontext with its own stack, all on
// the calling OS thread), run in turn until it waits at a barrier or ends;
// __syncthreads and __syncwarp are barriers that hand the OS thread to the
// next fiber until the last one arrives, and a barrier that no pass of the
// block's fibers can complete (some thread never reaches it) fails the run
// instead of hanging. Built with a sanitizer (or -DROTOR_EMU_OS_THREADS) a
// CUDA thread is a std::thread instead (a pool's, reused by the next block of
// the same size) and a barrier a std::barrier, so that ThreadSanitizer sees
// an access to shared memory that no barrier orders. A warp-collective call
// (a shuffle, or an emulated ldmatrix / mma.sync) posts each lane's part into
// its warp's exchange slot, waits for the warp and checks that all 32 lanes
// made the same call; atomicAdd is an atomic_ref. Dynamic shared memory is a
// heap block of exactly the launcher's size, filled with NaNs for every
// thread block (a read of anything not written shows, and AddressSanitizer
// sees an overrun). Kernels without barriers can run their threads one
// after the other (run_serial).
//
// Include after the CUDA headers (cuda_runtime.h for uint3) and before the
// kernel code: it defines threadIdx, blockIdx, blockDim and gridDim, and
// empties __device__, __global__, __forceinline__ and __launch_bounds__.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <barrier>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <new>
#include <thread>
#include <type_traits>
#include <vector>

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define ROTOR_EMU_OS_THREADS 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define ROTOR_EMU_OS_THREADS 1
#endif
#endif
#ifndef ROTOR_EMU_OS_THREADS
#include <sys/mman.h>
#if !defined(__x86_64__)
#include <ucontext.h>
#endif
#endif

namespace emu {

[[noreturn]] inline void fail(const char* what) {
  std::fprintf(stderr, "emulation: FAILED: %s\n", what);
  std::fflush(stderr);
  std::abort();
}

// One warp-collective call: what each lane posts.
struct Slot {
  int kind[32];
  uint32_t addr[32];
  uint32_t a[32][4];
  uint32_t b[32][2];
  double x[32];
};

#ifndef ROTOR_EMU_OS_THREADS
// The fibers that play a block's CUDA threads (run_block). yield() hands the
// OS thread back to the block's loop, which resumes the next fiber.
inline void yield();
// Counts barrier phases completed and fibers ended: a pass of the loop over
// the block's waiting fibers that leaves it unchanged is a deadlock.
inline thread_local uint64_t t_progress = 0;
#endif

// __syncthreads' and __syncwarp's barrier over `count` CUDA threads.
class Barrier {
 public:
  explicit Barrier(int count) : count_(count) {}
  void arrive_and_wait() {
#ifdef ROTOR_EMU_OS_THREADS
    barrier_.arrive_and_wait();
#else
    const uint64_t phase = phase_;
    if (++arrived_ == count_) {
      arrived_ = 0;
      ++phase_;
      ++t_progress;
      return;
    }
    while (phase_ == phase) yield();
#endif
  }

 private:
  int count_;
#ifdef ROTOR_EMU_OS_THREADS
  std::barrier<> barrier_{count_};
#else
  int arrived_ = 0;
  uint64_t phase_ = 0;
#endif
};

struct Block {
  std::unique_ptr<Barrier> all;
  std::atomic<int> vote{0};  // __syncthreads_or's
  std::vector<std::unique_ptr<Barrier>> warps;
  // Two slots per warp, used in turn: a lane writes slot s of call n + 2 only
  // after every lane has reached the barrier of call n + 1, so after all have
  // read slot s of call n.
  std::vector<Slot> slots;
  unsigned char* smem = nullptr;
  size_t smem_bytes = 0;
};

inline thread_local uint3 t_thread, t_block, t_dim, t_grid;
inline thread_local int t_linear = 0;  // x + y dim.x + z dim.x dim.y: warps and lanes follow it
inline thread_local Block* t_blk = nullptr;  // null: a kernel run serially (no barriers)
inline thread_local unsigned t_calls = 0;    // warp-collective calls of this thread

// cp.async copies of this thread: issued, and committed groups (only the
// sm_80+ emulator issues any; a thread that exits with some is an error).
struct Copy {
  uint32_t dst;
  const void* src;
  bool valid;
};
inline thread_local std::vector<Copy> t_issued;
inline thread_local std::deque<std::vector<Copy>> t_groups;

inline unsigned char* shared_memory() {
  if (!t_blk) fail("shared memory in a kernel run serially");
  return t_blk->smem;
}
inline int lane() {
  return t_linear & 31;
}
inline int warp() {
  return t_linear >> 5;
}

inline void warp_barrier() {
  if (!t_blk) fail("__syncwarp in a kernel run serially");
  t_blk->warps[static_cast<size_t>(warp())]->arrive_and_wait();
}

// Posts this lane's part of a collective call, waits for the warp and returns
// the slot holding every lane's part.
template <class Post>
const Slot& collective(int kind, Post post) {
  if (!t_blk) fail("a warp-collective call in a kernel run serially");
  Slot& s = t_blk->slots[static_cast<size_t>(warp() * 2 + (t_calls++ & 1))];
  s.kind[lane()] = kind;
  post(s);
  warp_barrier();
  for (int l = 0; l < 32; ++l)
    if (s.kind[l] != kind) fail("the lanes of a warp made different collective calls");
  return s;
}

#ifdef ROTOR_EMU_OS_THREADS
// The OS threads that play a block's CUDA threads, kept from one block to
// the next: starting a thread per CUDA thread per block (clone, a stack)
// cost more than the emulated kernels' work. `threads` workers wait at
// `start`; run() hands them a job (worker t plays CUDA thread t) and
// returns when every worker has finished it. Each pool lives until the
// program exits.
class BlockPool {
 public:
  explicit BlockPool(int threads) : start_(threads + 1), done_(threads + 1) {
    for (int t = 0; t < threads; ++t) workers_.emplace_back([this, t] { work(t); });
  }
  ~BlockPool() {
    quit_ = true;
    start_.arrive_and_wait();
    for (auto& w : workers_) w.join();
  }
  BlockPool(const BlockPool&) = delete;
  BlockPool& operator=(const BlockPool&) = delete;
  void run(const std::function<void(int)>& job) {
    job_ = &job;
    start_.arrive_and_wait();  // publishes job_ to the workers
    done_.arrive_and_wait();
    job_ = nullptr;
  }
  static BlockPool& of(int threads) {
    static std::map<int, std::unique_ptr<BlockPool>> pools;  // by thread count
    auto& p = pools[threads];
    if (!p) p = std::make_unique<BlockPool>(threads);
    return *p;
  }

 private:
  void work(int t) {
    for (;;) {
      start_.arrive_and_wait();
      if (quit_) return;
      (*job_)(t);
      done_.arrive_and_wait();
    }
  }
  std::barrier<> start_, done_;
  std::vector<std::thread> workers_;
  const std::function<void(int)>* job_ = nullptr;
  bool quit_ = false;  // read by the workers after the start barrier only
};

#else  // fibers

// A fiber's saved context. On x86-64 a switch saves the callee-saved
// registers, MXCSR and the x87 control word on the old stack and loads the
// new one's (rotor_emu_switch below, which makes no system call);
// elsewhere it is ucontext's swapcontext, which also saves the signal mask
// (a system call per switch).
#if defined(__x86_64__)
extern "C" void rotor_emu_switch(void** save_sp, void* load_sp);
// Weak: every translation unit that includes this header defines it.
asm(R"(
  .text
  .weak rotor_emu_switch
  .type rotor_emu_switch, @function
rotor_emu_switch:
  pushq %rbp
  pushq %rbx
  pushq %r12
  pushq %r13
  pushq %r14
  pushq %r15
  subq $8, %rsp
  stmxcsr (%rsp)
  fnstcw 4(%rsp)
  movq %rsp, (%rdi)
  movq %rsi, %rsp
  ldmxcsr (%rsp)
  fldcw 4(%rsp)
  addq $8, %rsp
  popq %r15
  popq %r14
  popq %r13
  popq %r12
  popq %rbx
  popq %rbp
  ret
  .size rotor_emu_switch, .-rotor_emu_switch
)");
struct Context {
  void* sp = nullptr;
};
// A context that starts `entry` on [stack, stack + bytes) when first switched to.
inline void make_context(Context& c, unsigned char* stack, size_t bytes, void (*entry)()) {
  auto top = reinterpret_cast<uintptr_t>(stack + bytes) & ~uintptr_t(15);
  auto* w = reinterpret_cast<uint64_t*>(top);
  // rotor_emu_switch's frame, lowest first: MXCSR and the x87 control word,
  // r15, r14, r13, r12, rbx, rbp, the return address (entry); above it the
  // slot of entry's own return address, so that entry starts with
  // rsp % 16 == 8 as after a call. entry never returns.
  w[-1] = 0;
  w[-2] = reinterpret_cast<uint64_t>(entry);
  for (int i = 3; i <= 8; ++i) w[-i] = 0;
  uint32_t mxcsr = 0;
  uint16_t fpcw = 0;
  asm volatile("stmxcsr %0" : "=m"(mxcsr));
  asm volatile("fnstcw %0" : "=m"(fpcw));
  w[-9] = uint64_t(mxcsr) | (uint64_t(fpcw) << 32);
  c.sp = &w[-9];
}
inline void switch_context(Context& from, Context& to) {
  rotor_emu_switch(&from.sp, to.sp);
}
#else
struct Context {
  ucontext_t uc;
};
inline void make_context(Context& c, unsigned char* stack, size_t bytes, void (*entry)()) {
  getcontext(&c.uc);
  c.uc.uc_stack.ss_sp = stack;
  c.uc.uc_stack.ss_size = bytes;
  c.uc.uc_link = nullptr;  // entry never returns
  makecontext(&c.uc, entry, 0);
}
inline void switch_context(Context& from, Context& to) {
  swapcontext(&from.uc, &to.uc);
}
#endif

// Runs job(t) for t in [0, threads) as fibers on the calling OS thread. The
// stacks (256 KiB each, a guard page below, mapped once per thread count
// and kept) are reused by the next block of the same size. A fiber's CUDA
// identity (the t_* variables) is saved when it yields and restored when it
// resumes.
class FiberPool {
 public:
  static constexpr size_t kStack = size_t(256) << 10, kGuard = 4096;
  explicit FiberPool(int threads) : fibers_(static_cast<size_t>(threads)) {
    for (Fiber& f : fibers_) {
      void* m = mmap(nullptr, kStack + kGuard, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
      if (m == MAP_FAILED) fail("mmap of a fiber stack");
      mprotect(m, kGuard, PROT_NONE);  // an overflow faults instead of writing the next stack
      f.stack = static_cast<unsigned char*>(m);
    }
  }
  ~FiberPool() {
    for (Fiber& f : fibers_) munmap(f.stack, kStack + kGuard);
  }
  FiberPool(const FiberPool&) = delete;
  FiberPool& operator=(const FiberPool&) = delete;
  static FiberPool& of(int threads) {
    static thread_local std::map<int, std::unique_ptr<FiberPool>> pools;  // by thread count
    auto& p = pools[threads];
    if (!p) p = std::make_unique<FiberPool>(threads);
    return *p;
  }
  void run(const std::function<void(int)>& job);
  void yield() { switch_context(fibers_[current_].ctx, loop_); }

 private:
  struct Fiber {
    Context ctx;
    unsigned char* stack = nullptr;
    bool done = false;
    uint3 thread{}, block{}, dim{}, grid{};
    int linear = 0;
    Block* blk = nullptr;
    unsigned calls = 0;
    std::vector<Copy> issued;
    std::deque<std::vector<Copy>> groups;
  };
  static void entry();
  void save(Fiber& f) {
    f.thread = t_thread;
    f.block = t_block;
    f.dim = t_dim;
    f.grid = t_grid;
    f.linear = t_linear;
    f.blk = t_blk;
    f.calls = t_calls;
    f.issued.swap(t_issued);
    f.groups.swap(t_groups);
  }
  void restore(Fiber& f) {
    t_thread = f.thread;
    t_block = f.block;
    t_dim = f.dim;
    t_grid = f.grid;
    t_linear = f.linear;
    t_blk = f.blk;
    t_calls = f.calls;
    t_issued.swap(f.issued);
    t_groups.swap(f.groups);
  }
  std::vector<Fiber> fibers_;
  Context loop_;
  const std::function<void(int)>* job_ = nullptr;
  size_t current_ = 0;
};

inline thread_local FiberPool* t_pool = nullptr;  // the pool running a block

// A fiber's first frame: the job, then back to the loop for good (the loop
// makes a fresh context before the fiber's stack runs anything again).
inline void FiberPool::entry() {
  FiberPool& p = *t_pool;
  (*p.job_)(static_cast<int>(p.current_));
  p.fibers_[p.current_].done = true;
  ++t_progress;
  p.yield();
  fail("a finished fiber resumed");
}

inline void FiberPool::run(const std::function<void(int)>& job) {
  if (t_pool) fail("a block launched from inside a block");
  job_ = &job;
  t_pool = this;
  for (size_t i = 0; i < fibers_.size(); ++i) {
    Fiber& f = fibers_[i];
    f.done = false;
    make_context(f.ctx, f.stack + kGuard, kStack, &FiberPool::entry);
    f.thread = f.block = f.dim = f.grid = make_uint3(0, 0, 0);
    f.linear = static_cast<int>(i);
    f.blk = nullptr;
    f.calls = 0;
  }
  size_t left = fibers_.size();
  while (left > 0) {
    const uint64_t before = t_progress;
    for (size_t i = 0; i < fibers_.size(); ++i) {
      Fiber& f = fibers_[i];
      if (f.done) continue;
      current_ = i;
      restore(f);
      switch_context(loop_, f.ctx);
      save(f);
      if (f.done) --left;
    }
    if (left > 0 && t_progress == before)
      fail("a barrier that some threads of the block never reach (a deadlock)");
  }
  t_pool = nullptr;
  job_ = nullptr;
}

inline void yield() {
  if (!t_pool) fail("a barrier outside a block");
  t_pool->yield();
}

#endif  // ROTOR_EMU_OS_THREADS

// Runs body as block `index` of a `grid` of blocks of `dim` threads (x
// fastest; a multiple of 32 in all when the kernel uses warps) with `smem`
// bytes of dynamic shared memory.
inline void run_block(dim3 dim, dim3 grid, uint3 index, size_t smem,
                      const std::function<void()>& body) {
  const int threads = static_cast<int>(dim.x * dim.y * dim.z);
  if (threads < 1 || threads > 1024) fail("a block of more than 1024 threads (or none)");
  Block blk;
  blk.all = std::make_unique<Barrier>(threads);
  for (int w = 0; w < (threads + 31) / 32; ++w)
    blk.warps.push_back(std::make_unique<Barrier>(std::min(32, threads - 32 * w)));
  blk.slots.resize(static_cast<size_t>((threads + 31) / 32) * 2);
  blk.smem_bytes = smem;
  blk.smem = static_cast<unsigned char*>(::operator new(smem ? smem : 1, std::align_val_t(128)));
  std::memset(blk.smem, 0xff, smem);  // NaN in f16, bf16 and f32
#ifdef ROTOR_EMU_OS_THREADS
  BlockPool::of(threads).run([&](int t) {
#else
  FiberPool::of(threads).run([&](int t) {
#endif
    const unsigned u = static_cast<unsigned>(t);
    t_thread = make_uint3(u % dim.x, u / dim.x % dim.y, u / (dim.x * dim.y));
    t_linear = t;
    t_block = index;
    t_dim = make_uint3(dim.x, dim.y, dim.z);
    t_grid = make_uint3(grid.x, grid.y, grid.z);
    t_blk = &blk;
    t_calls = 0;
    body();
    if (!t_issued.empty() || !t_groups.empty()) fail("cp.async copies outstanding at exit");
    t_blk = nullptr;
  });
  ::operator delete(blk.smem, std::align_val_t(128));
}

// Runs body as block (bx, by) of a grid of (gx, gy) blocks of `threads`
// threads with `smem` bytes of dynamic shared memory.
inline void run_block(int threads, unsigned gx, unsigned gy, unsigned bx, unsigned by, size_t smem,
                      const std::function<void()>& body) {
  run_block(dim3(static_cast<unsigned>(threads)), dim3(gx, gy), make_uint3(bx, by, 0), smem, body);
}

// Every block of a (gx, gy) grid, one after the other.
inline void run_grid(int threads, unsigned gx, unsigned gy, size_t smem,
                     const std::function<void()>& body) {
  for (unsigned by = 0; by < gy; ++by)
    for (unsigned bx = 0; bx < gx; ++bx) run_block(threads, gx, gy, bx, by, smem, body);
}

// A 1-D grid of a kernel without barriers: its threads one after the other.
inline void run_serial(unsigned blocks, int threads, const std::function<void()>& body) {
  for (unsigned bx = 0; bx < blocks; ++bx)
    for (int t = 0; t < threads; ++t) {
      t_thread = make_uint3(static_cast<unsigned>(t), 0, 0);
      t_linear = t;
      t_block = make_uint3(bx, 0, 0);
      t_dim = make_uint3(static_cast<unsigned>(threads), 1, 1);
      t_grid = make_uint3(blocks, 1, 1);
      t_blk = nullptr;
      body();
    }
}

// The shared-memory bytes [addr, addr + n): must lie in the block's memory.
inline unsigned char* shared_at(uint32_t addr, size_t n) {
  if (!t_blk || static_cast<size_t>(addr) + n > t_blk->smem_bytes)
    fail("shared-memory access out of bounds");
  return t_blk->smem + addr;
}

}  // namespace emu

#define threadIdx (emu::t_thread)
#define blockIdx (emu::t_block)
#define blockDim (emu::t_dim)
#define gridDim (emu::t_grid)

inline void __syncthreads() {
  if (!emu::t_blk) emu::fail("__syncthreads in a kernel run serially");
  emu::t_blk->all->arrive_and_wait();
}
// Non-zero on every thread when `pred` is non-zero on any thread of the block.
inline int __syncthreads_or(int pred) {
  if (!emu::t_blk) emu::fail("__syncthreads_or in a kernel run serially");
  emu::Block& b = *emu::t_blk;
  b.all->arrive_and_wait();
  if (pred) b.vote.store(1);
  b.all->arrive_and_wait();
  const int r = b.vote.load();
  b.all->arrive_and_wait();
  if (emu::t_linear == 0) b.vote.store(0);  // before thread 0 reaches the next call's first barrier
  return r;
}
inline void __syncwarp(unsigned mask = 0xffffffffu) {
  if (mask != 0xffffffffu) emu::fail("__syncwarp with a partial mask");
  emu::warp_barrier();
}
// v of lane `src` of this warp (float, double, or an integer, which the
// slot's double holds exactly below 2^53).
template <class V>
inline V __shfl_sync(unsigned mask, V v, int src) {
  static_assert(std::is_same_v<V, float> || std::is_same_v<V, double> || std::is_integral_v<V>);
  if (mask != 0xffffffffu) emu::fail("shuffle with a partial mask");
  if constexpr (std::is_integral_v<V>) {
    if (static_cast<double>(v) >= 0x1p53 || static_cast<double>(v) <= -0x1p53)
      emu::fail("an integer shuffle beyond 2^53");
  }
  const int kind = std::is_same_v<V, float> ? 10 : std::is_same_v<V, double> ? 11 : 12;
  const emu::Slot& s =
      emu::collective(kind, [&](emu::Slot& s) { s.x[emu::lane()] = static_cast<double>(v); });
  return static_cast<V>(s.x[src & 31]);
}
template <class V>
inline V __shfl_xor_sync(unsigned mask, V v, int m) {
  return __shfl_sync(mask, v, emu::lane() ^ m);
}
inline float atomicAdd(float* p, float v) {
  return std::atomic_ref<float>(*p).fetch_add(v);
}

#undef __device__
#undef __global__
#undef __forceinline__
#undef __launch_bounds__
#define __device__
#define __global__
#define __forceinline__ inline
#define __launch_bounds__(...)
