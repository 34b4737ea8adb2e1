#include "train/tensorboard.h"

#include <unistd.h>

#include <boost/crc.hpp>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cstring>
#include <ctime>
#include <filesystem>

#include "core/error.h"
#include "core/io.h"
#include "train/tensorboard.pb.h"

namespace rotor::train {
namespace {

// CRC-32C: the Castagnoli polynomial, reflected, all-ones initial value and
// final XOR (RFC 3720, B.4).
using Crc32c = boost::crc_optimal<32, 0x1EDC6F41, 0xFFFFFFFF, 0xFFFFFFFF, true, true>;

double unix_seconds() {
  using namespace std::chrono;
  return duration_cast<duration<double>>(system_clock::now().time_since_epoch()).count();
}

std::string hostname() {
  char buf[HOST_NAME_MAX + 1] = {};
  if (gethostname(buf, sizeof(buf) - 1) != 0 || buf[0] == '\0') return "localhost";
  return buf;
}

// Opens a file that did not exist ("x": O_EXCL), so that two writers never
// share one; a taken name gets a ".N" suffix, which TensorBoard still reads
// (it takes every file whose name holds "tfevents") and sorts after the first.
std::FILE* open_new_event_file(const std::string& dir, std::string& path) {
  const std::string base = fmt::format("{}/events.out.tfevents.{}.{}.{}", dir,
                                       static_cast<long long>(std::time(nullptr)), hostname(),
                                       static_cast<long>(getpid()));
  for (int n = 0; n < 1000; ++n) {
    path = n == 0 ? base : fmt::format("{}.{}", base, n);
    if (std::FILE* f = std::fopen(path.c_str(), "wbx")) return f;
    if (errno != EEXIST)
      ROTOR_FAIL("cannot create TensorBoard file {}: {}", path, std::strerror(errno));
  }
  ROTOR_FAIL("cannot create TensorBoard file {}: 1000 files of that name exist", base);
}

void append_le(std::string& out, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

}  // namespace

uint32_t crc32c(std::string_view data) {
  Crc32c crc;
  crc.process_bytes(data.data(), data.size());
  return crc.checksum();
}

uint32_t masked_crc32c(std::string_view data) {
  const uint32_t crc = crc32c(data);
  // Masked because a CRC over bytes that embed CRCs (a file of records
  // stored inside another) is weak; TensorBoard checks the masked value.
  return ((crc >> 15) | (crc << 17)) + 0xa282ead8u;
}

TensorBoardWriter::TensorBoardWriter(const std::string& dir) {
  ensure_directory(dir);
  file_ = open_new_event_file(dir, path_);
  proto::Event event;
  event.set_wall_time(unix_seconds());
  event.set_file_version("brain.Event:2");
  try {
    write_record(event.SerializeAsString());
    flush();  // the file is a valid, empty run from the start
  } catch (...) {
    std::fclose(file_);  // no destructor runs for a throwing constructor
    throw;
  }
}

TensorBoardWriter::~TensorBoardWriter() {
  if (file_) std::fclose(file_);
}

TensorBoardWriter::TensorBoardWriter(TensorBoardWriter&& other) noexcept
    : path_(std::move(other.path_)), file_(other.file_) {
  other.file_ = nullptr;
  other.path_.clear();
}

TensorBoardWriter& TensorBoardWriter::operator=(TensorBoardWriter&& other) noexcept {
  if (this != &other) {
    if (file_) std::fclose(file_);
    path_ = std::move(other.path_);
    file_ = other.file_;
    other.file_ = nullptr;
    other.path_.clear();
  }
  return *this;
}

void TensorBoardWriter::scalar(std::string_view tag, int64_t step, double value) {
  scalars(step, {{std::string(tag), value}});
}

void TensorBoardWriter::scalars(int64_t step,
                                const std::vector<std::pair<std::string, double>>& values) {
  if (!file_) return;
  proto::Event event;
  event.set_wall_time(unix_seconds());
  event.set_step(step);
  proto::Summary* summary = event.mutable_summary();
  for (const auto& [tag, value] : values) {
    proto::Summary::Value* v = summary->add_value();
    v->set_tag(tag);
    v->set_simple_value(static_cast<float>(value));
  }
  write_record(event.SerializeAsString());
}

void TensorBoardWriter::session_start(int64_t step) {
  if (!file_) return;
  proto::Event event;
  event.set_wall_time(unix_seconds());
  event.set_step(step);
  event.mutable_session_log()->set_status(proto::SessionLog::START);
  write_record(event.SerializeAsString());
}

void TensorBoardWriter::write_record(const std::string& event) {
  std::string record;
  record.reserve(event.size() + 16);
  append_le(record, event.size(), 8);
  append_le(record, masked_crc32c(record), 4);  // of the 8 length bytes
  record += event;
  append_le(record, masked_crc32c(event), 4);
  if (std::fwrite(record.data(), 1, record.size(), file_) != record.size())
    ROTOR_FAIL("cannot write TensorBoard file {}: {}", path_, std::strerror(errno));
}

void TensorBoardWriter::flush() {
  if (file_ && std::fflush(file_) != 0)
    ROTOR_FAIL("cannot write TensorBoard file {}: {}", path_, std::strerror(errno));
}

void TensorBoardWriter::close() {
  if (!file_) return;
  std::FILE* f = file_;
  file_ = nullptr;
  const bool flushed = std::fflush(f) == 0;
  const int err = errno;
  if (std::fclose(f) != 0 || !flushed)
    ROTOR_FAIL("cannot write TensorBoard file {}: {}", path_, std::strerror(flushed ? errno : err));
}

}  // namespace rotor::train
