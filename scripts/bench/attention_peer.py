#!/usr/bin/env python3
"""Peer timings for bench/attention (docs/design.md, Performance): PyTorch
scaled_dot_product_attention on its flash backend, with a separate rotary
step as Hugging Face RoFormer applies it (interleaved pairs, sin/cos tables,
q and k rotated before attention), at the shapes of docs/performance.md.

  python3 scripts/bench/attention_peer.py [--dtype bf16|fp16] [--causal]
                                          [--iters N] [--json peer.json]

Forward = split of the QKV projection output into heads + rotary + SDPA;
backward = the autograd backward of that graph. Prints a table; --json writes
{"results": [{"name", "fwd_ms", "bwd_ms", "fwdbwd_ms"}]} for
`bench_attention --peer peer.json`, which prints rotor's ratio to it.
Run both on the same machine in the same session.
"""
import argparse
import json
import math
import sys
import time

SHAPES = [(128, 32, 8, 64), (128, 64, 8, 64), (128, 128, 8, 64),
          (32, 512, 12, 64), (4, 4096, 16, 64), (4, 4096, 16, 128)]


def shape_name(B, T, H, D):
    return f"B{B}_T{T}_H{H}_D{D}"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dtype", choices=["bf16", "fp16"], default="bf16")
    ap.add_argument("--causal", action="store_true")
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--json", help="write the results here")
    args = ap.parse_args()
    try:
        import torch
        from torch.nn.attention import SDPBackend, sdpa_kernel
    except ImportError as e:
        sys.exit(f"attention_peer: PyTorch with torch.nn.attention is needed ({e})")
    if not torch.cuda.is_available():
        sys.exit("attention_peer: no GPU found")
    dt = torch.bfloat16 if args.dtype == "bf16" else torch.float16
    dev = torch.device("cuda")

    def rotary(x, sin, cos):
        # Hugging Face RoFormer: sin/cos repeated per pair, interleaved rotation.
        x1, x2 = x[..., 0::2], x[..., 1::2]
        rot = torch.stack([-x2, x1], dim=-1).reshape_as(x)
        return x * cos + rot * sin

    def timed(fn, iters):
        fn()
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(iters):
            fn()
        torch.cuda.synchronize()
        return (time.perf_counter() - t0) * 1e3 / iters

    results = []
    for B, T, H, D in SHAPES:
        d = H * D
        x = torch.full((B, T, 3 * d), 0.01, device=dev, dtype=dt, requires_grad=True)
        pos = torch.arange(T, device=dev, dtype=torch.float32)
        inv = 10000.0 ** (-torch.arange(0, D, 2, device=dev, dtype=torch.float32) / D)
        ang = pos[:, None] * inv[None, :]  # [T, D/2]
        sin = torch.repeat_interleave(torch.sin(ang), 2, dim=-1).to(dt)
        cos = torch.repeat_interleave(torch.cos(ang), 2, dim=-1).to(dt)
        dout = torch.full((B, H, T, D), 0.01, device=dev, dtype=dt)

        def forward():
            q, k, v = x.view(B, T, 3, H, D).permute(2, 0, 3, 1, 4).unbind(0)
            q, k = rotary(q, sin, cos), rotary(k, sin, cos)
            with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
                return torch.nn.functional.scaled_dot_product_attention(
                    q, k, v, is_causal=args.causal, scale=1.0 / math.sqrt(D))

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

        fwd_ms = timed(fwd, args.iters)
        fwd_graph()
        bwd_ms = timed(bwd, args.iters)
        fwdbwd_ms = timed(fwdbwd, args.iters)
        flop = 4.0 * B * H * T * T * D * (0.5 if args.causal else 1.0)
        results.append({"name": shape_name(B, T, H, D), "fwd_ms": fwd_ms, "bwd_ms": bwd_ms,
                        "fwdbwd_ms": fwdbwd_ms,
                        "fwd_tflops": flop / fwd_ms / 1e9,
                        "bwd_tflops": 2.5 * flop / bwd_ms / 1e9,
                        "fwdbwd_tflops": 3.5 * flop / fwdbwd_ms / 1e9})
        del out_holder["o"]

    print(f"PyTorch {torch.__version__} SDPA (flash) + HF-style rotary, {args.dtype}, "
          f"{'causal' if args.causal else 'non-causal'}, {torch.cuda.get_device_name()}")
    print(f"{'shape':<22} {'fwd ms':>9} {'bwd ms':>9} {'f+b ms':>9} "
          f"{'fwd TF/s':>9} {'bwd TF/s':>9} {'f+b TF/s':>9}")
    for r in results:
        print(f"{r['name']:<22} {r['fwd_ms']:9.3f} {r['bwd_ms']:9.3f} {r['fwdbwd_ms']:9.3f} "
              f"{r['fwd_tflops']:9.1f} {r['bwd_tflops']:9.1f} {r['fwdbwd_tflops']:9.1f}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"dtype": args.dtype, "causal": args.causal,
                       "device": torch.cuda.get_device_name(), "results": results}, f, indent=1)


if __name__ == "__main__":
    main()
