# The shared libraries a target machine provides and an installed rotor tree
# therefore does not bundle: glibc and the loader, the NVIDIA driver, CUDA
# (runtime, cuBLAS, NVRTC), cuDNN and NCCL. Sourced by scripts/install/bundle.sh
# (what to copy) and scripts/gpu/check_pack.sh (what may resolve outside).
provided() {
  case $1 in
    linux-vdso.so* | ld-linux*.so* | libc.so.* | libm.so.* | libdl.so.* | librt.so.* | \
      libpthread.so.* | libutil.so.* | libresolv.so.* | libmvec.so.*) return 0 ;;
    libcuda.so.* | libnvidia-*.so* | libcudart.so.* | libcublas.so.* | libcublasLt.so.* | \
      libnvrtc*.so* | libnvJitLink.so.* | libcudnn*.so.* | libnccl.so.*) return 0 ;;
  esac
  return 1
}
