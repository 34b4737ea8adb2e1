// TensorBoard scalars: an event file that `tensorboard --logdir DIR` and the
// `tensorboard` Python package read.
//
//   TensorBoardWriter tb(output_dir + "/tensorboard");
//   tb.scalar("train/loss", step, loss);
//   tb.scalars(step, {{"valid/loss", vloss}, {"valid/bleu", bleu}});  // one event
//   tb.flush();  // after each log interval, so that a running job can be watched
//
// The file is DIR/events.out.tfevents.<unix seconds>.<hostname>.<pid>: its
// first record an Event with file_version "brain.Event:2", then one Event per
// call with a Summary of (tag, simple_value) pairs, the step and the wall time.
// A record is framed as TensorBoard reads it: the length (uint64, little
// endian), the masked CRC-32C of those 8 bytes, the serialized Event, the
// masked CRC-32C of the Event. The messages are protobuf (tensorboard.proto
// beside this file), the CRC Boost.CRC's (docs/design.md, "Libraries").
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace rotor::train {

// CRC-32C (Castagnoli) of `data`, and the masked form TensorBoard's records
// carry: ((crc >> 15) | (crc << 17)) + 0xa282ead8.
uint32_t crc32c(std::string_view data);
uint32_t masked_crc32c(std::string_view data);

class TensorBoardWriter {
 public:
  TensorBoardWriter() = default;  // closed: every call does nothing (e.g. on ranks other than 0)
  // Creates `dir` when missing and a new event file in it (never an existing
  // one: a second writer in the same second gets a ".1" suffix), and writes
  // the file_version record. Failure is a rotor::Error naming the path.
  explicit TensorBoardWriter(const std::string& dir);
  ~TensorBoardWriter();  // flushes and closes; errors are lost (call close() to see them)
  TensorBoardWriter(TensorBoardWriter&& other) noexcept;
  TensorBoardWriter& operator=(TensorBoardWriter&& other) noexcept;
  TensorBoardWriter(const TensorBoardWriter&) = delete;
  TensorBoardWriter& operator=(const TensorBoardWriter&) = delete;

  bool is_open() const { return file_ != nullptr; }
  // The event file ("" when closed).
  const std::string& path() const { return path_; }

  // One Event with one value. Values are stored as float (TensorBoard's
  // simple_value); a NaN or an infinity is written as it is.
  void scalar(std::string_view tag, int64_t step, double value);
  // One Event holding every (tag, value) pair, in order.
  void scalars(int64_t step, const std::vector<std::pair<std::string, double>>& values);
  // Marks a resumed run: TensorBoard then drops the events written earlier
  // (in any file of the directory) whose step is >= `step`, as the resumed
  // run writes those steps again. Call it once, before the first scalar.
  void session_start(int64_t step);

  // Hands the buffered records to the operating system, so that TensorBoard
  // sees them. Failure is a rotor::Error naming the file.
  void flush();
  // Flushes and closes; later calls do nothing.
  void close();

 private:
  // Frames one serialized Event and appends it to the file's buffer.
  void write_record(const std::string& event);

  std::string path_;
  std::FILE* file_ = nullptr;
};

}  // namespace rotor::train
