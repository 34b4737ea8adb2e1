#!/usr/bin/env python3
"""Peer timings for bench/attention (docs/design.md, Performance): PyTorch
scaled_dot_product_attention on its flash backend, with a separate rotary
step as Hugging Face RoFormer applies it (interleaved pairs, sin/cos tables,
q and k rotated before attention), at the shapes of docs/performance.md.

  python3 scripts/bench/attention_peer.py [--device cuda|cpu] [--dtype bf16|fp16|fp32]
                                          [--causal] [--iters N] [--json peer.json]
                                          [--shapes 'B,T,H,D;B,T,H,D...' | --tiny]

Forward = split of the QKV projection output into heads + rotary + SDPA;
backward = the autograd backward of that graph. Inputs are random, uniform in
[-1, 1] (as bench_attention's). Prints a table; --json writes
{"results": [{"name", "fwd_ms", "bwd_ms", "fwdbwd_ms"}]} for
`bench_attention --peer peer.json`, which prints rotor's ratio to it.
Run both on the same machine in the same session.

--device cuda (the default) runs bf16 or fp16 on SDPA's flash backend.
--device cpu runs fp32 on SDPA's math backend (the check that the script runs
on a machine without a GPU; the times mean nothing for the GPU). A torch
without scaled_dot_product_attention (before 2.0, e.g. Debian's 1.13) gets
the same math written out: softmax(q k^T * scale) v. --tiny is
--shapes '2,16,2,8;1,33,2,16' (and 2 iterations unless --iters is given).
"""
import argparse
import json
import math
import sys
import time

SHAPES = [(128, 32, 8, 64), (128, 64, 8, 64), (128, 128, 8, 64),
          (32, 512, 12, 64), (4, 4096, 16, 64), (4, 4096, 16, 128),
          (2, 8192, 16, 64), (2, 8192, 16, 128)]
TINY = [(2, 16, 2, 8), (1, 33, 2, 16)]


def shape_name(B, T, H, D):
    return f"B{B}_T{T}_H{H}_D{D}"


def parse_shapes(text):
    shapes = []
    for part in text.replace(" ", "").split(";"):
        if not part:
            continue
        fields = part.split(",")
        if len(fields) != 4 or not all(f.isdigit() and int(f) > 0 for f in fields):
            raise ValueError(f"--shapes: '{part}' is not B,T,H,D (positive integers)")
        shapes.append(tuple(int(f) for f in fields))
    if not shapes:
        raise ValueError("--shapes: no shape given")
    return shapes


def sdpa_context(torch, backend):
    """A context manager that restricts SDPA to `backend` ("flash" or "math"):
    torch.nn.attention.sdpa_kernel (torch 2.3+), else the deprecated
    torch.backends.cuda.sdp_kernel (2.0-2.2). Returns (context factory, name)."""
    try:
        from torch.nn.attention import SDPBackend, sdpa_kernel
        which = SDPBackend.FLASH_ATTENTION if backend == "flash" else SDPBackend.MATH
        return (lambda: sdpa_kernel(which)), f"sdpa {backend}"
    except ImportError:
        pass
    legacy = getattr(getattr(torch.backends, "cuda", None), "sdp_kernel", None)
    if legacy is not None:
        flags = dict(enable_flash=backend == "flash", enable_math=backend == "math",
                     enable_mem_efficient=False)
        return (lambda: legacy(**flags)), f"sdpa {backend} (torch.backends.cuda.sdp_kernel)"
    return None, None


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", choices=["cuda", "cpu"], default="cuda")
    ap.add_argument("--dtype", choices=["bf16", "fp16", "fp32"],
                    help="default: bf16 on cuda, fp32 on cpu")
    ap.add_argument("--causal", action="store_true")
    ap.add_argument("--iters", type=int, help="timed iterations per measure (default 20; --tiny 2)")
    ap.add_argument("--shapes", help="B,T,H,D;B,T,H,D... (default: docs/performance.md's)")
    ap.add_argument("--tiny", action="store_true", help="two tiny shapes (for a CPU check)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--json", help="write the results here")
    args = ap.parse_args()
    try:
        shapes = parse_shapes(args.shapes) if args.shapes else TINY if args.tiny else SHAPES
    except ValueError as e:
        ap.error(str(e))
    iters = max(1, args.iters if args.iters is not None else 2 if args.tiny else 20)
    dtype_name = args.dtype or ("bf16" if args.device == "cuda" else "fp32")
    try:
        import torch
    except ImportError as e:
        sys.exit(f"attention_peer: PyTorch is needed ({e})")
    if args.device == "cuda" and not torch.cuda.is_available():
        sys.exit("attention_peer: no GPU found")
    if args.device == "cuda" and dtype_name == "fp32":
        sys.exit("attention_peer: the flash backend takes bf16 or fp16 (fp32: --device cpu)")
    dt = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}[dtype_name]
    dev = torch.device(args.device)
    torch.manual_seed(args.seed)
    F = torch.nn.functional
    has_sdpa = hasattr(F, "scaled_dot_product_attention")
    context, backend = sdpa_context(torch, "flash" if args.device == "cuda" else "math")
    if args.device == "cuda" and (not has_sdpa or context is None):
        sys.exit(f"attention_peer: torch {torch.__version__} has no SDPA flash backend to time")
    if context is None or not has_sdpa:
        backend = "math written out (no scaled_dot_product_attention in this torch)"

    def attention(q, k, v, scale):
        if has_sdpa and context is not None:
            with context():
                try:
                    return F.scaled_dot_product_attention(q, k, v, is_causal=args.causal,
                                                          scale=scale)
                except TypeError:  # torch 2.0: no scale argument; the default is 1/sqrt(D)
                    return F.scaled_dot_product_attention(q * (scale * math.sqrt(q.shape[-1])),
                                                          k, v, is_causal=args.causal)
        s = torch.matmul(q, k.transpose(-2, -1)) * scale
        if args.causal:
            # SDPA's is_causal: query i sees keys 0..i (Tq = Tk here).
            mask = torch.ones(s.shape[-2], s.shape[-1], dtype=torch.bool, device=s.device).triu(1)
            s = s.masked_fill(mask, float("-inf"))
        return torch.matmul(torch.softmax(s, dim=-1), v)

    def rotary(x, sin, cos):
        # Hugging Face RoFormer: sin/cos repeated per pair, interleaved rotation.
        x1, x2 = x[..., 0::2], x[..., 1::2]
        rot = torch.stack([-x2, x1], dim=-1).reshape_as(x)
        return x * cos + rot * sin

    def sync():
        if args.device == "cuda":
            torch.cuda.synchronize()

    def timed(fn, n):
        fn()
        sync()
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        sync()
        return (time.perf_counter() - t0) * 1e3 / n

    def uniform(*size):  # uniform in [-1, 1], as bench_attention fills its inputs
        return (torch.rand(*size, device=dev, dtype=torch.float32) * 2 - 1).to(dt)

    results = []
    for B, T, H, D in shapes:
        d = H * D
        x = uniform(B, T, 3 * d).requires_grad_(True)
        pos = torch.arange(T, device=dev, dtype=torch.float32)
        inv = 10000.0 ** (-torch.arange(0, D, 2, device=dev, dtype=torch.float32) / D)
        ang = pos[:, None] * inv[None, :]  # [T, D/2]
        sin = torch.repeat_interleave(torch.sin(ang), 2, dim=-1).to(dt)
        cos = torch.repeat_interleave(torch.cos(ang), 2, dim=-1).to(dt)
        dout = uniform(B, H, T, D)

        def forward():
            q, k, v = x.view(B, T, 3, H, D).permute(2, 0, 3, 1, 4).unbind(0)
            q, k = rotary(q, sin, cos), rotary(k, sin, cos)
            return attention(q, k, v, 1.0 / math.sqrt(D))

        out_holder = {}

        def fwd():
            with torch.no_grad():
                forward()

        def fwd_graph():
            out_holder["o"] = forward()

        def bwd():
            out_holder["o"].backward(dout, retain_graph=True)

        def fwdbwd():
            forward().backward(dout)

        fwd_ms = timed(fwd, iters)
        fwd_graph()
        bwd_ms = timed(bwd, iters)
        fwdbwd_ms = timed(fwdbwd, iters)
        flop = 4.0 * B * H * T * T * D * (0.5 if args.causal else 1.0)
        results.append({"name": shape_name(B, T, H, D), "fwd_ms": fwd_ms, "bwd_ms": bwd_ms,
                        "fwdbwd_ms": fwdbwd_ms,
                        "fwd_tflops": flop / fwd_ms / 1e9,
                        "bwd_tflops": 2.5 * flop / bwd_ms / 1e9,
                        "fwdbwd_tflops": 3.5 * flop / fwdbwd_ms / 1e9})
        del out_holder["o"]

    device_name = torch.cuda.get_device_name() if args.device == "cuda" else "cpu"
    print(f"PyTorch {torch.__version__} {backend} + HF-style rotary, {dtype_name}, "
          f"{'causal' if args.causal else 'non-causal'}, {device_name}")
    print(f"{'shape':<22} {'fwd ms':>9} {'bwd ms':>9} {'f+b ms':>9} "
          f"{'fwd TF/s':>9} {'bwd TF/s':>9} {'f+b TF/s':>9}")
    for r in results:
        print(f"{r['name']:<22} {r['fwd_ms']:9.3f} {r['bwd_ms']:9.3f} {r['fwdbwd_ms']:9.3f} "
              f"{r['fwd_tflops']:9.1f} {r['bwd_tflops']:9.1f} {r['fwdbwd_tflops']:9.1f}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"dtype": dtype_name, "causal": args.causal, "device": device_name,
                       "torch": torch.__version__, "backend": backend, "iters": iters,
                       "results": results}, f, indent=1)


if __name__ == "__main__":
    main()
