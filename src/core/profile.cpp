#include "core/profile.h"

#include <algorithm>
#include <atomic>
#include <mutex>
#include <string_view>
#include <unordered_map>

namespace rotor::profile {

namespace {

std::atomic<bool> g_enabled{false};
std::atomic<void (*)()> g_sync{nullptr};
thread_local Scope* t_innermost = nullptr;

struct Totals {
  int64_t calls = 0;
  double seconds = 0, flops = 0, bytes = 0;
};
std::mutex g_mutex;
// Keyed by the call's literal: one entry per dispatch site.
std::unordered_map<const char*, Totals> g_totals;

}  // namespace

void set_enabled(bool on) {
  g_enabled.store(on, std::memory_order_relaxed);
}
bool enabled() {
  return g_enabled.load(std::memory_order_relaxed);
}
void set_sync(void (*fn)()) {
  g_sync.store(fn, std::memory_order_relaxed);
}

Scope::Scope(const char* call) : call_(call && enabled() ? call : nullptr) {
  if (!call_) return;
  parent_ = t_innermost;
  t_innermost = this;
  if (auto sync = g_sync.load(std::memory_order_relaxed)) sync();  // earlier work is not ours
  start_ = std::chrono::steady_clock::now();
}

Scope::~Scope() {
  if (!call_) return;
  if (auto sync = g_sync.load(std::memory_order_relaxed)) sync();  // our kernels have run
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  t_innermost = parent_;
  if (parent_) parent_->child_seconds_ += seconds;
  std::lock_guard<std::mutex> lock(g_mutex);
  Totals& t = g_totals[call_];
  ++t.calls;
  t.seconds += std::max(0.0, seconds - child_seconds_);
}

void add_work(double flops, double bytes) {
  Scope* s = t_innermost;
  if (!s || !s->call_) return;
  std::lock_guard<std::mutex> lock(g_mutex);
  Totals& t = g_totals[s->call_];
  t.flops += flops;
  t.bytes += bytes;
}

std::vector<Row> take() {
  std::unordered_map<const char*, Totals> totals;
  {
    std::lock_guard<std::mutex> lock(g_mutex);
    totals.swap(g_totals);
  }
  // Sites of one op (a public function dispatching in two places) merge.
  std::unordered_map<std::string, Row> by_name;
  for (const auto& [call, t] : totals) {
    std::string_view c(call);
    std::string name(c.substr(0, c.find('(')));
    Row& r = by_name[name];
    r.op = name;
    r.calls += t.calls;
    r.seconds += t.seconds;
    r.flops += t.flops;
    r.bytes += t.bytes;
  }
  std::vector<Row> rows;
  for (auto& [name, r] : by_name) rows.push_back(std::move(r));
  std::sort(rows.begin(), rows.end(),
            [](const Row& a, const Row& b) { return a.seconds > b.seconds; });
  return rows;
}

}  // namespace rotor::profile
