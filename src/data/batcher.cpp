#include "data/batcher.h"

#include <spdlog/spdlog.h>

#include <algorithm>

#include "core/error.h"
#include "core/philox.h"
#include "data/sentencepiece.h"

namespace rotor::data {

namespace {

template <class T>
void shuffle_in_place(std::vector<T>& v, PhiloxRng& rng) {
  for (size_t i = v.size(); i > 1; --i) std::swap(v[i - 1], v[rng.below(i)]);
}

}  // namespace

TokenBatcher::TokenBatcher(std::shared_ptr<const MmapCorpus> src,
                           std::shared_ptr<const MmapCorpus> tgt, BatcherOptions options)
    : src_(std::move(src)), tgt_(std::move(tgt)), opt_(options) {
  ROTOR_CHECK(src_, "TokenBatcher needs a source corpus");
  if (opt_.max_tokens <= 0) ROTOR_FAIL("batcher: max_tokens {} must be positive", opt_.max_tokens);
  if (opt_.max_sentences < 0)
    ROTOR_FAIL("batcher: max_sentences {} must not be negative", opt_.max_sentences);
  if (opt_.world_size < 1 || opt_.rank < 0 || opt_.rank >= opt_.world_size)
    ROTOR_FAIL("batcher: rank {} is not in [0, world size {})", opt_.rank, opt_.world_size);
  if (opt_.bucket_size < 0) ROTOR_FAIL("batcher: bucket_size must not be negative");
  const size_t n = src_->size();
  if (tgt_ && tgt_->size() != n)
    ROTOR_FAIL("batcher: source {} has {} sentences but target {} has {}", src_->prefix(), n,
               tgt_->prefix(), tgt_->size());
  src_len_.resize(n);
  if (tgt_) tgt_len_.resize(n);
  src_has_eos_.resize(n);
  if (tgt_) tgt_has_eos_.resize(n);
  for (size_t i = 0; i < n; ++i) {
    auto s = src_->sentence(i);
    src_has_eos_[i] = !s.empty() && s.back() == kEosId;
    int64_t ls = static_cast<int64_t>(s.size()) + (opt_.src_append_eos && !src_has_eos_[i]);
    int64_t lt = 1;
    if (tgt_) {
      auto t = tgt_->sentence(i);
      tgt_has_eos_[i] = !t.empty() && t.back() == kEosId;
      lt = static_cast<int64_t>(t.size()) - tgt_has_eos_[i] + 1;  // <s> y  /  y </s>
      tgt_len_[i] = static_cast<int32_t>(std::min<int64_t>(lt, INT32_MAX));
    }
    src_len_[i] = static_cast<int32_t>(std::min<int64_t>(ls, INT32_MAX));
    if (ls == 0 || ls > opt_.max_tokens || lt > opt_.max_tokens) {
      ++skipped_;
      continue;
    }
    usable_.push_back(static_cast<int64_t>(i));
  }
  if (usable_.empty())
    ROTOR_FAIL("batcher: no sentence of {} ({} sentences) fits in max_tokens {}", src_->prefix(), n,
               opt_.max_tokens);
  if (skipped_ > 0)
    spdlog::warn("batcher: skipping {} of {} sentences of {} longer than max_tokens {}", skipped_,
                 n, src_->prefix(), opt_.max_tokens);
  if (opt_.remainder == ShardRemainder::Drop && batches_in_epoch(0) == 0)
    ROTOR_FAIL("batcher: {} has too few batches for {} ranks (use remainder padding)",
               src_->prefix(), opt_.world_size);
}

TokenBatcher::~TokenBatcher() {
  stop_worker();
}

std::vector<std::vector<int64_t>> TokenBatcher::epoch_plan(uint64_t epoch) const {
  std::vector<int64_t> order = usable_;
  auto by_length = [this](int64_t a, int64_t b) {
    if (src_len_[a] != src_len_[b]) return src_len_[a] < src_len_[b];
    if (tgt_ && tgt_len_[a] != tgt_len_[b]) return tgt_len_[a] < tgt_len_[b];
    return false;
  };
  if (opt_.shuffle) {
    PhiloxRng rng(opt_.seed, rng_stream(epoch, 0, RngPurpose::Shuffle, 0));
    shuffle_in_place(order, rng);
    const size_t chunk =
        opt_.bucket_size > 0 ? static_cast<size_t>(opt_.bucket_size) : order.size();
    for (size_t b = 0; b < order.size(); b += chunk)
      std::stable_sort(order.begin() + b, order.begin() + std::min(order.size(), b + chunk),
                       by_length);
  } else {
    std::stable_sort(order.begin(), order.end(), by_length);
  }

  // Greedy cut: adding a sentence must keep B * max_len within budget per side.
  std::vector<std::vector<int64_t>> batches;
  std::vector<int64_t> cur;
  int64_t max_s = 0, max_t = 0;
  for (int64_t id : order) {
    const int64_t s = std::max<int64_t>(max_s, src_len_[id]);
    const int64_t t = tgt_ ? std::max<int64_t>(max_t, tgt_len_[id]) : 0;
    const int64_t b = static_cast<int64_t>(cur.size()) + 1;
    const bool fits = b * s <= opt_.max_tokens && b * t <= opt_.max_tokens &&
                      (opt_.max_sentences == 0 || b <= opt_.max_sentences);
    if (!fits) {
      batches.push_back(std::move(cur));
      cur.clear();
      max_s = src_len_[id];
      max_t = tgt_ ? tgt_len_[id] : 0;
    } else {
      max_s = s;
      max_t = t;
    }
    cur.push_back(id);
  }
  if (!cur.empty()) batches.push_back(std::move(cur));

  if (opt_.shuffle) {
    PhiloxRng rng(opt_.seed, rng_stream(epoch, 1, RngPurpose::Shuffle, 0));
    shuffle_in_place(batches, rng);
  }

  const size_t nb = batches.size(), w = static_cast<size_t>(opt_.world_size);
  const size_t per = opt_.remainder == ShardRemainder::Pad ? (nb + w - 1) / w : nb / w;
  std::vector<std::vector<int64_t>> mine;
  mine.reserve(per);
  for (size_t k = 0; k < per; ++k)
    mine.push_back(batches[(static_cast<size_t>(opt_.rank) + k * w) % nb]);
  return mine;
}

Batch TokenBatcher::make_batch(const std::vector<int64_t>& ids) const {
  Batch b;
  b.indices = ids;
  const int64_t B = static_cast<int64_t>(ids.size());
  int64_t S = 0, T = 0;
  for (int64_t id : ids) {
    S = std::max<int64_t>(S, src_len_[id]);
    if (tgt_) T = std::max<int64_t>(T, tgt_len_[id]);
  }
  b.src = Tensor::zeros({B, S}, DType::I32);  // [B, S]
  int32_t* src = b.src.data<int32_t>();
  for (int64_t r = 0; r < B; ++r) {
    auto s = src_->sentence(static_cast<size_t>(ids[r]));
    std::copy(s.begin(), s.end(), src + r * S);
    if (static_cast<int64_t>(s.size()) < src_len_[ids[r]]) src[r * S + s.size()] = kEosId;
    b.src_lengths.push_back(src_len_[ids[r]]);
    b.src_tokens += src_len_[ids[r]];
  }
  if (tgt_) {
    b.tgt_in = Tensor::zeros({B, T}, DType::I32);   // [B, T]
    b.tgt_out = Tensor::zeros({B, T}, DType::I32);  // [B, T]
    int32_t* in = b.tgt_in.data<int32_t>();
    int32_t* out = b.tgt_out.data<int32_t>();
    for (int64_t r = 0; r < B; ++r) {
      auto t = tgt_->sentence(static_cast<size_t>(ids[r]));
      const size_t n = t.size() - tgt_has_eos_[ids[r]];
      in[r * T] = kBosId;
      std::copy(t.begin(), t.begin() + n, in + r * T + 1);
      std::copy(t.begin(), t.begin() + n, out + r * T);
      out[r * T + n] = kEosId;
      b.tgt_lengths.push_back(tgt_len_[ids[r]]);
      b.tgt_tokens += tgt_len_[ids[r]];
    }
  }
  return b;
}

TokenBatcher::Ready TokenBatcher::produce(BatchPosition pos) {
  if (plan_epoch_ != pos.epoch) {
    plan_ = epoch_plan(pos.epoch);
    plan_epoch_ = pos.epoch;
  }
  if (plan_.empty())
    ROTOR_FAIL("batcher: epoch {} of {} has no batch for rank {} of {}", pos.epoch, src_->prefix(),
               opt_.rank, opt_.world_size);
  if (pos.batch_index >= plan_.size())
    ROTOR_FAIL(
        "batcher: data position batch {} of epoch {} is beyond its {} batches "
        "(were the data or batching options changed since the checkpoint?)",
        pos.batch_index, pos.epoch, plan_.size());
  Ready r{make_batch(plan_[pos.batch_index]), pos};
  r.batch.position = pos;
  r.next = pos.batch_index + 1 < plan_.size() ? BatchPosition{pos.epoch, pos.batch_index + 1}
                                              : BatchPosition{pos.epoch + 1, 0};
  return r;
}

void TokenBatcher::worker_loop() {
  BatchPosition pos;
  {
    std::lock_guard<std::mutex> lock(mu_);
    pos = produce_pos_;
  }
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [this] { return stop_ || queue_.size() < opt_.prefetch; });
      if (stop_) return;
    }
    try {
      Ready r = produce(pos);
      pos = r.next;
      std::lock_guard<std::mutex> lock(mu_);
      queue_.push_back(std::move(r));
    } catch (...) {
      std::lock_guard<std::mutex> lock(mu_);
      error_ = std::current_exception();
      cv_.notify_all();
      return;
    }
    cv_.notify_all();
  }
}

void TokenBatcher::start_worker() {
  stop_ = false;
  error_ = nullptr;
  queue_.clear();
  produce_pos_ = consume_pos_;
  worker_ = std::thread([this] { worker_loop(); });
}

void TokenBatcher::stop_worker() {
  if (!worker_.joinable()) return;
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  worker_.join();
  queue_.clear();
  error_ = nullptr;
}

Batch TokenBatcher::next() {
  if (opt_.prefetch == 0) {
    Ready r = produce(consume_pos_);
    consume_pos_ = r.next;
    return std::move(r.batch);
  }
  if (!worker_.joinable()) start_worker();
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [this] { return !queue_.empty() || error_; });
  if (queue_.empty()) {
    std::exception_ptr e = error_;
    lock.unlock();
    stop_worker();  // joins the finished thread; the next call retries from position()
    std::rethrow_exception(e);
  }
  Ready r = std::move(queue_.front());
  queue_.pop_front();
  lock.unlock();
  cv_.notify_all();
  consume_pos_ = r.next;
  return std::move(r.batch);
}

void TokenBatcher::set_position(BatchPosition p) {
  stop_worker();
  consume_pos_ = p;
}

}  // namespace rotor::data
