// TensorBoard event files (src/train/tensorboard.h): CRC-32C against known
// answers, the record framing and the Events parsed back here, and the
// scalars read back by the `tensorboard` Python package
// (tests/scripts/read_tensorboard.py; skipped where it is absent).
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/io.h"
#include "data/sentencepiece.h"
#include "data/synth_numbers.h"
#include "support/test_util.h"
#include "train/tensorboard.h"
#include "train/tensorboard.pb.h"

namespace rotor::train {
namespace {
namespace fs = std::filesystem;

uint64_t read_le(const std::string& bytes, size_t pos, int n) {
  uint64_t v = 0;
  for (int i = n - 1; i >= 0; --i) v = (v << 8) | static_cast<uint8_t>(bytes[pos + i]);
  return v;
}

// Every record of an event file, checked as TensorBoard's reader checks it:
// the length's and the data's masked CRC-32C, nothing left over.
std::vector<proto::Event> read_events(const std::string& path) {
  const std::string bytes = read_file(path);
  std::vector<proto::Event> events;
  size_t pos = 0;
  while (pos < bytes.size()) {
    EXPECT_LE(pos + 12, bytes.size()) << "truncated header at byte " << pos;
    if (pos + 12 > bytes.size()) break;
    const uint64_t len = read_le(bytes, pos, 8);
    EXPECT_EQ(read_le(bytes, pos + 8, 4), masked_crc32c(std::string_view(bytes).substr(pos, 8)))
        << "length CRC of the record at byte " << pos;
    EXPECT_LE(pos + 12 + len + 4, bytes.size()) << "truncated record at byte " << pos;
    if (pos + 12 + len + 4 > bytes.size()) break;
    const std::string data = bytes.substr(pos + 12, len);
    EXPECT_EQ(read_le(bytes, pos + 12 + len, 4), masked_crc32c(data))
        << "data CRC of the record at byte " << pos;
    proto::Event event;
    EXPECT_TRUE(event.ParseFromString(data)) << "record at byte " << pos;
    events.push_back(event);
    pos += 12 + len + 4;
  }
  return events;
}

double now_seconds() {
  using namespace std::chrono;
  return duration_cast<duration<double>>(system_clock::now().time_since_epoch()).count();
}

TEST(TensorBoard, Crc32cKnownAnswers) {
  // The check value of CRC-32C and the test vectors of RFC 3720, B.4.
  EXPECT_EQ(crc32c("123456789"), 0xE3069283u);
  EXPECT_EQ(crc32c(""), 0u);
  EXPECT_EQ(crc32c(std::string(32, '\0')), 0x8A9136AAu);
  EXPECT_EQ(crc32c(std::string(32, '\xff')), 0x62A8AB43u);
  std::string ascending;
  for (int i = 0; i < 32; ++i) ascending.push_back(static_cast<char>(i));
  EXPECT_EQ(crc32c(ascending), 0x46DD794Eu);
  // ((0xE3069283 >> 15) | (0xE3069283 << 17)) + 0xa282ead8, modulo 2^32.
  EXPECT_EQ(masked_crc32c("123456789"), 0xC78AB0E5u);
}

TEST(TensorBoard, FileNameFirstRecordAndScalarEvents) {
  test::TempDir tmp;
  const std::string dir = tmp / "run/tensorboard";  // created, parents too
  const double before = now_seconds();
  std::string path;
  {
    TensorBoardWriter tb(dir);
    ASSERT_TRUE(tb.is_open());
    path = tb.path();
    tb.scalar("train/loss", 10, 2.5);
    tb.scalars(20, {{"valid/loss", 1.25}, {"valid/bleu", 0.0}, {"train/lr", -3e-4}});
    tb.flush();
    EXPECT_EQ(read_events(path).size(), 3u);  // visible after flush, before close
    tb.scalar("train/loss", 30, 1.0);
  }  // the destructor flushes and closes
  const double after = now_seconds();

  char host[256] = {};
  ASSERT_EQ(gethostname(host, sizeof(host) - 1), 0);
  const std::string name = fs::path(path).filename().string();
  std::smatch m;
  ASSERT_TRUE(std::regex_match(name, m, std::regex(R"(events\.out\.tfevents\.(\d+)\.(.+)\.(\d+))")))
      << name;
  EXPECT_EQ(fs::path(path).parent_path().string(), dir);
  EXPECT_NEAR(std::stod(m[1]), before, 2.0);
  EXPECT_EQ(m[2], std::string(host));
  EXPECT_EQ(std::stol(m[3]), static_cast<long>(getpid()));

  const std::vector<proto::Event> events = read_events(path);
  ASSERT_EQ(events.size(), 4u);
  EXPECT_EQ(events[0].file_version(), "brain.Event:2");
  EXPECT_FALSE(events[0].has_summary());
  for (const auto& e : events) {
    EXPECT_GE(e.wall_time(), before - 1e-3);
    EXPECT_LE(e.wall_time(), after + 1e-3);
  }
  EXPECT_EQ(events[1].step(), 10);
  ASSERT_EQ(events[1].summary().value_size(), 1);
  EXPECT_EQ(events[1].summary().value(0).tag(), "train/loss");
  EXPECT_EQ(events[1].summary().value(0).simple_value(), 2.5f);

  EXPECT_EQ(events[2].step(), 20);
  const auto& values = events[2].summary().value();
  ASSERT_EQ(values.size(), 3);
  EXPECT_EQ(values[0].tag(), "valid/loss");
  EXPECT_EQ(values[0].simple_value(), 1.25f);
  EXPECT_EQ(values[1].tag(), "valid/bleu");
  // A zero is written too: TensorBoard skips a value whose simple_value is absent.
  EXPECT_TRUE(values[1].has_simple_value());
  EXPECT_EQ(values[1].simple_value(), 0.0f);
  EXPECT_EQ(values[2].simple_value(), -3e-4f);
  EXPECT_EQ(events[3].step(), 30);
}

TEST(TensorBoard, NonFiniteValuesAreWrittenAsTheyAre) {
  test::TempDir tmp;
  TensorBoardWriter tb(tmp.path());
  tb.scalars(1, {{"a", std::nan("")}, {"b", INFINITY}, {"c", -INFINITY}, {"d", 1e300}});
  tb.close();
  const auto events = read_events(tb.path());
  ASSERT_EQ(events.size(), 2u);
  const auto& v = events[1].summary().value();
  ASSERT_EQ(v.size(), 4);
  EXPECT_TRUE(std::isnan(v[0].simple_value()));
  EXPECT_EQ(v[1].simple_value(), INFINITY);
  EXPECT_EQ(v[2].simple_value(), -INFINITY);
  EXPECT_EQ(v[3].simple_value(), INFINITY);  // beyond float's range
}

TEST(TensorBoard, SessionStartIsAStartMark) {
  test::TempDir tmp;
  TensorBoardWriter tb(tmp.path());
  tb.session_start(7);
  tb.close();
  const auto events = read_events(tb.path());
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[1].step(), 7);
  ASSERT_TRUE(events[1].has_session_log());
  EXPECT_EQ(events[1].session_log().status(), proto::SessionLog::START);
}

TEST(TensorBoard, WritersNeverShareAFile) {
  test::TempDir tmp;
  TensorBoardWriter a(tmp.path()), b(tmp.path()), c(tmp.path());
  EXPECT_NE(a.path(), b.path());
  EXPECT_NE(b.path(), c.path());
  EXPECT_NE(a.path(), c.path());
  a.scalar("x", 1, 1.0);
  b.scalar("x", 1, 2.0);
  a.close();
  b.close();
  EXPECT_EQ(read_events(a.path())[1].summary().value(0).simple_value(), 1.0f);
  EXPECT_EQ(read_events(b.path())[1].summary().value(0).simple_value(), 2.0f);
}

TEST(TensorBoard, ClosedAndMovedFromWritersDoNothing) {
  TensorBoardWriter closed;
  EXPECT_FALSE(closed.is_open());
  closed.scalar("x", 1, 1.0);
  closed.scalars(1, {{"x", 1.0}});
  closed.session_start(1);
  closed.flush();
  closed.close();

  test::TempDir tmp;
  TensorBoardWriter a(tmp.path());
  const std::string path = a.path();
  TensorBoardWriter b(std::move(a));
  EXPECT_FALSE(a.is_open());  // NOLINT(bugprone-use-after-move): moved-from is closed
  a.scalar("x", 1, 1.0);
  b.scalar("x", 2, 2.0);
  b.close();
  b.close();
  const auto events = read_events(path);
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[1].step(), 2);
}

TEST(TensorBoard, ADirectoryThatCannotBeMadeIsAOneLineError) {
  test::TempDir tmp;
  std::ofstream(tmp / "file") << "x";
  const std::string dir = tmp / "file/tensorboard";
  try {
    TensorBoardWriter tb(dir);
    FAIL() << "no error";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find(dir), std::string::npos) << what;
    EXPECT_EQ(what.find('\n'), std::string::npos) << what;
  }
}

// Debian's libsentencepiece exports a protobuf of its own: both must keep
// working in one process (a trainer tokenizes and logs), each on its own copy.
TEST(TensorBoard, SentencePieceAndTensorBoardShareAProcess) {
  test::TempDir tmp;
  {
    std::ofstream text(tmp / "text.txt");
    for (int i = 1; i <= 300; ++i) text << data::number_to_english(i * 13) << "\n";
  }
  data::SpmTrainOptions o;
  o.inputs = {tmp / "text.txt"};
  o.model_prefix = tmp / "spm";
  o.vocab_size = 60;
  o.num_threads = 1;
  data::train_sentencepiece(o);
  TensorBoardWriter tb(tmp / "tensorboard");
  const data::Tokenizer tok = data::Tokenizer::load(tmp / "spm.model");
  const std::string sentence = "three hundred twenty-one";
  tb.scalar("tokens", 1, static_cast<double>(tok.encode(sentence).size()));
  EXPECT_EQ(tok.decode(tok.encode(sentence)), sentence);
  tb.close();
  const auto events = read_events(tb.path());
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[1].summary().value(0).simple_value(),
            static_cast<float>(tok.encode(sentence).size()));
}

// ---- read back by the tensorboard package ------------------------------------

struct Reader {
  int rc = -1;
  std::string out, err;
};

// tests/scripts/read_tensorboard.py LOGDIR: "TAG\tSTEP\tVALUE" lines.
Reader read_with_tensorboard(const std::string& python, const std::string& logdir,
                             const std::string& err_file) {
  const std::string cmd = "'" + python +
                          "' '" ROTOR_SOURCE_DIR "/tests/scripts/read_tensorboard.py' '" + logdir +
                          "' 2> '" + err_file + "'";
  Reader r;
  std::FILE* p = popen(cmd.c_str(), "r");
  if (!p) return r;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof(buf), p)) > 0) r.out.append(buf, n);
  const int status = pclose(p);
  r.rc = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  std::ifstream f(err_file);
  r.err.assign(std::istreambuf_iterator<char>(f), {});
  return r;
}

// tag -> [(step, value)]
using Scalars = std::map<std::string, std::vector<std::pair<int64_t, float>>>;

Scalars parse_scalars(const std::string& text) {
  Scalars s;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    std::string tag, step, value;
    EXPECT_TRUE(std::getline(fields, tag, '\t') && std::getline(fields, step, '\t') &&
                std::getline(fields, value))
        << line;
    s[tag].emplace_back(std::stoll(step), std::strtof(value.c_str(), nullptr));
  }
  return s;
}

// Skips unless a python3 with tensorboard is configured; returns its scalars.
#define ROTOR_READ_WITH_TENSORBOARD(tmp, logdir, scalars)                                      \
  const std::string python = ROTOR_TENSORBOARD_PYTHON;                                         \
  if (python.empty())                                                                          \
    GTEST_SKIP() << "no python3 with the tensorboard package (scripts/deps.sh --with-python)"; \
  const Reader reader = read_with_tensorboard(python, logdir, tmp / "reader.err");             \
  if (reader.rc == 77) GTEST_SKIP() << reader.err;                                             \
  ASSERT_EQ(reader.rc, 0) << reader.err;                                                       \
  const Scalars scalars = parse_scalars(reader.out)

void expect_float_eq(float got, float want, const std::string& where) {
  if (std::isnan(want))
    EXPECT_TRUE(std::isnan(got)) << where << ": " << got;
  else
    EXPECT_EQ(got, want) << where;
}

TEST(TensorBoard, ThePythonPackageReadsTagsStepsAndValues) {
  test::TempDir tmp;
  const std::string logdir = tmp / "tensorboard";
  Scalars want;
  {
    TensorBoardWriter tb(logdir);
    for (int64_t step = 0; step <= 400; step += 50) {
      const double loss = 8.0 / (1.0 + 0.01 * step), lr = 5e-4 * std::min<int64_t>(step, 100) / 100;
      tb.scalars(step, {{"train/loss", loss}, {"train/lr", lr}});
      want["train/loss"].emplace_back(step, static_cast<float>(loss));
      want["train/lr"].emplace_back(step, static_cast<float>(lr));
      if (step % 200 == 0) {
        const double bleu = step / 10.0 + 0.123;
        tb.scalar("valid/bleu", step, bleu);
        want["valid/bleu"].emplace_back(step, static_cast<float>(bleu));
      }
      tb.flush();
    }
    tb.scalar("train/grad_norm", 1000000007, std::nan(""));  // a diverged step
    want["train/grad_norm"].emplace_back(1000000007, NAN);
  }
  ROTOR_READ_WITH_TENSORBOARD(tmp, logdir, got);
  ASSERT_EQ(got.size(), want.size()) << reader.out;
  for (const auto& [tag, values] : want) {
    ASSERT_TRUE(got.count(tag)) << tag << " missing from:\n" << reader.out;
    const auto& g = got.at(tag);
    ASSERT_EQ(g.size(), values.size()) << tag;
    for (size_t i = 0; i < values.size(); ++i) {
      EXPECT_EQ(g[i].first, values[i].first) << tag << " #" << i;
      expect_float_eq(g[i].second, values[i].second, tag + " step " + std::to_string(g[i].first));
    }
  }
}

TEST(TensorBoard, ThePythonPackageDropsStepsAResumedRunRewrites) {
  test::TempDir tmp;
  const std::string logdir = tmp / "tensorboard";
  {
    TensorBoardWriter crashed(logdir);  // logged steps 1..5; its checkpoint was at step 2
    for (int step = 1; step <= 5; ++step) crashed.scalar("train/loss", step, 10.0 + step);
  }
  {
    TensorBoardWriter resumed(logdir);  // a later file of the same directory
    resumed.session_start(3);
    for (int step = 3; step <= 4; ++step) resumed.scalar("train/loss", step, 20.0 + step);
  }
  ROTOR_READ_WITH_TENSORBOARD(tmp, logdir, got);
  const std::vector<std::pair<int64_t, float>> want = {{1, 11.f}, {2, 12.f}, {3, 23.f}, {4, 24.f}};
  ASSERT_TRUE(got.count("train/loss")) << reader.out;
  EXPECT_EQ(got.at("train/loss"), want) << reader.out;
}

}  // namespace
}  // namespace rotor::train
