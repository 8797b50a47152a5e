"""Halo exchange between MPI processes, zero-copy, on GDP-3 storages (docs/storages.md, "Across
processes and machines").

    mpiexec -n 4 python examples/halo_exchange.py             # host storages
    mpiexec -n 2 python examples/halo_exchange.py --device gpu  # device storages, CUDA-aware MPI

A 3-D periodic domain is split over the ranks (MPI's Cartesian topology); each rank holds its
part in a cai storage with a halo of one point, and a few explicit diffusion steps (a 7-point
Laplacian) run, the halos exchanged with mpi4py's `Sendrecv` before each: in dimension I the
halo slabs are contiguous and are sent from, and received into, the storage's own views; in J
and K they are strided, and are sent and received through MPI derived datatypes (subarrays of
the whole storage), never packed. Every buffer handed to MPI is checked to be the storage's
memory (its address), and the result is checked against the same steps run by NumPy alone on
the whole domain. Then two mistakes, on purpose: a read-only storage as a receive buffer, and a
strided slab handed to MPI as if it were contiguous; mpi4py refuses both and says why.

With `--device gpu` the storages are device memory and MPI is given their device pointers
through `__dlpack__` / `__cuda_array_interface__` (CuPy computes): that needs an MPI built
CUDA-aware; without one the program says so and exits with status 3.
"""

import argparse
import sys

import numpy as np
from mpi4py import MPI

import cai

STEPS = 4
NU = 0.1


def initial(shape):
    i, j, k = np.indices(shape)
    return ((i * 7 + j * 3 + k) % 11).astype(np.float64)


def laplacian(u, xp):
    """The 7-point Laplacian of `u`'s inside (one point in from each face)."""
    c = u[1:-1, 1:-1, 1:-1]
    return (
        u[:-2, 1:-1, 1:-1] + u[2:, 1:-1, 1:-1]
        + u[1:-1, :-2, 1:-1] + u[1:-1, 2:, 1:-1]
        + u[1:-1, 1:-1, :-2] + u[1:-1, 1:-1, 2:]
        - 6.0 * c
    )


def reference(shape):
    """The same steps by NumPy alone, on the whole periodic domain."""
    u = initial(shape)
    for _ in range(STEPS):
        p = np.pad(u, 1, mode="wrap")
        u = u + NU * laplacian(p, np)
    return u


def address(obj, gpu):
    if gpu:
        return obj.__cuda_array_interface__["data"][0]
    return obj.__array_interface__["data"][0]


class Halos:
    """One rank's storage and the MPI buffers of its six halo exchanges."""

    def __init__(self, comm, local, gpu):
        self.comm, self.gpu = comm, gpu
        shape = tuple(n + 2 for n in local)
        self.s = cai.zeros(shape, dtype="f8", halo=(1, 1, 1), dims="IJK",
                           device="gpu" if gpu else None, managed=None)
        self.checked = 0
        base = address(self.s, gpu)
        # The storage is one C-contiguous block (no padding: alignment 1), so that MPI's
        # subarray types describe its J and K slabs.
        assert self.s.strides == (shape[1] * shape[2] * 8, shape[2] * 8, 8), self.s.strides
        self.end = base + self.s.nbytes
        self.plan = []  # (dimension, send buffer, receive buffer, source, destination)
        for d in range(3):
            low, high = comm.Shift(d, 1)
            for send_at, recv_at, dest, source in ((1, shape[d] - 1, low, high),
                                                   (shape[d] - 2, 0, high, low)):
                self.plan.append((d, self.slab(d, send_at, shape), self.slab(d, recv_at, shape),
                                  source, dest))

    def slab(self, d, at, shape):
        """The MPI buffer of the plane `at` of dimension `d`, halos of the other dimensions
        included: in I a storage view, contiguous, given as it is; in J and K the whole
        storage with a subarray type that picks the plane."""
        if d == 0:
            view = self.s[at:at + 1, :, :]
            self.check(view, address(self.s, self.gpu) + at * self.s.strides[0])
            return view
        sub, start = list(shape), [0, 0, 0]
        sub[d], start[d] = 1, at
        t = MPI.DOUBLE.Create_subarray(list(shape), sub, start, order=MPI.ORDER_C).Commit()
        self.check(self.s, address(self.s, self.gpu))
        return [self.s, 1, t]

    def check(self, buf, want):
        """MPI's address of `buf` is the storage's memory: no copy is handed over."""
        got = MPI.Get_address(buf)
        assert got == want and address(self.s, self.gpu) <= got < self.end, (got, want)
        self.checked += 1

    def exchange(self):
        for _, send, recv, source, dest in self.plan:
            self.comm.Sendrecv(send, dest, 0, recv, source, 0)


def run(gpu):
    world = MPI.COMM_WORLD
    xp = np
    if gpu:
        import cupy as xp  # noqa: F811 (the device's array library)
    dims = MPI.Compute_dims(world.size, 3)
    comm = world.Create_cart(dims, periods=[True] * 3, reorder=False)
    glob = (16, 12, 8)
    local = [n // p for n, p in zip(glob, dims)]
    assert all(n % p == 0 for n, p in zip(glob, dims)), "the domain must divide evenly"
    coords = comm.Get_coords(comm.rank)
    lo = [c * n for c, n in zip(coords, local)]
    inside = tuple(slice(a, a + n) for a, n in zip(lo, local))

    h = Halos(comm, local, gpu)
    u = xp.asarray(h.s)  # a NumPy (CuPy) view of the storage: no copy
    assert address(u, gpu) == address(h.s, gpu)
    u[1:-1, 1:-1, 1:-1] = xp.asarray(initial(glob)[inside])
    for _ in range(STEPS):
        if gpu:
            xp.cuda.get_current_stream().synchronize()  # MPI reads what CuPy wrote
        h.exchange()
        u[1:-1, 1:-1, 1:-1] += NU * laplacian(u, xp)
    mine = u[1:-1, 1:-1, 1:-1]
    mine = xp.asnumpy(mine) if gpu else np.array(mine)
    parts = comm.gather((lo, mine), root=0)
    err = None
    if comm.rank == 0:
        whole = np.empty(glob)
        for (a, b, c), part in parts:
            whole[a:a + part.shape[0], b:b + part.shape[1], c:c + part.shape[2]] = part
        err = float(np.abs(whole - reference(glob)).max())
    err = comm.bcast(err, root=0)
    checked = comm.allreduce(h.checked)
    if comm.rank == 0:
        print(f"{world.size} ranks as {dims[0]}x{dims[1]}x{dims[2]}, domain "
              f"{glob[0]}x{glob[1]}x{glob[2]}, each rank's storage "
              f"{'x'.join(str(n) for n in h.s.shape)} with a halo of {h.s.halo[0][0]}, "
              f"{'device' if gpu else 'host'} memory")
        print(f"{STEPS} steps, 6 halo exchanges each (I: storage views; J, K: MPI subarray "
              f"types over the storage); {checked} MPI buffers checked to be storage memory")
        print(f"largest difference from NumPy on the whole domain: {err:.3g}")
    ok = err < 1e-12
    ok &= mistakes(comm, gpu)
    return ok


def mistakes(comm, gpu):
    """Two refusals, each by mpi4py, each with its message (rank 0 prints them)."""
    ok = True
    frozen = np.zeros(4)
    frozen.flags.writeable = False
    ro = cai.as_storage(frozen)  # a read-only storage (over read-only host memory)
    try:
        MPI.COMM_SELF.Sendrecv(cai.full((4,), 1.0), 0, 1, ro, 0, 1)
        ok = False
        said = "accepted (wrong: it must be refused)"
    except Exception as e:
        said = f"refused: {type(e).__name__}: {e}"
    if comm.rank == 0:
        print(f"a read-only storage as a receive buffer: {said}")
    s = cai.zeros((4, 5, 6), device="gpu" if gpu else None)
    try:
        MPI.COMM_SELF.Sendrecv(s[:, 1:2, :], 0, 2, cai.zeros((4, 1, 6)), 0, 2)
        ok = False
        said = "accepted (wrong: it is not contiguous)"
    except Exception as e:
        said = f"refused: {type(e).__name__}: {e}"
    if comm.rank == 0:
        print(f"a strided J slab as a plain buffer: {said}; the exchange sends such slabs "
              f"through MPI subarray types instead")
    return ok


def cuda_aware():
    """Whether the MPI library takes device pointers: Open MPI's `MPIX_Query_cuda_support`,
    MPICH's `MPIX_GPU_query_support` (mpi4py has no query of its own)."""
    import ctypes
    import ctypes.util

    name = ctypes.util.find_library("mpi")
    if not name:
        return False
    lib = ctypes.CDLL(name)
    query = getattr(lib, "MPIX_Query_cuda_support", None)
    if query is not None:
        return bool(query())
    query = getattr(lib, "MPIX_GPU_query_support", None)
    if query is not None:
        out = ctypes.c_int(0)
        query(1, ctypes.byref(out))  # MPIX_GPU_SUPPORT_CUDA
        return bool(out.value)
    return False


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--device", choices=["host", "gpu"], default="host")
    gpu = p.parse_args().device == "gpu"
    if gpu:
        if not cuda_aware():
            if MPI.COMM_WORLD.rank == 0:
                print(f"no CUDA-aware MPI here ({MPI.Get_library_version().splitlines()[0]}): "
                      "the device variant needs one")
            sys.exit(3)
    ok = run(gpu)
    ok = MPI.COMM_WORLD.allreduce(ok, op=MPI.LAND)
    if MPI.COMM_WORLD.rank == 0:
        print("ok" if ok else "FAILED")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
