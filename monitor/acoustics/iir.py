"""Streaming IIR filters in numpy alone: second-order sections and first-order recursions.

The sound level meter's one filter implementation (its A/C weighting cascade and its F/S
detectors). It replaces ``scipy.signal.sosfilt``/``lfilter`` there so that ``minewatch levels``
does not import ``scipy.signal``, whose import alone takes several times numpy's (docs/
PERFORMANCE.md, Start-up); scipy still designs the filters (monitor/acoustics/iec61672.py), and the tests
use it as the reference.

Method (exact up to floating-point rounding, no approximation): the filter is one linear
state-space system ``y[k] = C s[k] + D x[k]``, ``s[k+1] = A s[k] + B x[k]`` (a cascade of
sections is one system, with an output after any section). The samples are cut into blocks of
``block`` samples; within a block every output is a fixed linear function of the block's
samples and the state at its start, so all blocks are filtered by one matrix product once the
block-start states are known. Those follow ``s[j+1] = A**L s[j] + g[j]`` (``g[j]``: block ``j``'s
samples carried to its end), a linear recursion solved for all blocks at once by a blocked
scan: groups of ``_GROUP`` blocks are reduced to one step each, the (``_GROUP`` times shorter)
recursion over groups is solved the same way, and each group's states follow from its start
state by one more product. No Python loop runs per block, and the work is matrix products (BLAS).

Numerics: a cascade of sections in its natural (direct form) state has a badly scaled state
for poles near 1 (the A/C weighting's 20.6 Hz double pole): the powers of ``A`` grow to ~100
before they decay, and the block method then lost two digits against sosfilt. The system is
therefore run in its balanced realization (equal, diagonal controllability and observability
Gramians), where ``A`` and its powers are contractions: float64 results then agree with
sosfilt to its own rounding, and float32 ones are far more accurate than float32 sosfilt
(whose float32 coefficients move the double pole). The state seen from outside (``state``)
stays in the original coordinates (sosfilt's ``zi`` layout for sections).
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike, DTypeLike, NDArray

Float = np.floating
Matrix = NDArray[np.float64]

# Samples per block. Measured on the 2-core development machine (one BLAS thread, the meter's
# 6-state, 2-output cascade): 24-32 fastest in float64, 32 in float32; larger blocks spend more
# in the triangular block product (its cost grows with the block), smaller ones in the scan.
DEFAULT_BLOCK = 32
# Blocks reduced to one step per level of the scan (8 measured fastest among 4, 8, 16, 32).
_GROUP = 8
# Blocks filtered per pass: bounded temporaries that stay in cache (a meter chunk, ~128 k samples,
# is one pass).
_PASS_BLOCKS = 4096


class StreamingFilter:
    """A linear filter with one input and one or more outputs, run block-wise with its state
    carried across calls to :meth:`process` (so the split into calls does not change the
    output beyond rounding).

    ``dtype`` (float32 or float64) is the processing precision; the matrices are computed in
    extended precision and rounded to it once. Build one with :meth:`from_sections` or
    :meth:`first_order`.
    """

    def __init__(
        self,
        a: ArrayLike,
        b: ArrayLike,
        c: ArrayLike,
        d: ArrayLike,
        dtype: DTypeLike = np.float64,
        block: int = DEFAULT_BLOCK,
    ) -> None:
        a_m = np.atleast_2d(np.asarray(a, dtype=np.float64))
        n = a_m.shape[0]
        b_v = np.asarray(b, dtype=np.float64).reshape(n)
        c_m = np.asarray(c, dtype=np.float64).reshape(-1, n)
        d_v = np.asarray(d, dtype=np.float64).reshape(c_m.shape[0])
        if a_m.shape != (n, n) or n == 0:
            raise ValueError(f"state matrix must be square and non-empty, got shape {a_m.shape}")
        if not np.all(np.isfinite(a_m)) or np.max(np.abs(np.linalg.eigvals(a_m))) >= 1.0:
            raise ValueError("filter is not stable (a pole on or outside the unit circle)")
        if block < 1:
            raise ValueError(f"block must be at least 1 sample, got {block}")
        requested = np.dtype(dtype)
        if requested not in (np.dtype(np.float32), np.dtype(np.float64)):
            raise ValueError(f"dtype must be float32 or float64, not {requested}")
        self.dtype: np.dtype[Float] = np.dtype(np.float32 if requested == np.float32 else np.float64)
        self.block = block
        self.order = n
        self.n_outputs = c_m.shape[0]

        # Run in balanced coordinates s = to_balanced @ z; z (the caller's state) = from_balanced @ s.
        # The matrices below are derived in extended precision where the platform has it (x86:
        # 64-bit mantissa) and rounded once: A**k computed in float64 carries ~k rounding errors
        # of the same sign into every block, which the sample-by-sample recursion does not.
        forward, backward = _balancing_transform(a_m, b_v, c_m)
        exact = np.longdouble
        forward_x = forward.astype(exact)
        backward_x = backward.astype(exact)
        backward_x = backward_x @ (2 * np.eye(n, dtype=exact) - forward_x @ backward_x)  # one Newton step
        self._from_balanced, self._to_balanced = forward, backward_x.astype(np.float64)
        a_x = backward_x @ a_m.astype(exact) @ forward_x
        b_x = backward_x @ b_v.astype(exact)
        c_x = c_m.astype(exact) @ forward_x
        d_x = d_v.astype(exact)

        # powers[k] = A**k and carried[k] = A**k B for k = 0 .. block.
        powers = np.empty((block + 1, n, n), dtype=exact)
        powers[0] = np.eye(n, dtype=exact)
        for k in range(block):
            powers[k + 1] = a_x @ powers[k]
        carried = powers @ b_x
        # Impulse response h[0] = D, h[k] = C A**(k-1) B, and observe[o, i] = C[o] A**i.
        impulse = np.concatenate([d_x[None, :], carried[: block - 1] @ c_x.T])  # (block, outputs)
        observe = np.einsum("on,inm->oim", c_x, powers[:block])  # (outputs, block, n)
        # One product per output maps [block samples, start state] to the block's outputs:
        # rows 0..block-1 the transposed lower-triangular Toeplitz matrix of h, then observe^T.
        lag = np.arange(block)[None, :] - np.arange(block)[:, None]  # column i minus row j
        weights = np.zeros((self.n_outputs, block + n, block), dtype=exact)
        for o in range(self.n_outputs):
            weights[o, :block] = np.where(lag >= 0, impulse[np.clip(lag, 0, None), o], 0.0)
            weights[o, block:] = observe[o].T
        self._weights = weights.astype(self.dtype)
        self._carry_block = carried[block - 1 :: -1].astype(self.dtype)  # (block, n): sample j -> end state
        self._carried = carried.astype(self.dtype)
        self._powers = powers.astype(self.dtype)
        self._scan = _BlockedScan(powers[block], self.dtype)
        self._state = np.zeros(n, dtype=self.dtype)

    # -- construction ------------------------------------------------------------------------

    @classmethod
    def from_sections(
        cls, *cascade: ArrayLike, dtype: DTypeLike = np.float64, block: int = DEFAULT_BLOCK
    ) -> StreamingFilter:
        """Second-order sections (rows ``b0 b1 b2 a0 a1 a2``, as scipy's sos) in cascade.

        Each argument is a group of sections run one after another; the filter has one output
        per group, taken after its last section (e.g. ``from_sections(sos_c, sos_a_from_c)``
        gives the C-weighted and the A-weighted signal). ``state`` is sosfilt's ``zi`` of all
        the sections, in order, flattened.
        """
        sections = [np.asarray(s, dtype=np.float64).reshape(-1, 6) for s in cascade]
        if not sections or any(s.shape[0] == 0 for s in sections):
            raise ValueError("at least one group of at least one second-order section is needed")
        n = 2 * sum(s.shape[0] for s in sections)
        a = np.zeros((n, n))
        b = np.zeros(n)
        c = np.zeros(n)  # the cascade so far, as an output: y = c @ z + d x
        d = 1.0
        outputs_c, outputs_d = [], []
        i = 0
        for group in sections:
            for b0, b1, b2, a0, a1, a2 in group:
                if a0 == 0.0:
                    raise ValueError("a second-order section has a0 = 0")
                b0, b1, b2, a1, a2 = b0 / a0, b1 / a0, b2 / a0, a1 / a0, a2 / a0
                # Transposed direct form II (sosfilt's): y = b0 u + z0, z0' = b1 u - a1 y + z1,
                # z1' = b2 u - a2 y, driven by u = the cascade's output so far.
                gain = np.array([b1 - a1 * b0, b2 - a2 * b0])
                a[i : i + 2, i : i + 2] = [[-a1, 1.0], [-a2, 0.0]]
                a[i : i + 2, :] += np.outer(gain, c)
                b[i : i + 2] = gain * d
                c = b0 * c
                c[i] += 1.0
                d = b0 * d
                i += 2
            outputs_c.append(c.copy())
            outputs_d.append(d)
        return cls(a, b, np.array(outputs_c), np.array(outputs_d), dtype=dtype, block=block)

    @classmethod
    def first_order(
        cls, pole: float, dtype: DTypeLike = np.float64, block: int = DEFAULT_BLOCK
    ) -> StreamingFilter:
        """``y[k] = pole * y[k-1] + x[k]``; ``state`` is ``[y[-1]]``, the last output."""
        return cls([[pole]], [1.0], [[pole]], [1.0], dtype=dtype, block=block)

    # -- state -------------------------------------------------------------------------------

    @property
    def state(self) -> Matrix:
        """The state to carry into the next sample, in the original coordinates (a copy)."""
        return np.asarray(self._from_balanced @ self._state.astype(np.float64), dtype=np.float64)

    @state.setter
    def state(self, value: ArrayLike) -> None:
        z = np.asarray(value, dtype=np.float64).reshape(-1)
        if z.shape != (self.order,):
            raise ValueError(f"state must have {self.order} values, got {z.size}")
        self._state = (self._to_balanced @ z).astype(self.dtype)

    def reset(self) -> None:
        self._state = np.zeros(self.order, dtype=self.dtype)

    # -- filtering ---------------------------------------------------------------------------

    def process(self, samples: ArrayLike) -> NDArray[Float]:
        """Filter ``samples`` (1-D) from the carried state; returns ``(n_outputs, len)``."""
        x = np.asarray(samples, dtype=self.dtype)
        if x.ndim != 1:
            raise ValueError(f"expected 1-D samples, got shape {x.shape}")
        out = np.empty((self.n_outputs, x.size), dtype=self.dtype)
        step = self.block * _PASS_BLOCKS
        for start in range(0, x.size, step):
            self._pass(x[start : start + step], out[:, start : start + step])
        return out

    def _pass(self, x: NDArray[Float], out: NDArray[Float]) -> None:
        length, n = self.block, self.order
        blocks, tail = divmod(x.size, length)
        state = self._state
        whole = blocks * length
        if blocks:
            # [samples of block j, state at its start] per row: one product gives every output.
            extended = np.empty((blocks, length + n), dtype=self.dtype)
            extended[:, :length] = x[:whole].reshape(blocks, length)
            carried = extended[:, :length] @ self._carry_block
            starts, state = self._scan.run(carried, state)
            extended[:, length:] = starts
            for o in range(self.n_outputs):
                np.matmul(extended, self._weights[o], out=out[o, :whole].reshape(blocks, length))
        if tail:
            rest = x[whole:]
            out[:, whole:] = rest @ self._weights[:, :tail, :tail] + state @ self._weights[:, length:, :tail]
            state = self._powers[tail] @ state + rest @ self._carried[tail - 1 :: -1]
        self._state = state


class _BlockedScan:
    """Solves ``s[j+1] = M s[j] + g[j]`` for all j at once: the states before each step.

    Level k groups ``_GROUP`` steps of the level below (transition ``M**(_GROUP**k)``): one
    product sums each group's inputs into one step, the shorter recursion is solved
    recursively, and one product spreads each group's start state over its steps.
    """

    def __init__(self, transition: NDArray[np.longdouble], dtype: np.dtype[Float]) -> None:
        self._dtype = dtype
        self._transitions = [transition]  # in extended precision, like StreamingFilter's matrices
        # Per level: (spread, total, transition), in the processing dtype.
        self._levels: list[tuple[NDArray[Float], NDArray[Float], NDArray[Float]]] = []

    def _level(self, k: int) -> tuple[NDArray[Float], NDArray[Float], NDArray[Float]]:
        while len(self._levels) <= k:
            level = len(self._levels)
            m = self._transitions[level]
            n = m.shape[0]
            powers = [np.eye(n, dtype=m.dtype)]
            for _ in range(_GROUP):
                powers.append(m @ powers[-1])
            self._transitions.append(powers[_GROUP])
            # spread: [g of the group's steps, start state] -> the state before each step.
            spread = np.zeros(((_GROUP + 1) * n, _GROUP * n), dtype=m.dtype)
            for j in range(_GROUP):
                for i in range(j):
                    spread[i * n : (i + 1) * n, j * n : (j + 1) * n] = powers[j - 1 - i].T
                spread[_GROUP * n :, j * n : (j + 1) * n] = powers[j].T
            # total: the group's g -> their sum carried to the group's end.
            total = np.vstack([powers[_GROUP - 1 - i].T for i in range(_GROUP)])
            self._levels.append(
                (spread.astype(self._dtype), total.astype(self._dtype), m.astype(self._dtype))
            )
        return self._levels[k]

    def run(
        self, g: NDArray[Float], start: NDArray[Float], level: int = 0
    ) -> tuple[NDArray[Float], NDArray[Float]]:
        steps, n = g.shape
        spread, total, transition = self._level(level)
        if steps <= _GROUP:
            states = np.empty((steps + 1, n), dtype=self._dtype)
            states[0] = start
            for j in range(steps):
                states[j + 1] = transition @ states[j] + g[j]
            return states[:steps], states[steps]
        groups = -(-steps // _GROUP)
        # Zero inputs pad the last group: they leave the states before them unchanged.
        extended = np.zeros((groups, (_GROUP + 1) * n), dtype=self._dtype)
        grouped = extended[:, : _GROUP * n].reshape(groups, _GROUP, n)  # a view
        full = steps // _GROUP
        grouped[:full] = g[: full * _GROUP].reshape(full, _GROUP, n)
        if full < groups:
            grouped[full, : steps - full * _GROUP] = g[full * _GROUP :]
        group_starts, end = self.run(extended[:, : _GROUP * n] @ total, start, level + 1)
        extended[:, _GROUP * n :] = group_starts
        states = (extended @ spread).reshape(groups * _GROUP, n)
        if groups * _GROUP == steps:
            return states, end
        return states[:steps], states[steps]


def _balancing_transform(a: Matrix, b: Matrix, c: Matrix) -> tuple[Matrix, Matrix]:
    """``(T, T^-1)`` taking the system to its balanced realization (square-root method).

    Falls back to the identity for a system that is not minimal (a state that the input does
    not reach or the outputs do not see has a zero Gramian direction and cannot be balanced).
    """
    n = a.shape[0]
    controllability = _gramian(a, b[:, None])
    observability = _gramian(a.T, c.T)
    w_c, v_c = np.linalg.eigh(controllability)
    w_o, v_o = np.linalg.eigh(observability)
    identity = np.eye(n), np.eye(n)
    if not (w_c[0] > 0.0 and w_o[0] > 0.0):
        return identity
    root_c = v_c * np.sqrt(w_c)
    root_o = v_o * np.sqrt(w_o)
    u, hankel, vt = np.linalg.svd(root_o.T @ root_c)
    if not hankel[-1] > 0.0:
        return identity
    scale = 1.0 / np.sqrt(hankel)
    forward = (root_c @ vt.T) * scale
    backward = (u * scale).T @ root_o.T
    # Near-zero Gramian directions (a state the input hardly reaches or the outputs hardly
    # see; the weighting filters' are ~1e-15 of the largest at 400 kHz) can still be balanced,
    # but those of a non-minimal system are rounding noise: check that the result is a
    # similarity transform with a contracting state matrix, or keep the original coordinates.
    balanced = backward @ a @ forward
    if (
        not np.all(np.isfinite(forward))
        or np.max(np.abs(backward @ forward - np.eye(n))) > 1e-9
        or np.linalg.norm(balanced, 2) > 1.0 + 1e-6
    ):
        return identity
    return forward, backward


def _gramian(a: Matrix, b: Matrix) -> Matrix:
    """The solution W of ``W = A W A^T + B B^T`` (discrete Lyapunov equation), via Kronecker."""
    n = a.shape[0]
    solved = np.linalg.solve(np.eye(n * n) - np.kron(a, a), (b @ b.T).reshape(-1))
    w = solved.reshape(n, n)
    return np.asarray((w + w.T) / 2, dtype=np.float64)
