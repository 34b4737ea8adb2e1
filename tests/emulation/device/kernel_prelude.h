// Included by the emulated device's kernel files after kernel_emulation.h
// (tests/emulation/CMakeLists.txt generates them): their launchers call the
// emulated device's runtime (runtime.cpp), which checks every copy and
// memset against the device's allocations, instead of the stand-ins
// kernel_emulation.h gives a launcher run alone.
#pragma once

#include "device/device_memory.h"

#undef cudaGetLastError
#undef cudaMemsetAsync
#undef cudaMemcpyAsync
#undef cudaFuncSetAttribute
#undef cudaGetDevice
#undef cudaDeviceGetAttribute

// cuda_runtime.h's C++ overload for a kernel (nvcc's alone).
template <class T>
cudaError_t cudaFuncSetAttribute(T* kernel, cudaFuncAttribute attr, int value) {
  return ::cudaFuncSetAttribute(reinterpret_cast<const void*>(kernel), attr, value);
}

// Linear attention's dynamic shared memory (kernels/linear_attention_device.cuh).
#define ROTOR_LINATTN_SHARED_FLOATS(name) \
  float* name = reinterpret_cast<float*>(::emu::shared_memory())

// An emulated kernel has code for the emulated device: binary and PTX of its
// architecture (flash_tc_device_ok and the Volta kernels ask).
// runtime.cpp's C function answers for the kernels of the CUDA build's own
// objects, which have none.
template <class T>
cudaError_t cudaFuncGetAttributes(cudaFuncAttributes* attr, T*) {
  *attr = cudaFuncAttributes{};
  attr->binaryVersion = emu_device::sm();
  attr->ptxVersion = emu_device::sm();
  attr->maxThreadsPerBlock = 1024;
  attr->maxDynamicSharedSizeBytes = 48 << 10;
  return cudaSuccess;
}
