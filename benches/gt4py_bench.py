"""Benchmark of storage allocation against GT4Py's own allocator, printed as ratios measured in
the same process (never asserted: timings vary by machine).

  `cai.zeros(shape, defaults=backend)` against `gt4py.storage.zeros(shape, backend=backend)`
  (the same shape, dtype, layout and alignment: cai's presets are GT4Py's registry), from
  4 KiB to 64 MiB, and the same with every item written once (what a computation pays).

Run (GT4Py is in its own venv, which scripts/test.sh makes):
  .venv-gt4py/bin/python benches/gt4py_bench.py
"""

import numpy as np

import cai
import gt4py.storage as gt_storage
from python_bench import best  # benches/ is on sys.path when run as a script


def fmt(seconds):
    return f"{seconds * 1e6:10.2f} us"


def main():
    print(f"cai {cai.__version__}, {cai._native._build} wheel")
    print("zeros: cai.zeros(defaults=backend) vs gt4py.storage.zeros(backend=backend), float64")
    print(
        f"{'backend':>14} {'shape':>16} {'bytes':>10} {'cai':>13} {'gt4py':>13} {'ratio':>7}"
        f"   touched: {'cai':>13} {'gt4py':>13} {'ratio':>7}"
    )
    for backend in ["numpy", "gt:cpu_ifirst", "dace:cpu"]:
        for n in [8, 32, 64, 128, 203]:  # 4 KiB .. 64 MiB of float64
            shape = (n, n, n)
            nbytes = 8 * n**3
            number = max(5, min(20_000, 2_000_000_000 // nbytes // 20))
            ours = best("cai.zeros(shape, defaults=b)", number, cai=cai, shape=shape, b=backend)
            theirs = best(
                "gs.zeros(shape, np.float64, backend=b)", number, gs=gt_storage, np=np, shape=shape, b=backend
            )
            touched = max(3, number // 20)
            ours_t = best(
                "np.asarray(cai.zeros(shape, defaults=b)).fill(1.0)", touched, cai=cai, np=np, shape=shape, b=backend
            )
            theirs_t = best(
                "gs.zeros(shape, np.float64, backend=b).fill(1.0)", touched, gs=gt_storage, np=np, shape=shape, b=backend
            )
            print(
                f"{backend:>14} {str(shape):>16} {nbytes:>10} {fmt(ours)} {fmt(theirs)} {ours / theirs:6.2f}x"
                f"   touched: {fmt(ours_t)} {fmt(theirs_t)} {ours_t / theirs_t:6.2f}x"
            )


if __name__ == "__main__":
    main()
