"""Loads a script of the repository's bench/ folder as a module (the CPU models of the GPU kernels
and the bench drivers are scripts, not part of the strux package)."""
import importlib.util
import pathlib

BENCH = pathlib.Path(__file__).resolve().parents[2] / "bench"


def bench_module(name: str):
    """bench/<name>.py, executed as a fresh module named `name`."""
    spec = importlib.util.spec_from_file_location(name, BENCH / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
