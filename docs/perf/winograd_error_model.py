"""Rounding error of Winograd variants in a float32 model of the transforms, without a device: why
clconv has F(2x2, 7x7) and not F(3x3, 7x7).

Each variant F(M, R) is built by Toom-Cook from its interpolation points (sympy, exact fractions),
checked against the correlation it computes, then run on random tiles in float32 (the input and
weight transforms, the products summed over C channels, the output transform) and compared with
the float64 sum; beside it the same sum done directly in float32.  Errors are the largest over the
tiles, per unit of sqrt(C R^2) (the scale of a sum of C R^2 unit products).

    python docs/perf/winograd_error_model.py

On 2026-12-04 (64 channels, 500 tiles): F(4x4, 3x3) 1.6e-5 (14x the direct sum's), F(3x3, 5x5)
2.1e-5 (13x), F(2x2, 7x7) 1.9e-5 (6x); F(3x3, 7x7) with a ninth point 3 or 1/4: 5.2e-4 and 4.8e-4
(180-195x).  On 2026-12-07: F(4x4, 5x5) (kept) 2.7e-5 (16x), F(6x6, 3x3) (tried on PoCL, not kept)
3.6e-5 (27x).
"""
from fractions import Fraction

import numpy as np
import sympy as sp

# (M, R, name): the finite points (infinity is the last)
VARIANTS = {
    (4, 3, ""): [0, 1, -1, 2, -2],
    (3, 5, ""): [0, 1, -1, 2, -2, Fraction(1, 2)],
    (2, 7, ""): [0, 1, -1, 2, -2, Fraction(1, 2), Fraction(-1, 2)],
    (4, 5, ""): [0, 1, -1, 2, -2, Fraction(1, 2), Fraction(-1, 2)],
    (6, 3, ""): [0, 1, -1, 2, -2, Fraction(1, 2), Fraction(-1, 2)],
    (3, 7, "point 3"): [0, 1, -1, 2, -2, Fraction(1, 2), Fraction(-1, 2), 3],
    (3, 7, "point 1/4"): [0, 1, -1, 2, -2, Fraction(1, 2), Fraction(-1, 2), Fraction(1, 4)],
}


def toom_cook(m: int, r: int, points) -> tuple:
    """B^T, G, A^T of F(m, r) from ``points`` and infinity: y = A^T [(G g) . (B^T d)] is the
    correlation of d (m + r - 1 inputs) with g (r taps).  A^T's columns are the powers of each point
    up to m - 1, G's rows those up to r - 1 over the product of the point's differences from the
    others; B^T solves the identity, one column at a time."""
    alpha = m + r - 1
    assert len(points) == alpha - 1
    finite = [sp.Rational(p.numerator, p.denominator) if isinstance(p, Fraction) else sp.Integer(p) for p in points]
    at, g = sp.zeros(m, alpha), sp.zeros(alpha, r)
    for k, p in enumerate(finite):
        scale = sp.prod([p - q for q in finite if q != p])
        for i in range(m):
            at[i, k] = p**i
        for j in range(r):
            g[k, j] = p**j / scale
    at[m - 1, alpha - 1] = 1
    g[alpha - 1, r - 1] = 1
    bt = sp.zeros(alpha, alpha)
    for col in range(alpha):
        # sum_k AT[i, k] G[k, j] BT[k, col] = [col == i + j] for every output i and tap j
        system = sp.Matrix([[at[i, k] * g[k, j] for k in range(alpha)] for i in range(m) for j in range(r)])
        wanted = sp.Matrix([1 if col == i + j else 0 for i in range(m) for j in range(r)])
        solution = system.gauss_jordan_solve(wanted)[0]
        assert not solution.free_symbols, "the points do not determine B^T"
        bt[:, col] = solution
    return tuple(np.array(x.tolist(), dtype=np.float64) for x in (bt, g, at))


def correlation_holds(bt, g, at, m, r, rng) -> bool:
    taps, inputs = rng.standard_normal(r), rng.standard_normal(m + r - 1)
    expected = [sum(taps[j] * inputs[i + j] for j in range(r)) for i in range(m)]
    return np.allclose(at @ ((g @ taps) * (bt @ inputs)), expected, atol=1e-12)


def errors(bt, g, at, m, r, channels=64, tiles=500, seed=1) -> tuple[float, float]:
    """(Winograd's, the direct sum's) largest float32 error over ``tiles`` 2D tiles of ``channels``."""
    rng = np.random.default_rng(seed)
    alpha, f32 = m + r - 1, np.float32
    d = rng.standard_normal((tiles, channels, alpha, alpha))
    w = rng.standard_normal((channels, r, r))
    bt32, g32, at32 = bt.astype(f32), g.astype(f32), at.astype(f32)
    v = np.einsum("ak,tckl,bl->tcab", bt32, d.astype(f32), bt32, dtype=f32)
    u = np.einsum("aj,cjk,bk->cab", g32, w.astype(f32), g32, dtype=f32)
    products = np.einsum("cab,tcab->tab", u, v, dtype=f32)
    y = np.einsum("ia,tab,jb->tij", at32, products, at32, dtype=f32)
    exact, direct = np.zeros((tiles, m, m)), np.zeros((tiles, m, m), dtype=f32)
    for i in range(m):
        for k in range(m):
            window = d[:, :, i:i + r, k:k + r]
            exact[:, i, k] = np.einsum("tcab,cab->t", window, w)
            direct[:, i, k] = np.einsum("tcab,cab->t", window.astype(f32), w.astype(f32), dtype=f32)
    scale = np.sqrt(channels * r * r)
    return float(np.abs(y - exact).max() / scale), float(np.abs(direct - exact).max() / scale)


def main():
    rng = np.random.default_rng(0)
    for (m, r, name), points in VARIANTS.items():
        bt, g, at = toom_cook(m, r, points)
        assert correlation_holds(bt, g, at, m, r, rng)
        winograd, direct = errors(bt, g, at, m, r)
        print(f"F({m}x{m}, {r}x{r}) {name:10s} error {winograd:.2e}, direct sum {direct:.2e} ({winograd / direct:5.1f}x); "
              f"largest |B^T| {np.abs(bt).max():g}, smallest G entry {np.abs(g[g != 0]).min():.3g}")


if __name__ == "__main__":
    main()
