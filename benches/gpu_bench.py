"""GPU benchmarks of cai, printed as ratios against references measured in the same process
(never asserted). Run on the GPU machine from the bundle (docs/testing.md, "GPU suite"):

  1. exchange overhead: importing an array whose producer stream is busy, with our event wait
     (the host is not blocked), alone and with the release that orders the producer's stream
     after the consumer's, against a full stream synchronize (what CuPy and Numba do);
  2. import: `cai.as_cuda_array` against `numba.cuda.as_cuda_array`, `cupy.asarray` and
     `torch.as_tensor` on the same object, one exposing only a CuPy array's descriptor (with
     stream None, then with stream 1);
  3. property access: our `DeviceArray.__cuda_array_interface__` against CuPy's and PyTorch's.
"""

import time
import timeit

import numpy as np

import cai


def best(fn, number, repeat=5):
    return min(timeit.repeat(fn, number=number, repeat=repeat)) / number


def us(s):
    return f"{s * 1e6:9.2f} us"


def row(name, ours, ref, ref_name):
    print(f"  {name:<44} {us(ours)}  vs {ref_name:<26} {us(ref)}  = {ours / ref:6.2f}x")


def main():
    import cupy as cp

    name = cp.cuda.runtime.getDeviceProperties(0)["name"]
    print(f"cai {cai.__version__}, {cai._native._build} wheel")
    print("cai GPU benchmarks:", name.decode() if isinstance(name, bytes) else name)

    # 1. Exchange overhead with a busy producer stream: each iteration enqueues ~0.2 ms of
    # work on the producer stream, then imports; time is the host time of the import.
    producer = cp.cuda.Stream(non_blocking=True)
    consumer = cp.cuda.Stream(non_blocking=True)
    with producer:
        big = cp.zeros(1 << 26, dtype=cp.float32)
        desc = big[:16].__cuda_array_interface__

    def exchange(mode, reps=200, release=False):
        total = 0.0
        for _ in range(reps):
            with producer:
                cp.add(big, 1, out=big)  # in place; `big += 1` would make `big` local here
            t0 = time.perf_counter()
            v = cai.from_cuda_array_interface(desc, owner=big, stream=consumer.ptr, mode=mode)
            if release:  # the producer's stream then waits for the consumer's
                v.release()
            total += time.perf_counter() - t0
        producer.synchronize()
        consumer.synchronize()
        return total / reps

    exchange("enqueue", 20)
    ev, sync = exchange("enqueue"), exchange("synchronize")
    both = exchange("enqueue", release=True)
    print("1. exchange with a busy producer stream (host time per import)")
    row("event wait (cai default)", ev, sync, "stream synchronize")
    row("event wait, then release()", both, sync, "stream synchronize")

    # Control for the stream tests: with sync=False a consumer on another stream can read
    # unfinished work, which is what the event wait prevents (a race: reported, not asserted).
    stale = 0
    for _ in range(5):
        with producer:
            big[:] = 0
            producer.synchronize()
            for _ in range(20):
                big += 1
            d = big[-4:].__cuda_array_interface__
        v = cai.from_cuda_array_interface(d, owner=big, stream=consumer.ptr, sync=False)
        stale += int((np.frombuffer(v.copy_to_host(), np.float32) != 20).any())
        producer.synchronize()
    print(f"   control: sync=False read unfinished data in {stale} of 5 imports")

    # 2. Import cost on the same objects: an object exposing only CuPy's descriptor, so that
    # every library imports it (`cupy.asarray` of a CuPy array would return it untouched).
    import numba.cuda
    import torch

    class Exposing:
        def __init__(self, descriptor):
            self.__cuda_array_interface__ = descriptor

    x = cp.arange(64 * 32, dtype=cp.float32).reshape(64, 32)
    n = 5000
    with cp.cuda.Stream.null:  # CuPy exports its current stream: the legacy default, 1
        exported = x.__cuda_array_interface__
        for label, stream in (("stream None", None), ("stream 1, the legacy default", 1)):
            obj = Exposing(dict(exported, stream=stream))
            print(f"2. import of a 64x32 float32 array exposing only CuPy's descriptor ({label})")
            ours = best(lambda: cai.as_cuda_array(obj), n)
            ours_nocheck = best(lambda: cai.as_cuda_array(obj, check_pointer=False), n)
            refs = {
                "numba.cuda.as_cuda_array": best(lambda: numba.cuda.as_cuda_array(obj), n),
                "cupy.asarray": best(lambda: cp.asarray(obj), n),
                "torch.as_tensor": best(lambda: torch.as_tensor(obj, device="cuda"), n),
            }
            for name, ref in refs.items():
                row("cai.as_cuda_array", ours, ref, name)
            for name, ref in refs.items():
                row("cai.as_cuda_array(check_pointer=False)", ours_nocheck, ref, name)

    # 3. Property access.
    a = cai.DeviceArray(np.zeros((64, 32), dtype=np.float32))
    t = torch.zeros((64, 32), dtype=torch.float32, device="cuda")
    n = 100_000
    ours = best(lambda: a.__cuda_array_interface__, n)
    print("3. __cuda_array_interface__ access (64x32 float32)")
    row("cai DeviceArray", ours, best(lambda: x.__cuda_array_interface__, n), "cupy.ndarray")
    row("cai DeviceArray", ours, best(lambda: t.__cuda_array_interface__, n // 10), "torch.Tensor")


if __name__ == "__main__":
    main()
