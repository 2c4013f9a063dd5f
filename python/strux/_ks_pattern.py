"""KS patterns, checked once for both backends (strux.ks and strux._cuda_ks import from here, so
neither imports the other)."""
from __future__ import annotations

import numbers


def pattern(pattern, name: str = "pattern") -> tuple:
    """(a, b, c, d) as Python ints, each >= 1."""
    try:
        p = tuple(pattern)
    except TypeError:
        raise ValueError(f"argument '{name}': expected a 4-tuple (a, b, c, d) of positive integers, "
                         f"got {pattern!r}") from None
    ok = len(p) == 4 and all(isinstance(v, numbers.Integral) and not isinstance(v, bool) for v in p)
    if not ok or any(not 1 <= int(v) <= 2**62 for v in p):
        raise ValueError(f"argument '{name}': expected a 4-tuple (a, b, c, d) of positive integers, "
                         f"got {pattern!r}")
    p = tuple(int(v) for v in p)
    if p[0] * p[1] * p[2] * p[3] > 2**62:
        raise ValueError(f"argument '{name}': a*b*c*d = {p[0] * p[1] * p[2] * p[3]} values overflow the "
                         f"sizes strux indexes (2^62), got {pattern!r}")
    return p


def patterns(patterns) -> list:
    """A non-empty list of compatible patterns (cols of π_p == rows of π_{p+1})."""
    if isinstance(patterns, (str, bytes)) or not hasattr(patterns, "__len__") or len(patterns) == 0:
        raise ValueError(f"argument 'patterns': expected a non-empty list of (a, b, c, d) patterns, "
                         f"got {patterns!r}")
    ps = [pattern(p, f"patterns[{q}]") for q, p in enumerate(patterns)]
    for q in range(len(ps) - 1):
        (a, _, c, d), (a2, b2, _, d2) = ps[q], ps[q + 1]
        if a * c * d != a2 * b2 * d2:
            raise ValueError(
                f"argument 'patterns': entries {q} and {q + 1} are not compatible: a*c*d of patterns[{q}] "
                f"{ps[q]} is {a * c * d} but a*b*d of patterns[{q + 1}] {ps[q + 1]} is {a2 * b2 * d2}")
    return ps


def rows(p) -> int:
    return p[0] * p[1] * p[3]


def cols(p) -> int:
    return p[0] * p[2] * p[3]
