// The files `rotor synth` writes. Its output directory may already hold a
// user's own data under the same names (data/train.en is a common layout), so
// synth records what it writes in DIR/synth.json (each file's size and hash,
// core/hash.h) and replaces only files it recorded, unchanged since: any other
// file of one of its names stops it before anything is written. Links are
// followed to their targets; FIFOs and character devices are written into
// (core/io.h).
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace rotor::data {

// The record's name in the output directory.
inline constexpr const char* kSynthRecord = "synth.json";

// Writes `files` (name in `dir`, contents) into `dir` (made when missing),
// each atomically (core/io.h), then the record. A rotor::Error, with nothing
// written, when a file of one of those names exists and is not recorded as
// written by synth with its present size and hash, or when synth.json exists
// and is not synth's. `task` names the data set in the record of each file.
void write_synth_files(const std::string& dir, const std::string& task,
                       const std::vector<std::pair<std::string, std::string>>& files);

}  // namespace rotor::data
