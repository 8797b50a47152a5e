"""mpi4py (Open MPI) against cai, in one process (`COMM_SELF`; the example
examples/halo_exchange.py runs the same between processes): every producer as a send buffer
and, where writable, as a receive buffer (mpi4py reads DLPack), the address MPI is given, a
read-only storage refused as a receive buffer, and cai wrapping MPI's own memory."""

import numpy as np
import pytest
from mpi4py import MPI

import cai
from grid import DTYPES, case_ids, gives, np_address, takes

SELF = MPI.COMM_SELF


@pytest.mark.parametrize("case", case_ids(), indirect=True)
def test_takes_as_send_buffer(case):
    def send(o):
        got = np.zeros(case.expected.shape, case.expected.dtype)
        SELF.Sendrecv(o, 0, 0, got, 0, 0)
        return got

    # MPI moves the bytes in memory order: a Fortran-ordered producer arrives transposed,
    # from cai as from NumPy.
    takes("mpi4py", send, case, same_items=False)


@pytest.mark.parametrize("case", case_ids(), indirect=True)
def test_takes_address(case):
    """The address MPI is handed is the producer's first item (no staging copy)."""
    twin, limit = case.twin(), None
    try:
        MPI.Get_address(twin)
    except Exception as e:
        limit = f"mpi4py's own limit: NumPy input fails too ({type(e).__name__}: {e})"
    if limit:
        pytest.xfail(limit[:300])
    got = MPI.Get_address(case.obj)
    if case.size:
        assert got == case.address() and MPI.Get_address(twin) == np_address(twin)


@pytest.mark.parametrize("case", case_ids(), indirect=True)
def test_takes_as_receive_buffer(case):
    """Received into the producer's own memory; a read-only producer is refused, as a
    read-only NumPy array is."""
    src = np.ascontiguousarray(np.flip(case.expected))
    if case.readonly:
        said = []
        for target in (case.twin(), case.obj):
            with pytest.raises(Exception) as refused:
                SELF.Sendrecv(src, 0, 0, target, 0, 0)
            said.append(str(refused.value))
        assert said[1] == said[0]  # "dlpack: buffer is not writable", where MPI has the type
        assert np.array_equal(np.asarray(case.obj), case.expected)
        return
    twin, limit = case.twin(), None
    try:
        SELF.Sendrecv(src, 0, 0, twin, 0, 0)
    except Exception as e:
        limit = f"mpi4py's own limit: NumPy input fails too ({type(e).__name__}: {e})"
    if limit:
        pytest.xfail(limit[:300])
    SELF.Sendrecv(src, 0, 0, case.obj, 0, 0)
    got = np.asarray(case.obj)  # the items in memory order, as NumPy's twin has them
    twin = np.asarray(twin)
    assert got.dtype == twin.dtype and np.array_equal(got, twin)
    assert not case.size or np.array_equal(np.sort(got, axis=None), np.sort(src, axis=None))


# cai wrapping MPI's memory (the buffer protocol): `MPI.Alloc_mem`, typed through a
# memoryview of the format NumPy's dtype has.
FORMATS = [d for d in DTYPES if DTYPES[d].char in "?bhilqBHILQfd"]  # (memoryview casts to no "e")


@pytest.mark.parametrize("readonly", [False, True], ids=["writable", "read-only"])
@pytest.mark.parametrize("dname", FORMATS)
def test_gives_mpi_memory(dname, readonly):
    dtype = DTYPES[dname]

    def make():
        want = np.arange(6).astype(dtype)
        if readonly:
            mem = MPI.buffer.frombuffer(want.tobytes(), readonly=True)
        else:
            mem = MPI.Alloc_mem(want.nbytes)
            mem[:] = want.tobytes()
        return memoryview(mem).cast(dtype.char), want, mem.address, readonly

    gives("mpi4py", make, cai.as_storage, np.asarray)
