// The PTX wrappers of kernels/flash_attention_tc.cu (its `// ---- PTX
// wrappers` section), emulated lane by lane as the PTX ISA defines them, on
// cuda_emulation.h's thread block. Included inside `namespace
// rotor::kernels { namespace {` in place of that section: by
// flash_tc_emulate.cpp (the device code alone) and, through `emulate_cu.py
// --emulate-ptx`, by the emulated device's copy of the whole file
// (tests/emulation/device). flash_tc_emulate.cpp's header comment describes
// each emulation.
// A shared-memory address is the offset into the block's shared memory.
inline uint32_t smem_u32(const void* p) {
  const auto* c = static_cast<const unsigned char*>(p);
  if (!emu::t_blk || c < emu::t_blk->smem || c > emu::t_blk->smem + emu::t_blk->smem_bytes)
    emu::fail("smem_u32 of a pointer outside shared memory");
  return static_cast<uint32_t>(c - emu::t_blk->smem);
}

inline void cp_async16(uint32_t dst, const void* src, bool valid) {
  if (dst % 16 != 0 || reinterpret_cast<uintptr_t>(src) % 16 != 0)
    emu::fail("cp.async address not 16-byte aligned");
  // Until the copy is waited for, the destination holds anything.
  std::memset(emu::shared_at(dst, 16), 0xff, 16);
  emu::t_issued.push_back({dst, src, valid});
}
inline void cp_async_commit() {
  emu::t_groups.push_back(std::move(emu::t_issued));
  emu::t_issued.clear();
}
template <int N>
inline void cp_async_wait() {
  while (emu::t_groups.size() > static_cast<size_t>(N)) {
    for (const emu::Copy& c : emu::t_groups.front()) {
      unsigned char* d = emu::shared_at(c.dst, 16);
      if (c.valid)
        std::memcpy(d, c.src, 16);
      else
        std::memset(d, 0, 16);
    }
    emu::t_groups.pop_front();
  }
}

// 16-bit element `col` of the 8-element row at shared address row_addr.
inline uint32_t ldsm_element(uint32_t row_addr, int col) {
  uint16_t e;
  std::memcpy(&e, emu::shared_at(row_addr + 2 * col, 2), 2);
  return e;
}
template <int N, bool Trans>
inline void ldsm(uint32_t* r, const void* p) {
  const uint32_t a = smem_u32(p);
  const emu::Slot& s =
      emu::collective(1 + N + (Trans ? 4 : 0), [&](emu::Slot& s) { s.addr[emu::lane()] = a; });
  const int g = emu::lane() >> 2, t = emu::lane() & 3;
  for (int m = 0; m < N; ++m) {
    for (int l = 8 * m; l < 8 * m + 8; ++l)
      if (s.addr[l] % 16 != 0) emu::fail("ldmatrix row address not 16-byte aligned");
    // The (row address, column) of the low and the high element.
    const uint32_t lo_row = s.addr[8 * m + (Trans ? 2 * t : g)],
                   hi_row = s.addr[8 * m + (Trans ? 2 * t + 1 : g)];
    const int lo_col = Trans ? g : 2 * t, hi_col = Trans ? g : 2 * t + 1;
    r[m] = ldsm_element(lo_row, lo_col) | ldsm_element(hi_row, hi_col) << 16;
  }
}
inline void ldsm_x4(uint32_t (&r)[4], const void* p) {
  ldsm<4, false>(r, p);
}
inline void ldsm_x4_t(uint32_t (&r)[4], const void* p) {
  ldsm<4, true>(r, p);
}
inline void ldsm_x2_t(uint32_t (&r)[2], const void* p) {
  ldsm<2, true>(r, p);
}

// The 16-bit element in half `hi` of register x as a float.
template <class T>
inline float element(uint32_t x, int hi) {
  const uint16_t bits = static_cast<uint16_t>(hi ? x >> 16 : x & 0xffffu);
  if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    __nv_bfloat16_raw raw;
    raw.x = bits;
    return __bfloat162float(__nv_bfloat16(raw));
  } else {
    __half_raw raw;
    raw.x = bits;
    return __half2float(__half(raw));
  }
}

template <class T>
inline void mma16816(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  const emu::Slot& s =
      emu::collective(std::is_same_v<T, __nv_bfloat16> ? 21 : 20, [&](emu::Slot& s) {
        for (int i = 0; i < 4; ++i) s.a[emu::lane()][i] = a[i];
        s.b[emu::lane()][0] = b0;
        s.b[emu::lane()][1] = b1;
      });
  // The tiles from every lane's fragments (lane 4g + t).
  float A[16][16], B[16][8];
  for (int l = 0; l < 32; ++l) {
    const int g = l >> 2, t = l & 3;
    for (int h = 0; h < 2; ++h) {
      A[g][2 * t + h] = element<T>(s.a[l][0], h);
      A[g + 8][2 * t + h] = element<T>(s.a[l][1], h);
      A[g][2 * t + 8 + h] = element<T>(s.a[l][2], h);
      A[g + 8][2 * t + 8 + h] = element<T>(s.a[l][3], h);
      B[2 * t + h][g] = element<T>(s.b[l][0], h);
      B[2 * t + 8 + h][g] = element<T>(s.b[l][1], h);
    }
  }
  const int g = emu::lane() >> 2, t = emu::lane() & 3;
  for (int e = 0; e < 4; ++e) {
    const int row = g + (e < 2 ? 0 : 8), col = 2 * t + (e & 1);
    double dot = 0;
    for (int k = 0; k < 16; ++k) dot += static_cast<double>(A[row][k]) * B[k][col];
    c[e] += static_cast<float>(dot);
  }
}
