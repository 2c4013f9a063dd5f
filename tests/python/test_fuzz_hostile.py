"""Fuzz/property suite, hostile arguments: every public function called with one argument
replaced by None, a wrong type, a wrong rank or shape, an int/bool/complex/object array, an
empty array, a huge or negative integer, a bad option string, ... Each call must either give
the result of the valid call (when the replacement is a valid spelling of the same input, e.g. a
nested list) or raise ValueError / TypeError / MemoryError naming that argument (a missing file
may be FileNotFoundError naming it). Never a crash, a hang, a nanobind signature dump or a
wrong result."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import strux
from fuzz_common import FUZZ, TALLY, names_argument, run

R = np.random.default_rng(7)


def arr(*shape):
    return R.standard_normal(shape)


# Argument kinds: "array" (real), "carray" (real or complex), "opt" (optional array, None valid),
# "int", "str", "pattern", "patterns", "arrays", "flag", "path".
HOSTILE = {
    "array": ["None", "str", "scalar", "float", "bool", "object", "int-array", "complex", "rank+1",
              "shape+1", "empty", "list", "nan", "dict", "bool-array", "float128", "0-d"],
    "int": ["None", "str", "float", "bool", "neg", "zero", "2^70", "2^62", "np.int64", "np.float64", "list"],
    "str": ["None", "int", "upper", "empty", "bytes", "list"],
    "pattern": ["None", "short", "zero", "float", "str", "huge", "neg", "bool"],
    "flag": ["str", "int", "None", "np.bool_"],
    "path": ["None", "int", "missing", "list"],
}
HOSTILE["carray"] = HOSTILE["bcarray"] = HOSTILE["array"]  # bcarray: an array that broadcasts (scalars too)
HOSTILE["opt"] = HOSTILE["copt"] = [h for h in HOSTILE["array"] if h != "None"]
HOSTILE["optstr"] = [h for h in HOSTILE["str"] if h != "None"]  # a string whose None means a default
HOSTILE["prefix"] = ["None", "int", "empty", "bytes", "list", "escape", "absolute", "dotdot-inside", "newline"]
HOSTILE["int32"] = HOSTILE["nthreads"] = HOSTILE["int"]  # any 32-bit integer is valid (checksum, is_p2q)
HOSTILE["arrays"] = ["None", "str", "empty-list", "one-bad", "tuple"]
HOSTILE["patterns"] = ["None", "str", "empty", "incompatible", "one-bad"]


def hostile(kind, h, valid):
    """The replacement value and whether it is a valid spelling of `valid` (same result)."""
    if h == "None":
        return None, False
    if valid is None:  # an absent optional array: any array changes the call (result or named error)
        return hostile(kind, h, np.zeros((2, 3)))[0], "any"
    if kind == "bcarray" and h in ("scalar", "float", "0-d"):  # numpy's rules broadcast a scalar
        return hostile("carray", h, valid)[0], "any"
    if kind in ("array", "carray", "bcarray", "opt", "copt"):
        v = np.asarray(valid) if valid is not None else np.zeros((2, 3))
        return {
            "str": ("abc", False), "scalar": (3, False), "float": (2.5, False), "bool": (True, False),
            "object": (np.array(v.tolist(), dtype=object), False),
            "int-array": (np.ones(v.shape, np.int64), False),
            "complex": (v.astype(np.complex128), kind in ("carray", "bcarray", "copt")),
            "rank+1": (v[..., None], "any"), "shape+1": (np.zeros(v.shape[:-1] + (v.shape[-1] + 1,)), "any"),
            "empty": (np.zeros(v.shape[:-1] + (0,)), False), "list": (v.tolist(), True),
            "nan": (np.full(v.shape, np.nan), "any"), "dict": ({"a": 1}, False),
            "bool-array": (np.ones(v.shape, bool), False),
            "float128": (v.astype(np.longdouble), False), "0-d": (np.float64(1.0), False),
        }[h]
    if kind in ("int", "int32", "nthreads"):
        return {"str": (str(valid), False), "float": (float(valid) + 0.5, False), "bool": (True, False),
                "neg": (-1, kind == "int32"), "zero": (0, valid == 0 or kind in ("int32", "nthreads")), "2^70": (2**70, False), "2^62": (2**62, False),
                "np.int64": (np.int64(valid), True), "np.float64": (np.float64(valid), False),
                "list": ([valid], False)}[h]
    if kind in ("str", "optstr"):
        return {"int": (3, False), "upper": (valid.upper(), valid == valid.upper()), "empty": ("", False),
                "bytes": (valid.encode(), False), "list": ([valid], False)}[h]
    if kind == "prefix":
        return {"int": (3, False), "empty": ("", False), "bytes": (valid.encode(), False), "list": ([valid], False),
                "escape": ("../escaped_", False), "absolute": ("/tmp/strux_fuzz_hostile/abs_", False),
                "dotdot-inside": ("adj/../../x_", False), "newline": ("a\nb", False)}[h]
    if kind == "pattern":
        return {"short": ((1, 2, 3), False), "zero": ((0, 1, 1, 1), False), "float": ((1.5, 1, 1, 1), False),
                "str": ("abcd", False), "huge": ((2**62, 2**62, 1, 1), False), "neg": ((-1, 1, 1, 1), False),
                "bool": ((True, 1, 1, 1), False)}[h]
    if kind == "flag":
        return {"str": ("yes", False), "int": (2, False), "np.bool_": (np.bool_(valid), True)}[h]
    if kind == "path":
        # a path that does not exist: readers raise, writers create it (any result or a named error)
        return {"int": (3, False), "missing": ("/tmp/strux_fuzz_hostile/no/such/x", "any"), "list": (["a"], False)}[h]
    if kind == "arrays":
        return {"str": ("abc", False), "empty-list": ([], False), "one-bad": ([valid[0], "x"], False),
                "tuple": (tuple(valid), True)}[h]
    if kind == "patterns":
        return {"str": ("abc", False), "empty": ([], False), "incompatible": ([(1, 2, 3, 1), (1, 2, 3, 1)], False),
                "one-bad": ([valid[0], (0, 1, 1, 1)], False)}[h]
    raise AssertionError((kind, h))


U, K, DY = arr(2, 3, 8), arr(3, 4), arr(2, 3, 8)
BLOCKS, M43 = arr(4, 2, 3), arr(4, 3)


def _fftconv_op():
    return strux.FFTConv(K, 8)


def _toep(layout="time-major"):
    return strux.BlockToeplitz(BLOCKS, layout=layout)

W1 = arr(2, 3, 2, 1)  # pattern (2, 3, 2, 1): M = 6, N = 4
WS = [arr(2, 3, 2, 1), arr(2, 2, 3, 1)]  # chain (2,3,2,1) then (2,2,3,1): cols 4 = rows 4; N = 6

# name -> (function(**kwargs), valid kwargs, {argument: kind})
CASES = {
    "fftconv": (lambda **a: strux.fftconv(a["u"], a["k"], mode=a["mode"], pregate=a["pregate"],
                                          postgate=a["postgate"], skip=a["skip"]),
                dict(u=U, k=K, mode="causal", pregate=arr(2, 3, 8), postgate=None, skip=arr(3)),
                dict(u="array", k="array", mode="str", pregate="opt", postgate="opt", skip="opt")),
    "fftconv_vjp": (lambda **a: strux.fftconv_vjp(a["dy"], a["u"], a["k"], mode=a["mode"], skip=a["skip"]),
                    dict(dy=DY, u=U, k=K, mode="circular", skip=arr(3)),
                    dict(dy="array", u="array", k="array", mode="str", skip="opt")),
    "FFTConv": (lambda **a: strux.FFTConv(a["k"], a["L"], mode=a["mode"])(U),
                dict(k=K, L=8, mode="causal"), dict(k="array", L="int", mode="str")),
    "FFTConv.vjp": (lambda **a: _fftconv_op().vjp(a["dy"], a["u"], postgate=a["postgate"]),
                    dict(dy=DY, u=U, postgate=arr(2, 3, 8)), dict(dy="array", u="array", postgate="opt")),
    "BlockToeplitz": (lambda **a: strux.BlockToeplitz(a["blocks"], layout=a["layout"]).matvec(M43),
                      dict(blocks=arr(4, 2, 3), layout="time-major"), dict(blocks="array", layout="str")),
    "BlockToeplitz.matvec": (lambda **a: _toep().matvec(a["m"]), dict(m=arr(4, 3)), dict(m="array")),
    "BlockToeplitz.rmatvec": (lambda **a: _toep("space-major").rmatvec(a["d"]), dict(d=arr(2, 4, 2)),
                              dict(d="array")),
    "BlockToeplitz.vjp": (lambda **a: _toep().vjp(a["m"], a["dd"]), dict(m=arr(4, 3), dd=arr(4, 2)),
                          dict(m="array", dd="array")),
    "BlockToeplitz.to_dense": (lambda **a: _toep().to_dense(a["layout"]), dict(layout="space-major"),
                               dict(layout="optstr")),
    "BlockToeplitz.from_lti": (lambda **a: strux.BlockToeplitz.from_lti(a["A"], a["B"], a["C"], a["nt"], D=a["D"],
                                                                        layout=a["layout"]).blocks,
                               dict(A=arr(3, 3) * 0.3, B=arr(3, 2), C=arr(4, 3), nt=5, D=arr(4, 2), layout="time-major"),
                               dict(A="array", B="array", C="array", nt="int", D="opt", layout="str")),
    "ks_matmul": (lambda **a: strux.ks_matmul(a["x"], a["w"], a["pattern"], layout=a["layout"]),
                  dict(x=arr(5, 4), w=W1, pattern=(2, 3, 2, 1), layout="bsf"),
                  dict(x="array", w="array", pattern="pattern", layout="str")),
    "ks_matmul_vjp": (lambda **a: strux.ks_matmul_vjp(a["dy"], a["x"], a["w"], a["pattern"], layout=a["layout"]),
                      dict(dy=arr(6, 5), x=arr(4, 5), w=W1, pattern=(2, 3, 2, 1), layout="bsl"),
                      dict(dy="array", x="array", w="array", pattern="pattern", layout="str")),
    "ks_chain": (lambda **a: strux.ks_chain(a["x"], a["ws"], a["patterns"]),
                 dict(x=arr(3, 6), ws=WS, patterns=[(2, 3, 2, 1), (2, 2, 3, 1)]),
                 dict(x="array", ws="arrays", patterns="patterns")),
    "ks_chain_vjp": (lambda **a: strux.ks_chain_vjp(a["dy"], a["x"], a["ws"], a["patterns"]),
                     dict(dy=arr(3, 6), x=arr(3, 6), ws=WS, patterns=[(2, 3, 2, 1), (2, 2, 3, 1)]),
                     dict(dy="array", x="array", ws="arrays", patterns="patterns")),
    "ks_dense": (lambda **a: strux.ks_dense(a["w"], a["pattern"]), dict(w=W1, pattern=(2, 3, 2, 1)),
                 dict(w="array", pattern="pattern")),
    "diag_scan": (lambda **a: strux.diag_scan(a["a"], a["b"], h0=a["h0"], return_final=a["return_final"]),
                  dict(a=arr(2, 5, 3) * 0.5, b=arr(2, 5, 3), h0=arr(2, 3), return_final=True),
                  dict(a="bcarray", b="carray", h0="copt", return_final="flag")),
    "diag_scan_vjp": (lambda **a: strux.diag_scan_vjp(a["dh"], a["a"], a["b"], h0=a["h0"], dh_last=a["dh_last"]),
                      dict(dh=arr(2, 5, 3), a=arr(2, 5, 3) * 0.5, b=arr(2, 5, 3), h0=None, dh_last=arr(2, 3)),
                      dict(dh="carray", a="bcarray", b="carray", h0="copt", dh_last="copt")),
    "circulant_scan": (lambda **a: strux.circulant_scan(a["a"], a["u"], h0=a["h0"], fourier=a["fourier"]),
                       dict(a=arr(2, 5, 4) * 0.1, u=arr(2, 5, 4), h0=arr(2, 4), fourier=False),
                       dict(a="array", u="array", h0="opt", fourier="flag")),
    "circulant_scan_vjp": (lambda **a: strux.circulant_scan_vjp(a["dh"], a["a"], a["u"], h0=a["h0"],
                                                                dh_last=a["dh_last"]),
                           dict(dh=arr(2, 5, 4), a=arr(2, 5, 4) * 0.1, u=arr(2, 5, 4), h0=arr(2, 4), dh_last=None),
                           dict(dh="array", a="array", u="array", h0="opt", dh_last="opt")),
    "block_circulant_scan": (lambda **a: strux.block_circulant_scan(a["a"], a["u"], h0=a["h0"]),
                             dict(a=arr(1, 4, 2, 2, 3) * 0.1, u=arr(1, 4, 6), h0=None),
                             dict(a="array", u="array", h0="opt")),
    "block_circulant_scan_vjp": (lambda **a: strux.block_circulant_scan_vjp(a["dh"], a["a"], a["u"]),
                                 dict(dh=arr(1, 4, 6), a=arr(1, 4, 2, 2, 3) * 0.1, u=arr(1, 4, 6)),
                                 dict(dh="array", a="array", u="array")),
    "set_num_threads": (lambda **a: (strux.set_num_threads(a["n"]), strux.set_num_threads(0))[1],
                        dict(n=2), dict(n="nthreads")),
}
if strux._ext.has_hdf5:
    CASES["write_vector"] = (lambda **a: strux.write_vector(a["path"], a["x"], space=a["space"]),
                             dict(path="/tmp/strux_fuzz_hostile/v.h5", x=arr(3, 4), space="obs"),
                             dict(path="path", x="array", space="str"))
    CASES["read_vector"] = (lambda **a: (strux.write_vector("/tmp/strux_fuzz_hostile/r.h5", arr(2, 3)),
                                         strux.read_vector(a["path"])[0].shape)[1],
                            dict(path="/tmp/strux_fuzz_hostile/r.h5"), dict(path="path"))
    CASES["save_fftmatvec"] = (lambda **a: _toep().save_fftmatvec(a["directory"], prefix=a["prefix"],
                                                                  is_p2q=a["is_p2q"], checksum=a["checksum"]),
                               dict(directory="/tmp/strux_fuzz_hostile/m", prefix="adj/vec_", is_p2q=0, checksum=5),
                               dict(directory="path", prefix="prefix", is_p2q="int32", checksum="int32"))
    CASES["from_fftmatvec"] = (lambda **a: (_toep().save_fftmatvec("/tmp/strux_fuzz_hostile/f"),
                                            strux.BlockToeplitz.from_fftmatvec(a["directory"], layout=a["layout"]).blocks)[1],
                               dict(directory="/tmp/strux_fuzz_hostile/f", layout="space-major"),
                               dict(directory="path", layout="str"))

ITEMS = [(name, arg, h) for name, (_, _, spec) in CASES.items() for arg, kind in spec.items()
         for h in HOSTILE[kind]]
# Deterministic coverage: every (function, argument, hostile kind) once, in a fixed order.


def same(x, y):
    if isinstance(x, tuple) or isinstance(y, tuple):
        return len(x) == len(y) and all(same(a, b) for a, b in zip(x, y))
    if isinstance(x, list):
        return len(x) == len(y) and all(same(a, b) for a, b in zip(x, y))
    if x is None or y is None:
        return x is y
    return np.allclose(np.asarray(x), np.asarray(y), rtol=1e-10, atol=1e-12, equal_nan=True)


def category(kind, h):
    if h == "None" or h in ("str", "dict", "object", "bool", "int", "bytes", "list") and kind not in ("array",):
        return "wrong types and None"
    if h in ("escape", "absolute", "dotdot-inside", "missing"):
        return "paths outside the directory, missing paths"
    if h in ("2^70", "2^62", "huge", "neg", "zero"):
        return "huge, negative and zero sizes"
    if h in ("rank+1", "shape+1", "empty", "0-d", "scalar", "short", "incompatible", "one-bad", "empty-list", "empty"):
        return "wrong ranks and shapes"
    if h in ("int-array", "complex", "bool-array", "float128", "float", "np.float64"):
        return "wrong dtypes and number types"
    return "other hostile values"


@pytest.mark.parametrize("chunk", range(4))
def test_hostile_arguments(chunk):
    """All (function, argument, hostile kind) triples, in four chunks."""
    for name, arg, h in ITEMS[chunk::4]:
        fn, valid, spec = CASES[name]
        kind = spec[arg]
        value, ok = hostile(kind, h, valid[arg])
        args = dict(valid, **{arg: value})
        cat = category(kind, h)
        names = [arg] if ok != "any" and h != "incompatible" else None  # None: any argument
        if ok is True:
            base = fn(**valid)
            run(cat, lambda: fn(**args), names, check=lambda r: None if same(r, base) else (_ for _ in ()).throw(
                AssertionError(f"{name}({arg}={h}): a valid spelling changed the result")))
        elif ok == "any":  # NaN values, another valid size: any result or a named error
            run(cat, lambda: fn(**args), names)
        else:
            try:
                run(cat, lambda: fn(**args), names, expect_error=True)
            except AssertionError as e:
                raise AssertionError(f"{name}({arg}={h}): {e}") from e.__cause__


@FUZZ
@given(st.sampled_from(sorted(CASES)), st.integers(0, 2**31))
def test_hostile_mixtures(name, seed):
    """Two arguments replaced at once: still a result or an error naming one of them."""
    fn, valid, spec = CASES[name]
    rng = np.random.default_rng(seed)
    picks = rng.choice(sorted(spec), size=min(2, len(spec)), replace=False)
    args, names, anybad = dict(valid), list(picks), False
    for a in picks:
        hs = HOSTILE[spec[a]]
        value, ok = hostile(spec[a], hs[rng.integers(len(hs))], valid[a])
        args[a] = value
        anybad |= ok is False
    try:
        fn(**args)
    except (ValueError, TypeError, MemoryError, FileNotFoundError) as e:
        assert names_argument(e, names + (list(spec) if True else [])), f"{name}: {e}"
