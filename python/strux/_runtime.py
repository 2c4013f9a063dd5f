"""Process-wide settings of the CPU backend: threads, FFT planning effort, FFTW wisdom.

The C++ library reads no environment variables and no files on its own; this module works out
the defaults once, at import, and passes them in:

- threads: the CPUs this process may run on (``os.sched_getaffinity``) capped by its cgroup CPU
  quota (``/sys/fs/cgroup/cpu.max``, or cgroup v1's ``cpu.cfs_quota_us``), unless
  ``OMP_NUM_THREADS`` is set, which then wins;
- FFTW wisdom: ``$XDG_CACHE_HOME/strux`` (``~/.cache/strux`` without it), loaded when present,
  written when a ``"measure"`` or ``"patient"`` plan is made.
"""
from __future__ import annotations

import contextlib
import math
import numbers
import os
import threading

from . import _ext

PLANNING = ("estimate", "measure", "patient")
_PLANNING_LOCK = threading.RLock()  # set_planning and the planning() context take turns


def _cgroup_cpus():
    """CPUs allowed by the cgroup quota (rounded up), or None when there is no quota."""
    try:
        with open("/sys/fs/cgroup/cpu.max") as f:  # cgroup v2: "<quota> <period>" or "max <period>"
            quota, period = f.read().split()[:2]
        if quota == "max":
            return None
        q, p = int(quota), int(period)
    except (OSError, ValueError):
        try:  # cgroup v1
            with open("/sys/fs/cgroup/cpu/cpu.cfs_quota_us") as f:
                q = int(f.read())
            with open("/sys/fs/cgroup/cpu/cpu.cfs_period_us") as f:
                p = int(f.read())
        except (OSError, ValueError):
            return None
    if q <= 0 or p <= 0:
        return None
    return max(1, math.ceil(q / p))


def available_cpus() -> int:
    """CPUs this process may use: its affinity mask, capped by its cgroup CPU quota."""
    try:
        n = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        n = os.cpu_count() or 1
    q = _cgroup_cpus()
    return max(1, min(n, q) if q else n)


def default_wisdom_dir():
    """$XDG_CACHE_HOME/strux, else ~/.cache/strux; None when neither resolves to an absolute
    path (no home directory): then wisdom stays in memory."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "strux") if os.path.isabs(base) else None


def set_num_threads(n: int) -> None:
    """Threads of the CPU backend, for every later call in this process (0 = the default:
    ``OMP_NUM_THREADS`` if set, else the CPUs of this process's affinity mask capped by its
    cgroup quota). BLAS inside strux follows the same count. Integer in [0, 4096]."""
    if isinstance(n, bool) or not isinstance(n, numbers.Integral):
        raise TypeError(f"argument 'n': expected an integer number of threads, got {type(n).__name__} {n!r}")
    if not 0 <= n <= _ext.max_threads:
        raise ValueError(f"argument 'n': expected an integer in [0, {_ext.max_threads}] (0 = default), got {n}")
    _ext.set_num_threads(int(n))


def get_num_threads() -> int:
    """Threads the CPU backend uses now."""
    return int(_ext.num_threads())


def set_planning(planning: str) -> None:
    """FFTW planning effort for FFT sizes not planned yet (process-wide).

    "estimate" (default): plans in microseconds from FFTW's heuristics, so a new size never
    stalls. "measure" / "patient": FFTW times candidate algorithms (seconds to minutes for
    large sizes, once), for long-running jobs that reuse the sizes; the result is saved as FFTW
    wisdom in ``wisdom_dir()`` and used by later processes, even under "estimate". Plans
    already cached with less effort are re-planned on their next use.
    """
    _check_planning(planning, "planning")
    with _PLANNING_LOCK:
        _ext.set_fft_planning(planning)


def _check_planning(value, name: str) -> None:
    if not isinstance(value, str) or value not in PLANNING:
        raise ValueError(f"argument '{name}': expected one of {', '.join(map(repr, PLANNING))}, got {value!r}")


def get_planning() -> str:
    return str(_ext.fft_planning())


@contextlib.contextmanager
def planning(planner):
    """Plans made inside the block use `planner` ("estimate", "measure", "patient"); None
    changes nothing. What operators take as ``planner=``::

        with strux.planning("measure"):
            op = strux.FFTConv(k, L)      # the same as strux.FFTConv(k, L, planner="measure")

    The process-wide setting is restored after the block; other threads that plan meanwhile
    wait (set_planning) or plan with at least this effort."""
    if planner is None:
        yield
        return
    _check_planning(planner, "planner")
    with _PLANNING_LOCK:
        old = get_planning()
        _ext.set_fft_planning(planner)
        try:
            yield
        finally:
            _ext.set_fft_planning(old)


def set_wisdom_dir(path) -> int:
    """Folder for FFTW wisdom (loaded now when present, rewritten after each measured plan);
    None keeps wisdom in memory only. Returns the number of wisdom files loaded."""
    if path is None:
        return int(_ext.set_wisdom_dir(""))
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"argument 'path': expected a folder (str or os.PathLike) or None, got {type(path).__name__}")
    return int(_ext.set_wisdom_dir(os.fspath(path)))


def wisdom_dir():
    """The wisdom folder in use, or None."""
    d = _ext.wisdom_dir()
    return d or None


def save_wisdom(path=None) -> None:
    """Writes the wisdom gathered so far into ``path`` (default: ``wisdom_dir()``)."""
    path = wisdom_dir() if path is None else path
    if path is None:
        raise ValueError("argument 'path': no folder given and no wisdom folder set (set_wisdom_dir)")
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"argument 'path': expected a folder (str or os.PathLike), got {type(path).__name__}")
    _ext.save_wisdom(os.fspath(path))


def _init() -> None:
    if "OMP_NUM_THREADS" not in os.environ:
        _ext.set_default_threads(max(1, min(available_cpus(), _ext.default_threads(), _ext.max_threads)))
    try:
        _ext.set_wisdom_dir(default_wisdom_dir() or "")
    except Exception:  # an unreadable cache is not worth failing an import for
        pass
