#include "checkpoint/npy.h"

#include "core/error.h"
#include "core/io.h"

namespace rotor::checkpoint {

void save_npy(const std::string& path, const Tensor& tensor) {
  const char* descr = tensor.dtype() == DType::F32   ? "<f4"
                      : tensor.dtype() == DType::I32 ? "<i4"
                                                     : nullptr;
  ROTOR_CHECK(descr != nullptr, "save_npy: {} tensors are not supported",
              dtype_name(tensor.dtype()));
  // A Python tuple: "(2, 3)", and "(2,)" for one dimension.
  std::string shape;
  for (int64_t i = 0; i < tensor.dim(); ++i)
    shape += (i ? ", " : "") + std::to_string(tensor.size(i));
  if (tensor.dim() == 1) shape += ",";
  std::string header =
      fmt::format("{{'descr': '{}', 'fortran_order': False, 'shape': ({}), }}", descr, shape);
  const size_t preamble = 10;  // magic (6), version (2), header length (2)
  header.append((64 - (preamble + header.size() + 1) % 64) % 64, ' ');
  header += '\n';
  ROTOR_CHECK(header.size() < 65536, "save_npy: header too long");
  std::string head = "\x93NUMPY";
  head += '\x01';
  head += '\x00';
  head += static_cast<char>(header.size() & 0xff);
  head += static_cast<char>(header.size() >> 8);
  const Tensor host = tensor.to(Device::cpu());
  AtomicFileWriter out(path);
  out.write(head);
  out.write(header);
  out.write(host.raw(), host.nbytes());
  out.commit();
}

}  // namespace rotor::checkpoint
