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


def _rewrite_row(d, **attrs):
    p = d / "adj" / "vec_000001.h5"
    with h5py.File(p, "r+") as f:
        for k, v in attrs.items():
            del f["vec"].attrs[k]
            f["vec"].attrs[k] = v


@needs_hdf5
@pytest.mark.parametrize("attrs", [{"n_param": 4.7}, {"param_steps": 3.5}, {"reindex": 1.5},
                                   {"n_param": np.nan}])
def test_non_integral_attributes_are_rejected(tmp_path, attrs):
    d = tmp_path / "m"
    BlockToeplitz(B).save_fftmatvec(d)
    _rewrite_row(d, **attrs)
    name = next(iter(attrs))
    with pytest.raises(ValueError, match=f"attribute '{name}'.*not one integer"):
        BlockToeplitz.from_fftmatvec(d)


@needs_hdf5
def test_integral_float_attributes_still_read(tmp_path):
    # Files written by tools that store attributes as doubles (4.0) keep working.
    d = tmp_path / "m"
    BlockToeplitz(B).save_fftmatvec(d)
    _rewrite_row(d, n_param=4.0, param_steps=3.0, reindex=1.0)
    assert np.array_equal(BlockToeplitz.from_fftmatvec(d).blocks, B)


@needs_hdf5
def test_vector_file_with_non_integral_sizes_is_rejected(tmp_path):
    p = tmp_path / "v.h5"
    with h5py.File(p, "w") as f:
        ds = f.create_dataset("vec", data=np.arange(6.0))
        ds.attrs["n_param"] = 2.5
        ds.attrs["param_steps"] = 2.4
    with pytest.raises(ValueError, match="attribute 'n_param'.*not one integer"):
        strux.read_vector(p)


@needs_hdf5
def test_vector_path_that_is_a_folder_is_not_called_missing(tmp_path):
    with pytest.raises(ValueError, match="argument 'path'.*not a regular file") as e:
        strux.read_vector(tmp_path)
    assert "does not exist" not in str(e.value)


@needs_hdf5
@pytest.mark.parametrize("dtype", ["bogus", np.longdouble, np.complex128])
def test_from_fftmatvec_bad_dtype_names_the_argument(tmp_path, dtype):
    d = tmp_path / "m"
    BlockToeplitz(B).save_fftmatvec(d)
    with pytest.raises(TypeError, match="argument 'dtype'"):
        BlockToeplitz.from_fftmatvec(d, dtype=dtype)


def test_dist_from_fftmatvec_bad_dtype_names_the_argument(tmp_path):
    # Checked before any collective call, so one process with any communicator-like object suffices.
    import strux.dist
    if not strux.dist.available():
        pytest.skip("strux built without MPI")
    with pytest.raises(TypeError, match="argument 'dtype'"):
        strux.dist.BlockToeplitz.from_fftmatvec(tmp_path, comm=None, dtype="bogus")


@pytest.mark.parametrize("value", ["-3", "99999999999", "4097"])
def test_cli_threads_out_of_range_is_a_usage_error(capsys, value):
    # README/cli: exit 2 for a bad option value, and the message names the option.
    with pytest.raises(SystemExit) as e:
        cli.main(["bench", "--family", "toeplitz", "--device", "cpu", "--quick", "--threads", value])
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert "--threads" in err and value in err and "argument 'n'" not in err
