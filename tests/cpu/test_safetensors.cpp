// The safetensors writer and reader (src/train/safetensors.h).
#include <cstring>
#include <filesystem>
#include <fstream>

#include "checkpoint/safetensors.h"
#include "core/error.h"
#include "core/io.h"
#include "core/philox.h"
#include "support/test_util.h"

namespace rotor {
namespace {
using namespace rotor::checkpoint;  // NOLINT: tests name the checkpoint API unqualified
namespace fs = std::filesystem;

std::string le64(uint64_t n) {
  std::string s(8, '\0');
  for (int i = 0; i < 8; ++i) s[static_cast<size_t>(i)] = static_cast<char>((n >> (8 * i)) & 0xff);
  return s;
}

// A file from a header text (padded here only when asked) and raw data.
std::string make_file(std::string header, const std::string& data, bool pad = true) {
  if (pad) header.append((8 - header.size() % 8) % 8, ' ');
  return le64(header.size()) + header + data;
}

// A plain write (no fsync): the loops below write hundreds of files.
void write_plain(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

std::string raw_bytes(const Tensor& t) {
  return std::string(static_cast<const char*>(t.raw()), t.nbytes());
}

// The message of the rotor::Error that opening `bytes` as a file throws.
std::string open_error(const std::string& bytes) {
  test::TempDir tmp;
  std::string path = tmp / "bad.safetensors";
  atomic_write_file(path, bytes);
  try {
    SafetensorsFile f(path);
    for (const auto& e : f.entries()) f.load(e.name);
  } catch (const Error& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find("bad.safetensors"), std::string::npos) << msg;
    return msg;
  }
  ADD_FAILURE() << "no error for a corrupt file";
  return "";
}

TEST(Safetensors, RoundTripsEveryDtypeAndMetadata) {
  test::TempDir tmp;
  NamedTensors tensors = {
      {"encoder.weight", test::random_tensor({3, 5}, 1)},
      {"half", Tensor::from_floats(test::random_floats(7, 2), {7}, DType::F16)},
      {"bhalf", Tensor::from_floats(test::random_floats(6, 3), {2, 3}, DType::BF16)},
      {"ints", Tensor::from_ints({-1, 0, 7, 2147483647}, {2, 2})},
      {"bytes", Tensor::from_bytes({0, 1, 255}, {3})},
      {"scalar", Tensor::from_floats({42.5f}, {})},
      {"empty", Tensor::zeros({0, 4})},
  };
  Metadata meta = {
      {"format", "pt"}, {"rotor.step", "123"}, {"note", "quote \" and\nnewline \xc3\xa9"}};
  std::string path = tmp / "model.safetensors";
  save_safetensors(path, tensors, meta);

  SafetensorsFile f(path);
  EXPECT_EQ(f.metadata(), meta);
  EXPECT_EQ(f.metadata_value("rotor.step"), "123");
  EXPECT_EQ(f.metadata_value("absent", "dflt"), "dflt");
  ASSERT_EQ(f.entries().size(), tensors.size());
  for (size_t i = 0; i < tensors.size(); ++i) {
    const auto& [name, t] = tensors[i];
    EXPECT_EQ(f.entries()[i].name, name);  // order kept
    const SafetensorsEntry& e = f.entry(name);
    EXPECT_EQ(e.dtype, t.dtype()) << name;
    EXPECT_EQ(e.shape, t.shape()) << name;
    Tensor back = f.load(name);
    EXPECT_TRUE(back.is_cpu());
    EXPECT_EQ(back.dtype(), t.dtype());
    EXPECT_EQ(back.shape(), t.shape());
    EXPECT_EQ(raw_bytes(back), raw_bytes(t)) << name;
  }
  EXPECT_THROW(f.load("nope"), Error);
  EXPECT_FALSE(f.contains("nope"));

  NamedTensors all = load_safetensors(path);
  ASSERT_EQ(all.size(), tensors.size());
  EXPECT_EQ(all[3].second.to_ints(), (std::vector<int32_t>{-1, 0, 7, 2147483647}));
}

TEST(Safetensors, ByteLayoutMatchesAHandBuiltFile) {
  Tensor a = Tensor::from_floats({1.0f, -2.0f}, {2});
  Tensor b = Tensor::from_bytes({1, 2, 3}, {1, 3});
  std::string header =
      R"({"__metadata__":{"format":"pt"},"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
      R"("b":{"dtype":"U8","shape":[1,3],"data_offsets":[8,11]}})";
  std::string padded = header + std::string((8 - header.size() % 8) % 8, ' ');
  ASSERT_EQ(padded.size() % 8, 0u);
  float fa[2] = {1.0f, -2.0f};
  std::string data(reinterpret_cast<const char*>(fa), 8);
  data += std::string("\x01\x02\x03", 3);
  std::string expected = le64(padded.size()) + padded + data;

  std::string bytes = safetensors_bytes({{"a", a}, {"b", b}}, {{"format", "pt"}});
  EXPECT_EQ(bytes, expected);
  test::TempDir tmp;
  save_safetensors(tmp / "x.safetensors", {{"a", a}, {"b", b}}, {{"format", "pt"}});
  EXPECT_EQ(read_file(tmp / "x.safetensors"), expected);
  // No metadata: no "__metadata__" key at all.
  EXPECT_EQ(safetensors_bytes({{"b", b}}).substr(8, 7), R"({"b":{")");
}

TEST(Safetensors, ReadsFilesInAnyTensorOrder) {
  // As other writers lay them out: data in a different order than the header.
  std::string header =
      R"({"z":{"dtype":"I32","shape":[1],"data_offsets":[4,8]}, "y":{"dtype":"I32","shape":[1],"data_offsets":[0,4]}})";
  int32_t vals[2] = {11, 22};
  std::string file = make_file(header, std::string(reinterpret_cast<const char*>(vals), 8));
  test::TempDir tmp;
  atomic_write_file(tmp / "o.safetensors", file);
  SafetensorsFile f(tmp / "o.safetensors");
  EXPECT_EQ(f.names(), (std::vector<std::string>{"z", "y"}));
  EXPECT_EQ(f.load("z").to_ints(), std::vector<int32_t>{22});
  EXPECT_EQ(f.load("y").to_ints(), std::vector<int32_t>{11});
}

TEST(Safetensors, CorruptFilesAreClearErrors) {
  const std::string ok_entry = R"("t":{"dtype":"F32","shape":[2],"data_offsets":[0,8]})";
  const std::string data8(8, '\0');
  auto has = [](const std::string& msg, const char* what) {
    EXPECT_NE(msg.find(what), std::string::npos) << "message: " << msg << "\nexpected: " << what;
  };
  has(open_error(""), "too short");
  has(open_error("abc"), "too short");
  has(open_error(le64(100) + "{}"), "truncated");
  has(open_error(le64(uint64_t{1} << 62) + "{}"), "implausible");
  has(open_error(make_file("{\"t\": [1,", data8)), "not valid JSON");
  has(open_error(make_file("not json at all", data8)), "not valid JSON");
  has(open_error(make_file("[1, 2]", "")), "expected a JSON object");
  has(open_error(make_file("{" + ok_entry + "}", "1234")), "out of range");
  has(open_error(make_file(R"({"t":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                           R"("u":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
                           data8)),
      "overlap");
  has(open_error(make_file(R"({"t":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})", data8)),
      "belong to no tensor");
  has(open_error(make_file("{" + ok_entry + "}", data8 + "xx")), "after the last tensor");
  has(open_error(make_file(R"({"t":{"dtype":"Q7","shape":[2],"data_offsets":[0,8]}})", data8)),
      "unknown dtype \"Q7\"");
  has(open_error(make_file(R"({"t":{"dtype":"F64","shape":[1],"data_offsets":[0,8]}})", data8)),
      "not supported");
  has(open_error(make_file(R"({"t":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", data8)),
      "needs 12 bytes");
  has(open_error(make_file(R"({"t":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}})", data8)),
      "non-negative integer");
  has(open_error(make_file(R"({"t":{"dtype":"F32","shape":[2.5],"data_offsets":[0,8]}})", data8)),
      "non-negative integer");
  has(open_error(make_file(R"({"t":{"dtype":"F32","shape":[2],"data_offsets":[8,0]}})", data8)),
      "end before begin");
  has(open_error(make_file(R"({"t":{"dtype":"F32","shape":[2],"data_offsets":[0]}})", data8)),
      "data_offsets must be");
  has(open_error(make_file(R"({"t":{"dtype":"F32","shape":[2]}})", data8)),
      "missing \"data_offsets\"");
  has(open_error(make_file(R"({"t":[1]})", data8)), "expected an object");
  // A name the writer refuses (found by fuzz_safetensors: read, then not written back).
  has(open_error(make_file(R"({"":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", data8)),
      "a tensor name is empty");
  has(open_error(make_file(R"({"__metadata__":{"k":1},)" + ok_entry + "}", data8)),
      "__metadata__.k: expected a string");
  has(open_error(make_file(
          R"({"t":{"dtype":"F32","shape":[4611686018427387904,4],"data_offsets":[0,8]}})", data8)),
      "too large");
  // A repeated tensor name, and nesting deeper than the format's three levels
  // (checked as the header is read: a hostile one fails before it is built).
  has(open_error(make_file("{" + ok_entry + "," + ok_entry + "}", data8)), "duplicate key \"t\"");
  has(open_error(make_file(R"({"t":{"dtype":"F32","shape":[[2]],"data_offsets":[0,8]}})", data8)),
      "nesting deeper than 3 levels");
  has(open_error(make_file(R"({"__metadata__":{"k":{"x":["y"]}}})", "")),
      "nesting deeper than 3 levels");
  has(open_error(make_file(std::string(1 << 20, '['), "")), "nesting deeper than 3 levels");
  // Parse errors are rotor's: position and what is wrong, no library tags.
  const std::string msg = open_error(make_file("{\"t\": [1,", data8));
  has(msg, "header:1:");
  EXPECT_EQ(msg.find("json.exception"), std::string::npos) << msg;
}

TEST(Safetensors, EveryTruncationIsAnError) {
  std::string good = safetensors_bytes(
      {{"w", test::random_tensor({3, 2}, 5)}, {"b", Tensor::from_bytes({9}, {1})}}, {{"k", "v"}});
  test::TempDir tmp;
  std::string path = tmp / "t.safetensors";
  for (size_t n = 0; n < good.size(); ++n) {
    write_plain(path, good.substr(0, n));
    EXPECT_THROW(SafetensorsFile{path}, Error) << "truncated to " << n << " bytes";
  }
}

TEST(Safetensors, RandomCorruptionNeverCrashes) {
  std::string good =
      safetensors_bytes({{"w", test::random_tensor({4}, 6)}, {"i", Tensor::from_ints({1, 2}, {2})}},
                        {{"format", "pt"}});
  test::TempDir tmp;
  std::string path = tmp / "c.safetensors";
  PhiloxRng rng(7, 0);
  int errors = 0;
  for (int trial = 0; trial < 400; ++trial) {
    std::string bytes = good;
    int flips = 1 + static_cast<int>(rng.below(3));
    for (int k = 0; k < flips; ++k)
      bytes[rng.below(bytes.size())] = static_cast<char>(rng.below(256));
    write_plain(path, bytes);
    try {
      SafetensorsFile f(path);
      for (const auto& e : f.entries()) f.load(e.name);
    } catch (const Error&) {
      ++errors;
    }
  }
  EXPECT_GT(errors, 0);
}

TEST(Safetensors, WriterRejectsBadNamesAndLeavesNoTempFile) {
  test::TempDir tmp;
  Tensor t = Tensor::zeros({2});
  std::string path = tmp / "w.safetensors";
  EXPECT_THROW(save_safetensors(path, {{"a", t}, {"a", t}}), Error);
  EXPECT_THROW(save_safetensors(path, {{"", t}}), Error);
  EXPECT_THROW(save_safetensors(path, {{"__metadata__", t}}), Error);
  EXPECT_THROW(save_safetensors(path, {{"bad\xff", t}}), Error);
  EXPECT_THROW(save_safetensors(path, {{"undefined", Tensor()}}), Error);
  EXPECT_FALSE(fs::exists(path));
  save_safetensors(path, {{"a", t}});
  std::vector<std::string> files;
  for (const auto& e : fs::directory_iterator(tmp.path()))
    files.push_back(e.path().filename().string());
  EXPECT_EQ(files, std::vector<std::string>{"w.safetensors"});
  EXPECT_THROW(SafetensorsFile(tmp / "missing.safetensors"), Error);
}

TEST(Safetensors, GpuTensorsAreCopiedToTheHost) {
  ROTOR_REQUIRE_GPU();
  test::TempDir tmp;
  Tensor host = test::random_tensor({4, 3}, 9);
  save_safetensors(tmp / "g.safetensors", {{"g", host.to(Device::cuda(0))}});
  EXPECT_EQ(raw_bytes(SafetensorsFile(tmp / "g.safetensors").load("g")), raw_bytes(host));
}

}  // namespace
}  // namespace rotor
