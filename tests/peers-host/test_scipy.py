"""SciPy against cai: `scipy.sparse.coo_array` and `scipy.fft.fftn` of every producer (SciPy
reads its input through NumPy and returns new arrays: the values are what is checked)."""

import pytest
import scipy.fft
import scipy.sparse

from grid import case_ids, takes

TAKES = {
    "sparse.coo_array": lambda o: scipy.sparse.coo_array(o).toarray(),
    "fft.fftn": scipy.fft.fftn,
}


@pytest.mark.parametrize("how", TAKES)
@pytest.mark.parametrize("case", case_ids(), indirect=True)
def test_takes(case, how):
    takes("SciPy", TAKES[how], case, same_items=how != "fft.fftn")
