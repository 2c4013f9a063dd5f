"""Contract audit (files, CLI): FFTMatvec directories and vector files written by others or by
strux itself, and the command line's handling of bad option values. Each test pins one defect
found by the audit-io pass."""
import os

import numpy as np
import pytest

import strux
from strux import BlockToeplitz, cli

h5py = pytest.importorskip("h5py")
needs_hdf5 = pytest.mark.skipif(not strux._ext.has_hdf5, reason="strux built without HDF5")

B = np.random.default_rng(0).standard_normal((3, 2, 4))


@needs_hdf5
@pytest.mark.parametrize("prefix", [" vec_", "vec_ ", "adj/vec_\t", "\tadj/vec_"])
def test_save_rejects_a_prefix_the_reader_would_trim(tmp_path, prefix):
    # meta_adj lines are read with surrounding whitespace stripped, so a directory written with
    # such a prefix could never be read back: the writer must refuse it and write nothing.
    d = tmp_path / "m"
    with pytest.raises(ValueError, match="argument 'prefix'.*whitespace"):
        BlockToeplitz(B).save_fftmatvec(d, prefix=prefix)
    assert not d.exists() or not any(d.rglob("*.h5")) and not (d / "meta_adj").exists()
