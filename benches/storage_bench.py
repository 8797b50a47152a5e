"""Benchmark of GDP-3 storage allocation, printed as ratios against NumPy measured in the same
process (never asserted: timings vary by machine).

  `cai.zeros(shape, alignment_size=64, halo=...)` (an aligned storage) against
  `numpy.zeros` of the same number of bytes (target <= 1.2x), at several sizes; and the same
  with every page touched once (a write of the whole array), which is what a computation
  pays.

  `numpy.asarray(storage)` (NumPy reads `__array_struct__`) against NumPy reading an
  `__array_interface__` dict that is already built (what the dict protocol costs NumPy alone).

Run: .venv/bin/python benches/storage_bench.py
"""

import types

import numpy as np

import cai
from python_bench import best, ns  # benches/ is on sys.path when run as a script


def fmt(seconds):
    return f"{seconds * 1e6:9.2f} us"


def main():
    print(f"cai {cai.__version__}, {cai._native._build} wheel")
    print("zeros: aligned storage vs numpy.zeros of the same bytes (float64, alignment 64)")
    print(f"{'shape':>18} {'bytes':>12} {'cai.zeros':>12} {'np.zeros':>12} {'ratio':>7}   touched: {'cai':>12} {'numpy':>12} {'ratio':>7}")
    worst = 0.0
    ratios = []
    for shape in [(8, 8, 8), (32, 32, 32), (64, 64, 64), (128, 128, 80), (256, 256, 128)]:
        s = cai.zeros(shape, alignment_size=64, halo=(1, 1, 0))
        nbytes = s.nbytes
        # the storage's buffer is padded; compare against numpy.zeros of the storage's bytes
        ref_shape = (nbytes // 8,)
        number = max(10, min(20_000, 2_000_000_000 // max(nbytes, 1) // 50))
        ours = best("cai.zeros(shape, alignment_size=64, halo=(1, 1, 0))", number, cai=cai, shape=shape)
        numpy_ = best("np.zeros(ref_shape)", number, np=np, ref_shape=ref_shape)
        touched_number = max(3, number // 20)
        ours_t = best(
            "np.asarray(cai.zeros(shape, alignment_size=64, halo=(1, 1, 0))).fill(1.0)",
            touched_number, cai=cai, np=np, shape=shape,
        )
        numpy_t = best("np.zeros(ref_shape).fill(1.0)", touched_number, np=np, ref_shape=ref_shape)
        ratio, ratio_t = ours / numpy_, ours_t / numpy_t
        worst = max(worst, ratio)
        ratios.append((nbytes, ratio))
        print(
            f"{str(shape):>18} {nbytes:>12} {fmt(ours)} {fmt(numpy_)} {ratio:6.2f}x   "
            f"touched: {fmt(ours_t)} {fmt(numpy_t)} {ratio_t:6.2f}x"
        )
    print(f"worst allocation ratio: {worst:.2f}x (target <= 1.2x)")
    # The smallest size from which every larger size meets the target.
    met_from = None
    for nbytes, ratio in reversed(ratios):
        if ratio > 1.2:
            break
        met_from = nbytes
    if met_from is None:
        print("target met at no size measured")
    else:
        print(f"target met from {met_from} bytes up ({met_from / 1024:.0f} KiB)")

    print()
    print("numpy.asarray(storage): the C struct against NumPy reading a ready dict")
    for shape in [(8, 8, 8), (4, 5, 6, 7)]:
        s = cai.zeros(shape, alignment_size=64, halo=(1,) * len(shape))
        ready = types.SimpleNamespace(__array_interface__=s.__array_interface__)
        ours = best("np.asarray(s)", 200_000, np=np, s=s)
        dict_ = best("np.asarray(ready)", 200_000, np=np, ready=ready)
        print(f"{str(shape):>18} {ns(ours)} {ns(dict_)} {ours / dict_:6.2f}x")


if __name__ == "__main__":
    main()
