// Files (src/core/io.h), metrics lines (src/train/metrics.h) and the logger
// (src/core/logging.h).
#include <filesystem>
#include <fstream>

#include "core/error.h"
#include "core/io.h"
#include "core/json_io.h"
#include "core/logging.h"
#include "support/test_util.h"
#include "train/metrics.h"

namespace rotor {
namespace {
namespace fs = std::filesystem;

std::vector<std::string> dir_entries(const std::string& dir) {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(dir)) out.push_back(e.path().filename().string());
  std::sort(out.begin(), out.end());
  return out;
}

TEST(Io, ReadFileRoundTripsBinary) {
  test::TempDir tmp;
  std::string bytes("a\0b\xff\n", 5);
  atomic_write_file(tmp / "f.bin", bytes);
  EXPECT_EQ(read_file(tmp / "f.bin"), bytes);
  atomic_write_file(tmp / "empty", "");
  EXPECT_EQ(read_file(tmp / "empty"), "");
}

TEST(Io, ReadFileErrorsNameThePath) {
  test::TempDir tmp;
  try {
    read_file(tmp / "missing.txt");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("missing.txt"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("No such file"), std::string::npos) << e.what();
  }
  EXPECT_THROW(read_file(tmp.path()), Error);  // a directory
}

TEST(Io, AtomicWriteReplacesAndLeavesNoTempFile) {
  test::TempDir tmp;
  std::string path = tmp / "state.json";
  atomic_write_file(path, "old");
  atomic_write_file(path, "new contents");
  EXPECT_EQ(read_file(path), "new contents");
  EXPECT_EQ(dir_entries(tmp.path()), std::vector<std::string>{"state.json"});
}

TEST(Io, AbandonedWriteLeavesTheOldFileIntact) {
  test::TempDir tmp;
  std::string path = tmp / "ckpt.bin";
  atomic_write_file(path, "the old checkpoint");
  try {
    AtomicFileWriter w(path);
    w.write("half of a new chec");
    EXPECT_TRUE(fs::exists(w.temp_path()));
    throw std::runtime_error("crash while writing");  // never commits
  } catch (const std::runtime_error&) {
  }
  EXPECT_EQ(read_file(path), "the old checkpoint");
  EXPECT_EQ(dir_entries(tmp.path()), std::vector<std::string>{"ckpt.bin"});
}

TEST(Io, FailedRenameLeavesNoTempFile) {
  test::TempDir tmp;
  // The target is a non-empty directory: rename(2) fails after the data was written.
  fs::create_directories(tmp / "target/inside");
  EXPECT_THROW(atomic_write_file(tmp / "target", "data"), Error);
  EXPECT_EQ(dir_entries(tmp.path()), std::vector<std::string>{"target"});
  EXPECT_TRUE(fs::is_directory(tmp / "target/inside"));
  // A missing parent directory is a clear error, not a crash.
  EXPECT_THROW(atomic_write_file(tmp / "no/such/dir/file", "x"), Error);
}

TEST(Io, PublishDirectoryIsAllOrNothing) {
  test::TempDir tmp;
  std::string ckpt = tmp / "checkpoint_10";
  publish_directory(ckpt, [](const std::string& d) {
    atomic_write_file(d + "/model.safetensors", "weights v1");
    atomic_write_file(d + "/state.json", "{}");
  });
  EXPECT_EQ(read_file(ckpt + "/model.safetensors"), "weights v1");
  // Replacing an existing directory.
  publish_directory(ckpt, [](const std::string& d) {
    atomic_write_file(d + "/model.safetensors", "weights v2");
  });
  EXPECT_EQ(read_file(ckpt + "/model.safetensors"), "weights v2");
  EXPECT_FALSE(fs::exists(ckpt + "/state.json"));
  // A failure while filling leaves the published one and no temporary.
  EXPECT_THROW(publish_directory(ckpt,
                                 [](const std::string& d) {
                                   atomic_write_file(d + "/model.safetensors", "partial");
                                   ROTOR_FAIL("disk full");
                                 }),
               Error);
  EXPECT_EQ(read_file(ckpt + "/model.safetensors"), "weights v2");
  EXPECT_EQ(dir_entries(tmp.path()), std::vector<std::string>{"checkpoint_10"});
}

TEST(Io, JsonQuote) {
  EXPECT_EQ(json_quote("plain"), "\"plain\"");
  EXPECT_EQ(json_quote("a\"b\\c\n\t\x01\x7f"), "\"a\\\"b\\\\c\\n\\t\\u0001\\u007f\"");
  EXPECT_EQ(json_quote("\xc3\xa9"), "\"\xc3\xa9\"");
  std::string all;
  for (int c = 1; c < 128; ++c) all.push_back(static_cast<char>(c));
  EXPECT_EQ(json_io::parse(json_quote(all), "quoted").get<std::string>(), all);
}

TEST(Metrics, JsonLinesInInsertionOrder) {
  test::TempDir tmp;
  std::string path = tmp / "run/metrics.jsonl";  // parent created
  {
    MetricsWriter w(path);
    w.write(MetricsRecord()
                .add("split", "train")
                .add("step", 100)
                .add("loss", 2.345678f)
                .add("lr", 5e-4)
                .add("best", true));
    w.write(
        MetricsRecord().add("z", int64_t{-3}).add("a", std::numeric_limits<double>::quiet_NaN()));
  }
  {
    MetricsWriter w(path);  // a resumed run appends
    w.write(MetricsRecord().add("step", 200).add("loss", 1.0 / 3.0));
  }
  std::ifstream in(path);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  ASSERT_EQ(lines.size(), 3u);
  // A float as the float it is (2.345678f, not 2.3450000286102295); NaN as null.
  EXPECT_EQ(lines[0], R"({"split":"train","step":100,"loss":2.345678,"lr":0.0005,"best":true})");
  EXPECT_EQ(lines[1], R"({"z":-3,"a":null})");
  const json_io::Json third = json_io::parse(lines[2], "metrics.jsonl");
  EXPECT_EQ(third.at("loss").get<double>(), 1.0 / 3.0);  // full precision
  EXPECT_EQ(third.begin().key(), "step");
}

TEST(Metrics, ClosedWriterIgnoresRecords) {
  MetricsWriter w;
  EXPECT_FALSE(w.is_open());
  w.write(MetricsRecord().add("step", 1));
  test::TempDir tmp;
  fs::create_directories(tmp / "d");
  EXPECT_THROW(MetricsWriter(tmp / "d"), Error);  // a directory
}

TEST(Logging, FileSinkAndLevels) {
  test::TempDir tmp;
  std::string file = tmp / "out/train.log";
  setup_logging({.level = "debug", .file = file});
  log().debug("debug line {}", 1);
  log().trace("trace line");
  flush_log();
  std::string text = read_file(file);
  EXPECT_NE(text.find("debug line 1"), std::string::npos);
  EXPECT_EQ(text.find("trace line"), std::string::npos);
  // A muted rank writes no file and logs only errors.
  setup_logging({.level = "info", .file = tmp / "rank1.log", .rank = 1, .world_size = 2});
  EXPECT_FALSE(log().should_log(spdlog::level::info));
  EXPECT_TRUE(log().should_log(spdlog::level::err));
  EXPECT_FALSE(fs::exists(tmp / "rank1.log"));
  EXPECT_THROW(parse_log_level("verbose"), Error);
  EXPECT_EQ(parse_log_level("warning"), spdlog::level::warn);
  setup_logging({});
}

}  // namespace
}  // namespace rotor
