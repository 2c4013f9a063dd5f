"""Hostile FFTMatvec directories and huge sizes (issue 11): every case is a clear error naming its
source, nothing is read or written outside the matrix directory, nothing is sized before the row
files show they hold it."""
import os

import numpy as np
import pytest

import strux
from strux import BlockToeplitz

h5py = pytest.importorskip("h5py")
pytestmark = pytest.mark.skipif(not strux._ext.has_hdf5, reason="strux built without HDF5")


def _meta(path, nd, nm, nt, prefix="adj/vec_", checksum=0):
    with open(path, "w") as f:
        f.write(f"{nd}\n{nm}\n{nt}\n{prefix}\n.h5\n1\n0\n1\n{checksum}\n")


@pytest.fixture
def matrix(tmp_path):
    d = tmp_path / "m"
    BlockToeplitz(np.arange(8.0).reshape(2, 2, 2)).save_fftmatvec(d)
    return d


@pytest.mark.parametrize("sizes", [(2**62, 2, 2), (2, 2**32 + 1, 2**32 - 1), (2, 2**62, 4), (2**40, 2, 2)])
def test_declared_sizes_that_wrap_or_exceed_the_rows(matrix, sizes):
    _meta(matrix / "meta_adj", *sizes)
    with pytest.raises(ValueError, match="meta_adj|directory|vec_"):
        BlockToeplitz.from_fftmatvec(matrix)


def test_declared_sizes_checked_against_row0_before_allocating(matrix):
    import resource
    _meta(matrix / "meta_adj", 2000, 10000, 10000)  # 1.6 TB declared by a 30-byte file
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    with pytest.raises(ValueError, match=r"vec_000000.h5.*4 values"):
        BlockToeplitz.from_fftmatvec(matrix)


@pytest.mark.parametrize("prefix", ["../escaped_", "../../x/secret_", "/etc/secret_", "adj/../../x_"])
def test_prefix_outside_the_directory_is_rejected_without_touching_it(tmp_path, matrix, prefix):
    outside = tmp_path / "x"
    BlockToeplitz(np.ones((2, 2, 2))).save_fftmatvec(outside, prefix="secret_")
    _meta(matrix / "meta_adj", 2, 2, 2, prefix=prefix)
    with pytest.raises(ValueError, match="relative to the matrix directory") as e:
        BlockToeplitz.from_fftmatvec(matrix)
    assert "exist" not in str(e.value)  # says nothing about paths outside


def test_symlink_out_of_the_directory_is_rejected(tmp_path, matrix):
    outside = tmp_path / "x"
    BlockToeplitz(np.ones((2, 2, 2))).save_fftmatvec(outside, prefix="adj/vec_")
    import shutil
    shutil.rmtree(matrix / "adj")
    os.symlink(outside / "adj", matrix / "adj")
    with pytest.raises(ValueError, match="outside the matrix directory"):
        BlockToeplitz.from_fftmatvec(matrix)


def test_sub_folder_prefix_stays_legal(tmp_path):
    b = np.random.default_rng(0).standard_normal((3, 2, 4))
    BlockToeplitz(b).save_fftmatvec(tmp_path / "m", prefix="rows/deeper/r_")
    assert np.array_equal(BlockToeplitz.from_fftmatvec(tmp_path / "m").blocks, b)


@pytest.mark.parametrize("prefix", ["../escaped_", "/tmp/abs_", "a/../../b_"])
def test_save_with_escaping_prefix_is_rejected_and_writes_nothing(tmp_path, prefix):
    with pytest.raises(ValueError, match="prefix"):
        BlockToeplitz(np.ones((2, 2, 2))).save_fftmatvec(tmp_path / "d", prefix=prefix)
    assert not any(p.name.startswith(("escaped", "abs", "b_")) for p in tmp_path.rglob("*"))


def test_checksum_checked_as_fftmatvec_does(tmp_path):
    b = np.ones((2, 2, 2))
    BlockToeplitz(b).save_fftmatvec(tmp_path / "ok", checksum=42)
    assert np.array_equal(BlockToeplitz.from_fftmatvec(tmp_path / "ok").blocks, b)
    _meta(tmp_path / "ok" / "meta_adj", 2, 2, 2, checksum=43)
    with pytest.raises(ValueError, match="checksum 42 does not match 43"):
        BlockToeplitz.from_fftmatvec(tmp_path / "ok")
    BlockToeplitz(b).save_fftmatvec(tmp_path / "none")
    _meta(tmp_path / "none" / "meta_adj", 2, 2, 2, checksum=7)
    with pytest.raises(ValueError, match="no attribute 'checksum'"):
        BlockToeplitz.from_fftmatvec(tmp_path / "none")
    with pytest.raises(ValueError, match="checksum"):
        BlockToeplitz(b).save_fftmatvec(tmp_path / "big", checksum=2**40)


def test_failed_write_leaves_no_state(tmp_path):
    import subprocess, sys
    code = ("import numpy as np, strux\n"
            "for p in ('/dev/full', %r):\n"
            "    try: strux.write_vector(p, np.ones((2, 2)))\n"
            "    except ValueError as e: print('ERR', e)\n" % str(tmp_path))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                         env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    assert out.returncode == 0, out.stderr
    assert out.stdout.count("ERR") == 2 and "HDF5" not in out.stderr, out.stderr


def test_huge_sizes_are_clear_errors():
    one = np.ones((1, 1))
    with pytest.raises(ValueError, match="'nt'"):
        BlockToeplitz.from_lti(np.eye(1), np.ones((1, 4)), np.ones((4, 1)), 2**62)
    with pytest.raises((ValueError, MemoryError), match="'nt'"):
        BlockToeplitz.from_lti(np.eye(1), one, one, 2**44)
    with pytest.raises((ValueError, TypeError), match="'nt'"):
        BlockToeplitz.from_lti(np.eye(1), one, one, 2**70)


def test_meta_adj_linked_from_outside_is_not_read(tmp_path):
    secret = tmp_path / "secret.txt"
    secret.write_text("root:x:0:0:secret line\n" * 9)
    d = tmp_path / "m"
    d.mkdir()
    os.symlink(secret, d / "meta_adj")
    with pytest.raises(ValueError, match="outside the matrix directory") as e:
        BlockToeplitz.from_fftmatvec(d)
    assert "secret line" not in str(e.value)


def test_missing_row_behind_an_outside_link_reveals_nothing(tmp_path, matrix):
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    import shutil
    shutil.rmtree(matrix / "adj")
    os.symlink(outside, matrix / "adj")  # the rows would be looked up outside
    with pytest.raises(ValueError, match="outside the matrix directory") as e:
        BlockToeplitz.from_fftmatvec(matrix)
    assert "does not exist" not in str(e.value)


def test_save_does_not_write_through_links_out_of_the_directory(tmp_path):
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me")
    d = tmp_path / "m"
    d.mkdir()
    os.symlink(victim, d / "meta_adj")
    with pytest.raises(ValueError, match="outside the matrix directory"):
        BlockToeplitz(np.ones((2, 2, 2))).save_fftmatvec(d, prefix="r_")
    os.remove(d / "meta_adj")
    os.symlink(victim, d / "r_000001.h5")
    with pytest.raises(ValueError, match="outside the matrix directory"):
        BlockToeplitz(np.ones((2, 2, 2))).save_fftmatvec(d, prefix="r_")
    assert victim.read_text() == "keep me"
