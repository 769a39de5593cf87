"""Filter products through the packed micro-kernel against OpenBLAS, in one process.

    python benchmarks/packed_products.py [--rounds 15] [--calls 20] [--channels-last]
                                         [--products WORDS] [--out FILE]

For the products of ``pointwise`` and ``col2im-ncx`` on the layers of
``benchmarks/prepared_calls.py`` and larger ones (large filters of few positions too),
``c[n] = A @ b[n]`` with ``A`` ``(M, K)`` and ``b`` ``(N, K, P)`` float32 (``--channels-last``: the same sizes as
``c = b @ A`` with ``b`` ``(N*P, K)`` and ``A`` ``(K, M)``, the products of channels-last
``pointwise``; ``--products``: those whose names contain one of these comma-separated
words), it times in alternating rounds: the packed
kernel (``_kernels/_numba/packed.py``) on one thread and on all of the library's,
NumPy's product on one OpenBLAS thread and on OpenBLAS's own threads, and the
library's own BLAS calls on one thread, one per sample as the kernels make them:
through ``ctypes`` (``_runtime/blas.gemm``) and from compiled code
(``_kernels/_numba/native_gemm.serial_gemm``), in that order, then pauses for 0.2 s: OpenBLAS's workers spin for about 0.1 s after a threaded
product and would take a core from the next round's kernels.  Prints the
fastest round's microseconds per product (and GFLOP/s) of each, with the CPU and the
measured FMA peak of one thread; ``--out`` writes the rows as JSON.  Writes nothing
else.
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np

import convtranspose as ct
from convtranspose._kernels._numba.native_gemm import serial_gemm
from convtranspose._kernels._numba.packed import (
    pack_columns,
    pack_matrix,
    packed_product,
    packed_rows_product,
)
from convtranspose._kernels._numba.peak import measure_fma_gflops
from convtranspose._runtime import blas
from convtranspose._runtime.machine import cpu_model_name

#: Seconds between rounds, for OpenBLAS's spinning workers to stop (see the docstring).
_SPIN_PAUSE = 0.2

# (what it is, N, M, K, P)
PRODUCTS = [
    ("pointwise 256->512 7x7", 1, 512, 256, 49),
    ("head N2 512->3x16 taps 8x8 (col2im)", 2, 48, 512, 64),
    ("k1 s4 N8 8->128 5x5", 8, 128, 8, 25),
    ("U-Net k2 64->32x4 taps 24x24 (col2im)", 1, 128, 64, 576),
    ("mid 32->16x9 taps 16x16 (col2im)", 1, 144, 32, 256),
    ("512x512 by 512x256", 1, 512, 512, 256),
    ("256x256 by 256x1024", 1, 256, 256, 1024),
    # Large filters, few positions: every weight read once for a few positions.
    ("DCGAN-up 1024->512x16 taps 4x4 (col2im)", 1, 8192, 1024, 16),
    ("DCGAN-up N2 1024->512x16 taps 4x4 (col2im)", 2, 8192, 1024, 16),
    ("DCGAN 512->256x16 taps 8x8 (col2im)", 1, 4096, 512, 64),
    ("DCGAN N16 512->256x16 taps 8x8 (col2im)", 16, 4096, 512, 64),
    ("DCGAN-up N16 128->64x16 taps 16x16 (col2im)", 16, 1024, 128, 256),
    ("U-Net 512->256x4 taps 32x32 (col2im)", 1, 1024, 512, 1024),
]


def _products(batch: int, m: int, k: int, p: int, channels_last: bool, rng):
    """The packed kernel's product on a thread count, NumPy's on the same operands, and
    the 2-D operand triples of the library's BLAS calls for it."""
    if channels_last:
        a = rng.standard_normal((1, k, m), dtype=np.float32)
        b = rng.standard_normal((batch * p, 1, k), dtype=np.float32)
        c = np.empty((batch * p, 1, m), np.float32)
        columns = pack_columns(a)
        calls = [(b.reshape(-1, k), a[0], c.reshape(-1, m))]
        return (lambda threads: packed_rows_product(columns, b, c, threads),
                lambda: np.matmul(*calls[0][:2], out=calls[0][2]), calls)
    a = rng.standard_normal((1, m, k), dtype=np.float32)
    b = rng.standard_normal((batch, 1, k, p), dtype=np.float32)
    c = np.empty((batch, 1, m, p), np.float32)
    rows = pack_matrix(a)
    calls = [(a[0], b[n, 0], c[n, 0]) for n in range(batch)]
    return (lambda threads: packed_product(rows, b, c, threads),
            lambda: np.matmul(a, b, out=c), calls)


def _one_thread(gemm, calls):
    """The library's BLAS calls through ``gemm``, on one OpenBLAS thread."""
    def run():
        with blas.one_thread:
            for a, b, c in calls:
                gemm(a, b, c)
    return run


def _timings(rounds: int, calls: int, threads: int, channels_last: bool,
             words: list[str]) -> list[dict]:
    rng = np.random.default_rng(0)
    rows = []
    for name, batch, m, k, p in PRODUCTS:
        if words and not any(word in name for word in words):
            continue
        packed, product, operands = _products(batch, m, k, p, channels_last, rng)

        def blas_one():
            with blas.one_thread:
                product()

        runs = {"packed 1 thread": lambda: packed(1),
                f"packed {threads} threads": lambda: packed(threads),
                "OpenBLAS 1 thread": blas_one,
                "OpenBLAS threads": product,
                "ctypes gemm 1 thread": _one_thread(blas.gemm, operands),
                "compiled gemm 1 thread": _one_thread(serial_gemm, operands)}
        best = dict.fromkeys(runs, float("inf"))
        for run in runs.values():
            run()
        for _ in range(rounds):
            for key, run in runs.items():
                start = time.perf_counter()
                for _ in range(calls):
                    run()
                best[key] = min(best[key], (time.perf_counter() - start) / calls)
            time.sleep(_SPIN_PAUSE)
        flops = 2.0 * batch * m * k * p
        rows.append({"product": name, "n_m_k_p": [batch, m, k, p],
                     "us": {key: round(seconds * 1e6, 1) for key, seconds in best.items()},
                     "gflops": {key: round(flops / seconds / 1e9, 1)
                                for key, seconds in best.items()}})
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--calls", type=int, default=20, help="calls per timed round")
    parser.add_argument("--channels-last", action="store_true",
                        help="the channels-last products (data rows by the filter)")
    parser.add_argument("--products", default="",
                        help="only products whose names contain one of these comma-separated words")
    parser.add_argument("--out", help="write the rows as JSON to this file")
    args = parser.parse_args(argv)
    threads = ct.get_num_threads()
    peak = measure_fma_gflops()
    print(f"CPU: {cpu_model_name()}, {threads} threads, FMA peak {peak:.0f} GFLOP/s per "
          f"thread; microseconds per product (GFLOP/s), fastest of {args.rounds} rounds\n")
    rows = _timings(args.rounds, args.calls, threads, args.channels_last,
                    [word for word in args.products.split(",") if word])
    for row in rows:
        print(f"| {row['product']} | " + " | ".join(
            f"{key} {row['us'][key]} ({row['gflops'][key]})" for key in row["us"]) + " |")
    if args.out:
        with open(args.out, "w", encoding="utf-8") as file:
            json.dump({"machine": cpu_model_name(), "threads": threads,
                       "fma_peak_gflops_per_thread": round(peak, 1), "rounds": args.rounds,
                       "calls": args.calls, "channels_last": args.channels_last,
                       "rows": rows}, file, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
