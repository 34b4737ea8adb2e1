// What the libFuzzer targets of tests/fuzz share (docs/testing.md, Fuzzing).
//
// A target's contract: bad input is answered by a rotor::Error. Any other
// exception escapes the target, and libFuzzer reports it as a crash (through
// std::terminate), as it does a sanitizer report, a timeout or a leak. A
// failed internal check (ROTOR_CHECK) aborts in the fuzz build
// (check_failure.cpp): input must be rejected before it breaks an invariant.
// require() states a property the target checks beyond "no crash" (e.g. what
// a reader accepts, its writer writes back the same).
#pragma once

#include <fcntl.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <string_view>

#include "core/error.h"

namespace rotor::fuzz {

[[noreturn]] inline void fail(std::string_view what) {
  std::fprintf(stderr, "fuzz: %.*s\n", static_cast<int>(what.size()), what.data());
  std::fflush(stderr);
  std::abort();  // libFuzzer writes the input as a crash reproducer
}

inline void require(bool ok, std::string_view what) {
  if (!ok) fail(what);
}

// Runs `f`; true when it returned, false when it threw a rotor::Error (the
// accepted answer to bad input). Other exceptions propagate.
template <class F>
bool accepts(F&& f) {
  try {
    f();
    return true;
  } catch (const Error&) {
    return false;
  }
}

inline std::string_view as_text(const uint8_t* data, size_t size) {
  return {reinterpret_cast<const char*>(data), size};
}

// A directory of this process for the files a target reads back: on
// /dev/shm when it exists (no disk traffic per input), removed at exit.
inline const std::string& scratch_dir() {
  struct Dir {
    std::string path;
    Dir() {
      std::string base = "/dev/shm";
      if (::access(base.c_str(), W_OK) != 0) {
        const char* tmp = std::getenv("TMPDIR");
        base = tmp && *tmp ? tmp : "/tmp";
      }
      std::string pattern = base + "/rotor-fuzz-XXXXXX";
      if (!::mkdtemp(pattern.data())) fail("cannot create a scratch directory in " + base);
      path = pattern;
    }
    ~Dir() {
      std::error_code ec;
      std::filesystem::remove_all(path, ec);
    }
  };
  static const Dir dir;
  return dir.path;
}

// Replaces the file at `path` with `bytes`.
inline void write_file(const std::string& path, std::string_view bytes) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) fail("cannot create " + path);
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n <= 0) fail("cannot write " + path);
    done += static_cast<size_t>(n);
  }
  ::close(fd);
}

}  // namespace rotor::fuzz
