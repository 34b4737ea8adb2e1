#!/usr/bin/env python3
"""The fragment indexing of kernels/flash_attention_tc.cu, checked without a GPU.

Emulates ldmatrix (.x2/.x4, with and without .trans) and
mma.sync.aligned.m16n8k16 as the PTX ISA defines their register fragments
(lane = 4 g + t; A: a0 = A[g][2t..], a1 = A[g+8][2t..], a2 = A[g][2t+8..],
a3 = A[g+8][2t+8..]; B: b0 = B[2t..][g], b1 = B[2t+8..][g]; C: c0,c1 =
C[g][2t..], c2,c3 = C[g+8][2t..]) and runs the kernel's address expressions,
copied by hand from the source, on random tiles: forward S = Q K^T and P V
(the C fragments of S reused as the A fragment), backward S^T = K Q^T,
dP^T = V dO^T, dV = P^T dO, dK = dS^T Q, and dQ = dS K through the dS^T tile
in shared memory, for D = 32, 64 and 128. The softmax, masks, dropout and
RoPE are not emulated. Keep it in step with the kernel when its tiling
changes.

  python3 tests/emulation/flash_tc_fragments.py   (needs NumPy)
"""
import sys

try:
    import numpy as np
except ImportError:
    print("flash_tc_fragments: skipped (no NumPy)")
    sys.exit(77)
rng = np.random.default_rng(0)

def ldsm(tile, addr, n, trans=False):
    # addr(lane) -> (row, col): start of the 8-element row for matrix lane//8.
    mats = []
    for m in range(n):
        M = np.zeros((8, 8))
        for r in range(8):
            row, col = addr(8 * m + r)
            M[r] = tile[row, col:col + 8]
        mats.append(M)
    regs = np.zeros((32, n, 2))
    for L in range(32):
        g, t = L // 4, L % 4
        for m in range(n):
            if trans:
                regs[L, m] = [mats[m][2 * t][g], mats[m][2 * t + 1][g]]
            else:
                regs[L, m] = mats[m][g][2 * t:2 * t + 2]
    return regs

def mma(c, a, b0, b1):
    # c [32,4], a [32,4,2], b0/b1 [32,2]
    A = np.zeros((16, 16)); B = np.zeros((16, 8))
    for L in range(32):
        g, t = L // 4, L % 4
        A[g, 2*t:2*t+2] = a[L, 0]; A[g+8, 2*t:2*t+2] = a[L, 1]
        A[g, 2*t+8:2*t+10] = a[L, 2]; A[g+8, 2*t+8:2*t+10] = a[L, 3]
        B[2*t:2*t+2, g] = b0[L]; B[2*t+8:2*t+10, g] = b1[L]
    C = A @ B
    out = c.copy()
    for L in range(32):
        g, t = L // 4, L % 4
        out[L, 0:2] += C[g, 2*t:2*t+2]; out[L, 2:4] += C[g+8, 2*t:2*t+2]
    return out

def c_to_mat(frags, rows, cols):
    # frags[nt] [32,4] -> matrix [16, 8*len]
    M = np.zeros((16, 8 * len(frags)))
    for nt, c in enumerate(frags):
        for L in range(32):
            g, t = L // 4, L % 4
            M[g, nt*8+2*t:nt*8+2*t+2] = c[L, 0:2]; M[g+8, nt*8+2*t:nt*8+2*t+2] = c[L, 2:4]
    return M

def pack_a(s, kk):
    # pa = {s[2kk][0,1], s[2kk][2,3], s[2kk+1][0,1], s[2kk+1][2,3]}
    a = np.zeros((32, 4, 2))
    a[:, 0] = s[2*kk][:, 0:2]; a[:, 1] = s[2*kk][:, 2:4]
    a[:, 2] = s[2*kk+1][:, 0:2]; a[:, 3] = s[2*kk+1][:, 2:4]
    return a

def fwd(D, BQ=64, BK=64):
    LDS = D + 8
    sQ = np.zeros((BQ, LDS)); sK = np.zeros((BK, LDS)); sV = np.zeros((BK, LDS))
    Q = rng.standard_normal((BQ, D)); K = rng.standard_normal((BK, D)); V = rng.standard_normal((BK, D))
    sQ[:, :D] = Q; sK[:, :D] = K; sV[:, :D] = V
    KS, NT, ND = D // 16, BK // 8, D // 8
    for warp in range(4):
        qf = [ldsm(sQ, lambda l, ks=ks: (warp*16 + (l & 15), ks*16 + (l >> 4)*8), 4) for ks in range(KS)]
        s = [np.zeros((32, 4)) for _ in range(NT)]
        for ks in range(KS):
            for nt in range(0, NT, 2):
                kf = ldsm(sK, lambda l: (nt*8 + (l & 7) + (l >> 4)*8, ks*16 + ((l >> 3) & 1)*8), 4)
                s[nt] = mma(s[nt], qf[ks], kf[:, 0], kf[:, 1])
                s[nt+1] = mma(s[nt+1], qf[ks], kf[:, 2], kf[:, 3])
        S = c_to_mat(s, 16, BK)
        assert np.allclose(S, Q[warp*16:warp*16+16] @ K.T), "S"
        # P = S (no softmax: checks the P V product indexing)
        o = [np.zeros((32, 4)) for _ in range(ND)]
        for kk in range(BK // 16):
            pa = pack_a(s, kk)
            for nd in range(0, ND, 2):
                vf = ldsm(sV, lambda l: (kk*16 + (l & 7) + ((l >> 3) & 1)*8, nd*8 + (l >> 4)*8), 4, trans=True)
                o[nd] = mma(o[nd], pa, vf[:, 0], vf[:, 1])
                o[nd+1] = mma(o[nd+1], pa, vf[:, 2], vf[:, 3])
        O = c_to_mat(o, 16, D)
        assert np.allclose(O, S @ V), "PV"
    print("fwd ok D", D)

def bwd(D):
    BK = 64; BQ = 32 if D >= 128 else 64; LDS = D + 8; LDP = BQ + 8
    KS, NQ, ND, MQ, NDW = D//16, BQ//8, D//8, BQ//16, D//32
    NDC = 2 if NDW > 2 else NDW
    Q = rng.standard_normal((BQ, D)); K = rng.standard_normal((BK, D)); V = rng.standard_normal((BK, D)); dO = rng.standard_normal((BQ, D))
    sQ = np.zeros((BQ, LDS)); sK = np.zeros((BK, LDS)); sV = np.zeros((BK, LDS)); sdO = np.zeros((BQ, LDS))
    sQ[:, :D] = Q; sK[:, :D] = K; sV[:, :D] = V; sdO[:, :D] = dO
    sdS = np.zeros((BK, LDP))
    dS_full = np.zeros((BK, BQ))  # dS^T as written
    gks, gvs = {}, {}
    for warp in range(4):
        st = [np.zeros((32, 4)) for _ in range(NQ)]; dpt = [np.zeros((32, 4)) for _ in range(NQ)]
        for ks in range(KS):
            ka = ldsm(sK, lambda l: (warp*16 + (l & 15), ks*16 + (l >> 4)*8), 4)
            va = ldsm(sV, lambda l: (warp*16 + (l & 15), ks*16 + (l >> 4)*8), 4)
            for nq in range(0, NQ, 2):
                addr = lambda l: (nq*8 + (l & 7) + (l >> 4)*8, ks*16 + ((l >> 3) & 1)*8)
                qf = ldsm(sQ, addr, 4); of = ldsm(sdO, addr, 4)
                st[nq] = mma(st[nq], ka, qf[:, 0], qf[:, 1]); st[nq+1] = mma(st[nq+1], ka, qf[:, 2], qf[:, 3])
                dpt[nq] = mma(dpt[nq], va, of[:, 0], of[:, 1]); dpt[nq+1] = mma(dpt[nq+1], va, of[:, 2], of[:, 3])
        ST = c_to_mat(st, 16, BQ); DPT = c_to_mat(dpt, 16, BQ)
        Kw, Vw = K[warp*16:warp*16+16], V[warp*16:warp*16+16]
        assert np.allclose(ST, Kw @ Q.T), "S^T"
        assert np.allclose(DPT, Vw @ dO.T), "dP^T"
        # use P := S^T, dS := dP^T (indexing check)
        for nq in range(NQ):
            for L in range(32):
                g, t = L // 4, L % 4
                sdS[warp*16+g, nq*8+t*2:nq*8+t*2+2] = dpt[nq][L, 0:2]
                sdS[warp*16+g+8, nq*8+t*2:nq*8+t*2+2] = dpt[nq][L, 2:4]
        gv = [np.zeros((32, 4)) for _ in range(ND)]; gk = [np.zeros((32, 4)) for _ in range(ND)]
        for kk in range(BQ // 16):
            pa = pack_a(st, kk); da = pack_a(dpt, kk)
            for nd in range(0, ND, 2):
                addr = lambda l: (kk*16 + (l & 7) + ((l >> 3) & 1)*8, nd*8 + (l >> 4)*8)
                of = ldsm(sdO, addr, 4, trans=True); qf = ldsm(sQ, addr, 4, trans=True)
                gv[nd] = mma(gv[nd], pa, of[:, 0], of[:, 1]); gv[nd+1] = mma(gv[nd+1], pa, of[:, 2], of[:, 3])
                gk[nd] = mma(gk[nd], da, qf[:, 0], qf[:, 1]); gk[nd+1] = mma(gk[nd+1], da, qf[:, 2], qf[:, 3])
        assert np.allclose(c_to_mat(gv, 16, D), ST @ dO), "dV"
        assert np.allclose(c_to_mat(gk, 16, D), DPT @ Q), "dK"
    dST = sdS[:, :BQ]
    dQ = np.zeros((BQ, D))
    for warp in range(4):
        for n0 in range(0, NDW, NDC):
            gq = [[np.zeros((32, 4)) for _ in range(NDC)] for _ in range(MQ)]
            for kk in range(BK // 16):
                kf = []
                for nd in range(NDC):
                    col = warp*(D//4) + (n0+nd)*8
                    r = ldsm(sK, lambda l: (kk*16 + (l & 7) + ((l >> 3) & 1)*8, col), 2, trans=True)
                    kf.append(r)
                for mq in range(MQ):
                    af = ldsm(sdS, lambda l: (kk*16 + (l & 7) + (l >> 4)*8, mq*16 + ((l >> 3) & 1)*8), 4, trans=True)
                    for nd in range(NDC):
                        gq[mq][nd] = mma(gq[mq][nd], af, kf[nd][:, 0], kf[nd][:, 1])
            for mq in range(MQ):
                for L in range(32):
                    g, t = L // 4, L % 4
                    for e in range(4):
                        i = mq*16 + g + (0 if e < 2 else 8)
                        for nd in range(NDC):
                            col = warp*(D//4) + n0*8 + t*2 + (e & 1) + nd*8
                            dQ[i, col] += gq[mq][nd][L, e]
    assert np.allclose(dQ, dST.T @ K), "dQ"
    print("bwd ok D", D)

for D in (32, 64, 128):
    fwd(D); bwd(D)
