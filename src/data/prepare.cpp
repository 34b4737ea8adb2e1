#include "data/prepare.h"

#include <algorithm>
#include <chrono>
#include <exception>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <thread>
#include <vector>

#include "core/error.h"
#include "data/corpus.h"
#include "data/sentencepiece.h"

namespace rotor::data {

std::string PrepareStats::summary() const {
  const double pct = lines ? 100.0 * static_cast<double>(kept) / static_cast<double>(lines) : 0.0;
  std::string s = fmt::format(
      "prepare: {} lines, kept {} ({:.1f}%), dropped: empty {}, too short {}, too long {}, "
      "length ratio {}; tokens: src {}",
      lines, kept, pct, dropped_empty, dropped_short, dropped_long, dropped_ratio, src_tokens);
  if (tgt_tokens) s += fmt::format(", tgt {}", tgt_tokens);
  s += fmt::format("; {:.2f} s", seconds);
  return s;
}

namespace {

// Reads lines one at a time, stripping "\r\n" (or keeping the line break)
// and checking UTF-8 (or not).
class LineReader {
 public:
  LineReader(const std::string& path, bool keep_line_ends, bool check_utf8)
      : path_(path), keep_line_ends_(keep_line_ends), check_utf8_(check_utf8) {
    std::error_code ec;
    if (!std::filesystem::exists(path, ec)) ROTOR_FAIL("prepare: {}: no such file", path);
    // Read twice on a line-count mismatch, and a device never ends.
    if (!std::filesystem::is_regular_file(path, ec))
      ROTOR_FAIL("prepare: {}: not a regular file", path);
    in_.open(path, std::ios::binary);
    if (!in_) ROTOR_FAIL("prepare: {}: cannot open", path);
  }
  bool next(std::string& line) {
    if (!std::getline(in_, line)) return false;
    ++line_no_;
    if (keep_line_ends_) {
      if (!in_.eof()) line.push_back('\n');  // the last line may have none
    } else if (!line.empty() && line.back() == '\r') {
      line.pop_back();
    }
    if (!check_utf8_) return true;
    size_t bad = find_invalid_utf8(line);
    if (bad != std::string_view::npos)
      ROTOR_FAIL("prepare: {}:{}: invalid UTF-8 at byte {} of the line", path_, line_no_, bad + 1);
    return true;
  }
  // Lines still unread (for the line-count error message).
  int64_t count_rest() {
    std::string line;
    int64_t n = line_no_;
    while (std::getline(in_, line)) ++n;
    return n;
  }
  int64_t line_no() const { return line_no_; }

 private:
  std::string path_;
  bool keep_line_ends_, check_utf8_;
  std::ifstream in_;
  int64_t line_no_ = 0;
};

using Encoded = std::vector<std::vector<int32_t>>;

// Encodes lines[i] into out[i] over `threads` threads, each a contiguous range.
void encode_parallel(const Tokenizer& tok, const std::vector<std::string>& lines, Encoded& out,
                     int threads) {
  out.assign(lines.size(), {});
  const size_t n = lines.size();
  const size_t t = std::max<size_t>(1, std::min<size_t>(threads, n / 64 + 1));
  std::vector<std::thread> pool;
  std::vector<std::exception_ptr> errors(t);
  for (size_t w = 0; w < t; ++w) {
    pool.emplace_back([&, w] {
      try {
        for (size_t i = n * w / t; i < n * (w + 1) / t; ++i) out[i] = tok.encode(lines[i]);
      } catch (...) {
        errors[w] = std::current_exception();
      }
    });
  }
  for (auto& th : pool) th.join();
  for (auto& e : errors)
    if (e) std::rethrow_exception(e);
}

}  // namespace

PrepareStats prepare_corpus(const PrepareOptions& o) {
  const auto t0 = std::chrono::steady_clock::now();
  const bool parallel = !o.tgt.empty();
  if (o.output_prefix.empty()) ROTOR_FAIL("prepare: --output-prefix is empty");
  if (o.min_len < 0 || o.max_len < 0 || o.max_len_ratio < 0)
    ROTOR_FAIL("prepare: --min-len, --max-len and --max-len-ratio must not be negative");
  if (o.max_len > 0 && o.min_len > o.max_len)
    ROTOR_FAIL("prepare: --min-len {} exceeds --max-len {}", o.min_len, o.max_len);
  const Tokenizer tok = Tokenizer::load(o.spm_model);
  const bool check_utf8 = !tok.is_bytes();
  LineReader src(o.src, o.keep_line_ends, check_utf8);
  std::optional<LineReader> tgt;
  if (parallel) tgt.emplace(o.tgt, o.keep_line_ends, check_utf8);
  const int threads = o.num_threads > 0
                          ? o.num_threads
                          : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));

  std::unique_ptr<CorpusWriter> src_out, tgt_out;
  if (parallel) {
    src_out = std::make_unique<CorpusWriter>(o.output_prefix + ".src", tok.vocab_size());
    tgt_out = std::make_unique<CorpusWriter>(o.output_prefix + ".tgt", tok.vocab_size());
  } else {
    src_out = std::make_unique<CorpusWriter>(o.output_prefix, tok.vocab_size());
  }

  PrepareStats st;
  const size_t chunk = std::max<size_t>(1, o.chunk_lines);
  std::vector<std::string> src_lines, tgt_lines;
  Encoded src_ids, tgt_ids;
  std::vector<int32_t> buf;
  bool done = false;
  while (!done) {
    src_lines.clear();
    tgt_lines.clear();
    std::string a, b;
    while (src_lines.size() < chunk) {
      bool has_a = src.next(a);
      bool has_b = parallel ? tgt->next(b) : has_a;
      if (has_a != has_b) {
        int64_t na = has_a ? src.count_rest() : src.line_no();
        int64_t nb = has_b ? tgt->count_rest() : tgt->line_no();
        ROTOR_FAIL("prepare: line counts differ: {} has {} lines, {} has {} lines", o.src, na,
                   o.tgt, nb);
      }
      if (!has_a) {
        done = true;
        break;
      }
      src_lines.push_back(std::move(a));
      if (parallel) tgt_lines.push_back(std::move(b));
    }
    encode_parallel(tok, src_lines, src_ids, threads);
    if (parallel) encode_parallel(tok, tgt_lines, tgt_ids, threads);
    for (size_t i = 0; i < src_lines.size(); ++i) {
      ++st.lines;
      const int64_t ls = static_cast<int64_t>(src_ids[i].size());
      const int64_t lt = parallel ? static_cast<int64_t>(tgt_ids[i].size()) : ls;
      const int64_t lo = std::min(ls, lt), hi = std::max(ls, lt);
      if (lo == 0) {
        ++st.dropped_empty;
      } else if (lo < o.min_len) {
        ++st.dropped_short;
      } else if (o.max_len > 0 && hi > o.max_len) {
        ++st.dropped_long;
      } else if (parallel && o.max_len_ratio > 0 &&
                 static_cast<double>(hi) > o.max_len_ratio * static_cast<double>(lo)) {
        ++st.dropped_ratio;
      } else {
        ++st.kept;
        auto put = [&](CorpusWriter& w, const std::vector<int32_t>& ids, int64_t& count) {
          if (o.append_eos) {
            buf.assign(ids.begin(), ids.end());
            buf.push_back(kEosId);
            w.add(buf);
          } else {
            w.add(ids);
          }
          count += static_cast<int64_t>(ids.size()) + (o.append_eos ? 1 : 0);
        };
        put(*src_out, src_ids[i], st.src_tokens);
        if (parallel) put(*tgt_out, tgt_ids[i], st.tgt_tokens);
      }
    }
  }
  if (st.lines == 0) ROTOR_FAIL("prepare: empty corpus: {} has no lines", o.src);
  if (st.kept == 0)
    ROTOR_FAIL("prepare: empty corpus: no sentence of {} survived cleaning ({})", o.src,
               st.summary());
  // Both sides written whole before either replaces an earlier one.
  src_out->seal();
  if (parallel) tgt_out->seal();
  if (o.before_commit) o.before_commit();
  src_out->commit();
  if (parallel) tgt_out->commit();
  st.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return st;
}

}  // namespace rotor::data
