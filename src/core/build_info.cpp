#include "core/build_info.h"

#include <fmt/format.h>
#include <omp.h>
#include <spdlog/version.h>
#include <yaml-cpp/yaml.h>

#include "core/cuda_context.h"

#if ROTOR_WITH_MPI
#include <mpi.h>
#endif
#if ROTOR_ONEDNN_GEMM
#include <oneapi/dnnl/dnnl.h>
#endif

namespace rotor {

std::string build_info_text(const std::string& cpu_kernels) {
  const std::string extra = cpu_kernels.empty() ? "" : ", " + cpu_kernels;
  std::string s;
  s += fmt::format("rotor {}\n", ROTOR_VERSION);
  s += fmt::format("  build:      {} ({})\n", ROTOR_BUILD_TYPE, ROTOR_CXX_COMPILER);
#if ROTOR_ONEDNN_GEMM
  const dnnl_version_t* dnnl = dnnl_version();
  s += fmt::format("  cpu:        oneDNN {}.{}.{} GEMM{}, OpenMP with {} threads\n", dnnl->major,
                   dnnl->minor, dnnl->patch, extra, omp_get_max_threads());
#else
  s += fmt::format("  cpu:        OpenBLAS GEMM{}, OpenMP with {} threads\n", extra,
                   omp_get_max_threads());
#endif
  s +=
      fmt::format("  spdlog:     {}.{}.{}\n", SPDLOG_VER_MAJOR, SPDLOG_VER_MINOR, SPDLOG_VER_PATCH);
#if ROTOR_WITH_MPI
  s += fmt::format("  mpi:        yes (MPI {}.{})\n", MPI_VERSION, MPI_SUBVERSION);
#else
  s += "  mpi:        no\n";
#endif
#if ROTOR_WITH_GLOO
  s += "  gloo:       yes (collectives without MPI: rotor launch, srun without PMIx)\n";
#else
  s += "  gloo:       no\n";
#endif
#if ROTOR_WITH_CUDA
  s += fmt::format("  cuda:       yes (architectures {})\n", ROTOR_CUDA_ARCHS);
  s += fmt::format("  cuda runtime {}, driver {}\n", cuda::runtime_version(),
                   cuda::driver_version());
  s += fmt::format("  cublasLt {}, cuDNN {}, NCCL {}\n", cuda::cublas_version(),
                   cuda::cudnn_version(), cuda::nccl_version());
#else
  s += "  cuda:       no (built with ROTOR_CUDA=OFF or without nvcc)\n";
#endif
  auto devs = cuda::devices();
  if (devs.empty()) {
    s += "devices:\n  cpu\nno GPU found: using CPU\n";
  } else {
    s += "devices:\n  cpu\n";
    for (auto& d : devs)
      s += fmt::format("  cuda:{}  {} (sm_{}{}, {:.1f} GiB, {} SMs)\n", d.index, d.name, d.cc_major,
                       d.cc_minor, d.total_memory / 1073741824.0, d.multiprocessors);
  }
  return s;
}

}  // namespace rotor
