#include "checkpoint/safetensors.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <set>

#include "core/error.h"
#include "core/io.h"
#include "core/json_io.h"

namespace rotor::checkpoint {

using json_io::Json;

static_assert(std::endian::native == std::endian::little,
              "safetensors data is little-endian; rotor writes host memory as is");

namespace {

// A header larger than this is corruption, not a checkpoint (the reference
// implementation uses the same bound).
constexpr uint64_t kMaxHeaderBytes = 100ull << 20;
// The header object, a tensor's object, its shape: deeper is not safetensors.
constexpr int kMaxHeaderDepth = 3;

struct DTypeName {
  DType dtype;
  const char* name;
};
constexpr DTypeName kDTypes[] = {{DType::F32, "F32"},
                                 {DType::F16, "F16"},
                                 {DType::BF16, "BF16"},
                                 {DType::I32, "I32"},
                                 {DType::U8, "U8"}};
// Valid safetensors dtypes that rotor has no tensors for.
constexpr const char* kForeignDTypes[] = {"F64", "I64", "U64",  "I16",     "U16",
                                          "I8",  "U32", "BOOL", "F8_E4M3", "F8_E5M2"};

void check_name(const std::string& name, std::set<std::string>& seen) {
  if (name.empty()) ROTOR_FAIL("safetensors: a tensor name is empty");
  if (name == "__metadata__") ROTOR_FAIL("safetensors: \"__metadata__\" cannot name a tensor");
  if (!json_io::is_valid_utf8(name))
    ROTOR_FAIL("safetensors: tensor name {} is not valid UTF-8", json_quote(name));
  if (!seen.insert(name).second) ROTOR_FAIL("safetensors: tensor name \"{}\" appears twice", name);
}

// The header, padded with spaces so that 8 + its length is a multiple of 8.
std::string build_header(const NamedTensors& tensors, const Metadata& metadata) {
  Json header = Json::object();
  if (!metadata.empty()) {
    Json meta = Json::object();
    for (const auto& [k, v] : metadata) {
      if (!json_io::is_valid_utf8(k) || !json_io::is_valid_utf8(v))
        ROTOR_FAIL("safetensors: metadata {} is not valid UTF-8", json_quote(k));
      if (meta.contains(k)) ROTOR_FAIL("safetensors: metadata key \"{}\" appears twice", k);
      meta[k] = v;
    }
    header["__metadata__"] = std::move(meta);
  }
  std::set<std::string> seen;
  uint64_t offset = 0;
  for (const auto& [name, t] : tensors) {
    check_name(name, seen);
    if (!t.defined()) ROTOR_FAIL("safetensors: tensor \"{}\" is undefined", name);
    Json shape = Json::array();
    for (int64_t d : t.shape()) shape.push_back(d);
    Json entry = Json::object();
    entry["dtype"] = safetensors_dtype_name(t.dtype());
    entry["shape"] = std::move(shape);
    entry["data_offsets"] = Json::array({offset, offset + t.nbytes()});
    header[name] = std::move(entry);
    offset += t.nbytes();
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');
  return text;
}

std::string length_prefix(uint64_t n) {
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i)
    out[static_cast<size_t>(i)] = static_cast<char>((n >> (8 * i)) & 0xff);
  return out;
}

// Calls sink(bytes, n) for the header and then every tensor's data.
template <class Sink>
void serialize(const NamedTensors& tensors, const Metadata& metadata, Sink&& sink) {
  std::string header = build_header(tensors, metadata);
  std::string prefix = length_prefix(header.size());
  sink(prefix.data(), prefix.size());
  sink(header.data(), header.size());
  for (const auto& [name, t] : tensors) {
    if (t.numel() == 0) continue;
    Tensor host = t.is_cpu() ? t : t.to(Device::cpu());
    sink(host.raw(), host.nbytes());
  }
}

}  // namespace

const char* safetensors_dtype_name(DType t) {
  for (const auto& d : kDTypes)
    if (d.dtype == t) return d.name;
  ROTOR_CHECK(false, "dtype {} has no safetensors name", static_cast<int>(t));
  return "";
}

std::string safetensors_bytes(const NamedTensors& tensors, const Metadata& metadata) {
  std::string out;
  serialize(tensors, metadata,
            [&](const void* p, size_t n) { out.append(static_cast<const char*>(p), n); });
  return out;
}

void save_safetensors(const std::string& path, const NamedTensors& tensors,
                      const Metadata& metadata) {
  try {
    AtomicFileWriter writer(path);
    serialize(tensors, metadata, [&](const void* p, size_t n) { writer.write(p, n); });
    writer.commit();
  } catch (const std::exception& e) {
    if (std::string(e.what()).find(path) != std::string::npos) throw;
    throw with_context(path, e);
  }
}

// ---- reading --------------------------------------------------------------

namespace {

class HeaderError {
 public:
  explicit HeaderError(const std::string& path) : path_(path) {}
  template <class... Args>
  [[noreturn]] void operator()(fmt::format_string<Args...> f, Args&&... args) const {
    throw Error(path_ + ": " + fmt::format(f, std::forward<Args>(args)...));
  }

 private:
  const std::string& path_;
};

void read_exact(int fd, void* dst, uint64_t bytes, uint64_t offset, const std::string& path) {
  char* p = static_cast<char*>(dst);
  while (bytes > 0) {
    size_t chunk = static_cast<size_t>(std::min<uint64_t>(bytes, 1ull << 30));
    ssize_t n = ::pread(fd, p, chunk, static_cast<off_t>(offset));
    if (n < 0) {
      if (errno == EINTR) continue;
      ROTOR_FAIL("{}: read failed: {}", path, std::strerror(errno));
    }
    if (n == 0) ROTOR_FAIL("{}: file is truncated (ends at byte {})", path, offset);
    p += n;
    bytes -= static_cast<uint64_t>(n);
    offset += static_cast<uint64_t>(n);
  }
}

// nlohmann reads a literal with no sign, fraction or exponent as unsigned.
uint64_t non_negative_int(const Json& v, const HeaderError& fail, const std::string& what) {
  if (!v.is_number_unsigned()) fail("{}: expected a non-negative integer, got {}", what, v.dump());
  return v.get<uint64_t>();
}

}  // namespace

SafetensorsFile::SafetensorsFile(const std::string& path) : path_(path) {
  HeaderError fail(path_);
  // O_NONBLOCK: a FIFO named model.safetensors must not block open(); the
  // fstat() below refuses it (and devices) before anything is read.
  fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
  if (fd_ < 0) ROTOR_FAIL("cannot open {}: {}", path, std::strerror(errno));
  try {
    struct stat st {};
    if (::fstat(fd_, &st) != 0) fail("cannot stat: {}", std::strerror(errno));
    if (S_ISDIR(st.st_mode)) fail("is a directory, not a safetensors file");
    if (!S_ISREG(st.st_mode))
      fail("is {}, not a regular file", file_kind(static_cast<unsigned>(st.st_mode)));
    ::fcntl(fd_, F_SETFL, ::fcntl(fd_, F_GETFL) & ~O_NONBLOCK);
    uint64_t file_size = static_cast<uint64_t>(st.st_size);
    if (file_size < 8)
      fail("truncated: {} bytes, too short for the 8-byte header length", file_size);
    unsigned char len_bytes[8];
    read_exact(fd_, len_bytes, 8, 0, path_);
    uint64_t n = 0;
    for (int i = 7; i >= 0; --i) n = (n << 8) | len_bytes[i];
    if (n > kMaxHeaderBytes) fail("header length {} is implausible (not a safetensors file?)", n);
    if (n < 2) fail("header length {} is too small for a JSON object", n);
    if (8 + n > file_size)
      fail("truncated: the header needs {} bytes but the file has {}", 8 + n, file_size);
    std::string text(static_cast<size_t>(n), '\0');
    read_exact(fd_, text.data(), n, 8, path_);
    data_start_ = 8 + n;
    uint64_t data_size = file_size - data_start_;

    // Errors: "PATH: header:LINE:COLUMN: not valid JSON: ...". The depth
    // bound stops a hostile header as soon as it nests deeper than the format.
    const Json header = json_io::parse(text, path_ + ": header", kMaxHeaderDepth);
    if (!header.is_object())
      fail("header is {}, expected a JSON object", json_io::type_name(header));

    // ordered_json keeps the file's order; the parser rejected repeated keys.
    for (const auto& [name, value] : header.get_ref<const Json::object_t&>()) {
      if (name == "__metadata__") {
        if (!value.is_object())
          fail("__metadata__ is {}, expected an object", json_io::type_name(value));
        for (const auto& [k, v] : value.get_ref<const Json::object_t&>()) {
          if (!v.is_string())
            fail("__metadata__.{}: expected a string, got {}", k, json_io::type_name(v));
          metadata_.emplace_back(k, v.get<std::string>());
        }
        continue;
      }
      // What the writer refuses (check_name) is not read either: a file
      // rotor reads, it can write back.
      if (name.empty()) fail("a tensor name is empty");
      if (!value.is_object())
        fail("tensor \"{}\": expected an object, got {}", name, json_io::type_name(value));
      SafetensorsEntry e;
      e.name = name;
      const auto dtype = value.find("dtype");
      const auto shape = value.find("shape");
      const auto offsets = value.find("data_offsets");
      if (dtype == value.end() || shape == value.end() || offsets == value.end())
        fail("tensor \"{}\": missing \"{}\"", name,
             dtype == value.end()   ? "dtype"
             : shape == value.end() ? "shape"
                                    : "data_offsets");
      if (!dtype->is_string())
        fail("tensor \"{}\": dtype is {}, expected a string", name, json_io::type_name(*dtype));
      const std::string& dname = dtype->get_ref<const std::string&>();
      bool known = false;
      for (const auto& d : kDTypes)
        if (dname == d.name) e.dtype = d.dtype, known = true;
      if (!known) {
        for (const char* f : kForeignDTypes)
          if (dname == f)
            fail("tensor \"{}\": dtype {} is not supported (rotor reads F32, F16, BF16, I32, U8)",
                 name, dname);
        fail("tensor \"{}\": unknown dtype {}", name, json_quote(dname));
      }
      if (!shape->is_array())
        fail("tensor \"{}\": shape is {}, expected an array", name, json_io::type_name(*shape));
      uint64_t numel = 1;
      bool overflow = false;
      for (const auto& d : *shape) {
        uint64_t dim = non_negative_int(d, fail, "tensor \"" + name + "\": shape");
        if (dim > (1ull << 62)) overflow = true;
        e.shape.push_back(static_cast<int64_t>(dim));
        if (dim != 0 && numel > (1ull << 62) / dim) overflow = true;
        numel *= dim;
      }
      if (overflow) fail("tensor \"{}\": shape {} is too large", name, shape->dump());
      if (!offsets->is_array() || offsets->size() != 2)
        fail("tensor \"{}\": data_offsets must be [begin, end], got {}", name, offsets->dump());
      e.begin = non_negative_int((*offsets)[0], fail, "tensor \"" + name + "\": data_offsets");
      e.end = non_negative_int((*offsets)[1], fail, "tensor \"" + name + "\": data_offsets");
      if (e.end < e.begin)
        fail("tensor \"{}\": data_offsets [{}, {}] end before begin", name, e.begin, e.end);
      if (e.end > data_size)
        fail(
            "tensor \"{}\": data_offsets [{}, {}] out of range: the data section has {} bytes "
            "(truncated file?)",
            name, e.begin, e.end, data_size);
      uint64_t expect = numel * dtype_size(e.dtype);
      if (e.end - e.begin != expect)
        fail("tensor \"{}\": {} {} needs {} bytes but data_offsets [{}, {}] hold {}", name, dname,
             shape->dump(), expect, e.begin, e.end, e.end - e.begin);
      entries_.push_back(std::move(e));
    }

    // The tensors must tile the data section: no overlap, no hole, nothing after.
    std::vector<const SafetensorsEntry*> order;
    for (const auto& e : entries_) order.push_back(&e);
    std::sort(order.begin(), order.end(), [](const SafetensorsEntry* a, const SafetensorsEntry* b) {
      return a->begin != b->begin ? a->begin < b->begin : a->end < b->end;
    });
    uint64_t cursor = 0;
    const SafetensorsEntry* prev = nullptr;
    for (const SafetensorsEntry* e : order) {
      if (e->begin < cursor)
        fail("tensors \"{}\" and \"{}\" overlap (data_offsets [{}, {}] and [{}, {}])", prev->name,
             e->name, prev->begin, prev->end, e->begin, e->end);
      if (e->begin > cursor)
        fail("bytes [{}, {}) of the data belong to no tensor", cursor, e->begin);
      cursor = e->end;
      if (e->end > e->begin || !prev) prev = e;
    }
    if (cursor != data_size)
      fail("{} bytes after the last tensor belong to no tensor (the data section has {})",
           data_size - cursor, data_size);
  } catch (...) {
    close();
    throw;
  }
}

SafetensorsFile::~SafetensorsFile() {
  close();
}

SafetensorsFile::SafetensorsFile(SafetensorsFile&& other) noexcept
    : path_(std::move(other.path_)),
      fd_(other.fd_),
      data_start_(other.data_start_),
      entries_(std::move(other.entries_)),
      metadata_(std::move(other.metadata_)) {
  other.fd_ = -1;
}

SafetensorsFile& SafetensorsFile::operator=(SafetensorsFile&& other) noexcept {
  if (this != &other) {
    close();
    path_ = std::move(other.path_);
    fd_ = other.fd_;
    data_start_ = other.data_start_;
    entries_ = std::move(other.entries_);
    metadata_ = std::move(other.metadata_);
    other.fd_ = -1;
  }
  return *this;
}

void SafetensorsFile::close() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

std::vector<std::string> SafetensorsFile::names() const {
  std::vector<std::string> out;
  for (const auto& e : entries_) out.push_back(e.name);
  return out;
}

const SafetensorsEntry* SafetensorsFile::find(const std::string& name) const {
  for (const auto& e : entries_)
    if (e.name == name) return &e;
  return nullptr;
}

const SafetensorsEntry& SafetensorsFile::entry(const std::string& name) const {
  const SafetensorsEntry* e = find(name);
  if (!e) ROTOR_FAIL("{}: no tensor named \"{}\"", path_, name);
  return *e;
}

std::string SafetensorsFile::metadata_value(const std::string& key,
                                            const std::string& fallback) const {
  for (const auto& [k, v] : metadata_)
    if (k == key) return v;
  return fallback;
}

Tensor SafetensorsFile::load(const std::string& name) const {
  const SafetensorsEntry& e = entry(name);
  ROTOR_CHECK(fd_ >= 0, "{}: file is closed", path_);
  Tensor t = Tensor::empty(e.shape, e.dtype, Device::cpu());
  ROTOR_CHECK(t.nbytes() == e.end - e.begin, "{}: size of \"{}\" changed", path_, name);
  if (t.nbytes() > 0) read_exact(fd_, t.raw(), t.nbytes(), data_start_ + e.begin, path_);
  return t;
}

NamedTensors load_safetensors(const std::string& path) {
  SafetensorsFile file(path);
  NamedTensors out;
  for (const auto& e : file.entries()) out.emplace_back(e.name, file.load(e.name));
  return out;
}

void require_finite(const NamedTensors& tensors, const std::string& where, const std::string& why) {
  for (const auto& [name, t] : tensors) {
    if (!is_floating(t.dtype())) continue;
    const std::vector<float> v = t.to_floats();
    for (size_t i = 0; i < v.size(); ++i)
      if (!std::isfinite(v[i]))
        ROTOR_FAIL("{}: {} holds a non-finite value ({} at element {}); {}", where, name, v[i], i,
                   why);
  }
}

}  // namespace rotor::checkpoint
