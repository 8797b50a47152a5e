"""Reads through cai after every temporary a producer made is gone, for a memory checker
(scripts/memcheck.sh runs it under valgrind): any read of freed memory is reported there, and
any wrong value here. Each case is one class of "what the data depends on": the descriptor
dict (NumPy scalars' '__ref'), a mask object and its dict, an `__array_struct__` capsule's
exporter, the `__gt_data_interface__` dict, the buffers of a storage's wrapped data, a DLPack
capsule's exporter, and a DLPack import's producer (freed by its deleter when the view goes)."""

import gc

import numpy as np

import cai
import cai.examples


def churn():
    """Allocations that reuse freed memory, so a stale read sees other bytes."""
    return [np.full(512, -1.0) for _ in range(64)]


class Masked:
    """Values with a mask object built on each access, held by the returned dict alone."""

    def __init__(self):
        self.values = np.arange(1000.0)

    @property
    def __array_interface__(self):
        d = dict(self.values.__array_interface__)
        d["mask"] = FreshMask()
        return d


class FreshMask:
    @property
    def __array_interface__(self):
        m = np.ones(1000, dtype=bool)
        m[::3] = False
        d = dict(m.__array_interface__)
        d["__ref"] = m  # the dict alone holds the mask's memory
        return d


class Gt:
    """A GDP-3 producer whose data only its `__gt_data_interface__` entry holds."""

    @property
    def __gt_data_interface__(self):
        a = np.arange(12.0).reshape(3, 4)
        entry = dict(a.__array_interface__)
        entry["__ref"] = a
        return {None: entry}


class Capsule:
    def __init__(self, capsule):
        self.__array_struct__ = capsule


def main():
    v = cai.as_host_array(np.float64(3.5))
    gc.collect()
    junk = churn()
    assert v.get([]) == 3.5
    s = cai.as_storage(np.float64(2.5))
    gc.collect()
    junk = churn()
    a = np.asarray(s)
    a[()] = 4.0
    assert float(np.asarray(s)) == 4.0
    del a, s

    v = cai.as_host_array(Masked())
    gc.collect()
    mask = v.__array_interface__["mask"]
    del v
    gc.collect()
    junk = churn()
    m = np.asarray(mask)
    assert not m[::3].any() and m[1::3].all()

    g = cai.gt_data(Gt())
    gc.collect()
    junk = churn()
    assert g.host.get([2, 3]) == 11.0

    capsules = [
        (cai.full((300, 300), 7.0).__array_struct__, 7.0),
        (cai.examples.Grid(40, 50).__array_struct__, 0.0),
        (cai.examples.counts(1000).__array_struct__, None),
    ]
    gc.collect()
    junk = churn()
    for capsule, value in capsules:
        got = np.asarray(Capsule(capsule))
        assert value is None or (got == value).all(), got
    # DLPack: capsules outliving their exporters, consumed after churn; a view outliving its
    # producer; a view's capsule outliving the view; a copy outliving everything.
    capsules = [
        (cai.full((300, 300), 5.0).__dlpack__(max_version=(1, 0)), 5.0),
        (cai.examples.Grid(40, 50).__dlpack__(), 0.0),
        (cai.examples.counts(1000).__dlpack__(max_version=(1, 0), copy=True), None),
        (cai.from_dlpack(np.full(700, 3.0)).__dlpack__(max_version=(1, 0)), 3.0),
    ]
    gc.collect()
    junk = churn()

    class Holder:
        def __init__(self, capsule):
            self.capsule = capsule

        def __dlpack__(self, **kwargs):
            return self.capsule

        def __dlpack_device__(self):
            return (1, 0)

    for capsule, value in capsules:
        got = np.from_dlpack(Holder(capsule))
        assert value is None or (got == value).all(), got
    v = cai.from_dlpack(np.arange(900.0)[::-3])
    gc.collect()
    junk = churn()
    assert v.get([0]) == 899.0
    a = np.from_dlpack(v)
    del v
    gc.collect()
    junk = churn()
    assert a[-1] == 2.0
    del a, junk
    gc.collect()
    print("lifetimes: every read saw live memory")


if __name__ == "__main__":
    main()
