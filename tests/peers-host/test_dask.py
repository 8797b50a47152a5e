"""dask against cai: `dask.array.from_array` of every producer (computed back), chunked
reductions over a storage with halos and over a view, and a `dask.distributed` cluster of two
worker processes mapping a function over chunks held in storages, which travel pickled."""

import pytest
import dask
import dask.array as da

from grid import case_ids, takes


@pytest.mark.parametrize("case", case_ids(), indirect=True)
def test_takes(case):
    with dask.config.set(scheduler="synchronous"):
        takes("dask", lambda o: da.from_array(o, chunks=2), case, to_numpy=lambda d: d.compute())


def reductions(x):
    return {
        "sum": x.sum(),
        "mean over I": x.mean(axis=0),
        "max over J, K": x.max(axis=(1, 2)),
        "std": x.std(),
        "cumsum over K": x.cumsum(axis=2),
    }


def test_chunked_reductions():
    """`from_array` over a storage with halos, its domain view and an import view: chunked
    reductions equal NumPy's over the same items."""
    import numpy as np

    import cai

    s = cai.zeros((8, 10, 6), dtype="f8", halo=(1, 1, 0), dims="IJK", alignment_size=64)
    np.asarray(s)[...] = np.arange(480.0).reshape(8, 10, 6) % 17
    for obj in (s, s.domain_view, cai.as_host_array(s.domain_view)):
        ref = np.array(obj)
        got = dict(zip(reductions(ref), dask.compute(*reductions(da.from_array(obj, chunks=(3, 4, 2))).values(), scheduler="threads")))
        for what, want in reductions(ref).items():
            np.testing.assert_allclose(got[what], want, rtol=1e-12, err_msg=what)


def describe(s):
    """Run in a worker process: what it received, and a new storage made there."""
    import os

    import numpy as np

    import cai

    assert isinstance(s, cai.Storage), type(s)
    first = np.asarray(s.domain_view).__array_interface__["data"][0]
    out = cai.zeros_like(s)
    np.asarray(out)[...] = np.asarray(s) * 2
    return {
        "pid": os.getpid(), "type": type(s).__name__, "dims": s.dims, "halo": s.halo,
        "layout": s.layout, "alignment_size": s.alignment_size, "strides": s.strides,
        "aligned": first % s.alignment_size == 0, "sum": float(np.asarray(s).sum()),
        "out": out,
    }


def test_distributed_maps_over_storages():
    """A local cluster of two worker processes on the loopback interface: storages travel
    pickled (by value) and keep their parameters; the function's storages come back."""
    import os

    import numpy as np
    from distributed import Client, LocalCluster, wait

    import cai

    chunks = []
    for n in range(4):
        s = cai.zeros((6, 5, 4), dtype="f4", halo=((1, 2), (1, 1), (0, 0)), dims="KJI",
                      alignment_size=64, layout=(2, 1, 0))
        np.asarray(s)[...] = np.arange(120, dtype="f4").reshape(6, 5, 4) + n
        chunks.append(s)
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1",
                      dashboard_address=None, worker_dashboard_address=None) as cluster, \
            Client(cluster, timeout=60) as client:
        futures = client.map(describe, chunks)
        wait(futures, timeout=60)  # (bounded: a hung cluster fails the test, it does not hang it)
        results = client.gather(futures, errors="raise")
    assert {r["pid"] for r in results} - {os.getpid()}, "ran in this process"
    assert len({r["pid"] for r in results}) == 2, "one worker did it all"
    for s, r in zip(chunks, results):
        assert r["type"] == "CPUStorage" and r["dims"] == s.dims and r["halo"] == s.halo
        assert r["layout"] == s.layout == (2, 1, 0) and r["alignment_size"] == 64
        assert r["strides"] == s.strides and r["aligned"]
        assert r["sum"] == float(np.asarray(s).sum())
        out = r["out"]
        assert isinstance(out, cai.Storage) and out.dims == s.dims and out.halo == s.halo
        np.testing.assert_array_equal(np.asarray(out), np.asarray(s) * 2)
