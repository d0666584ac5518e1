"""einsum of ember.numpy: Einstein summation in the contraction order opt_einsum finds, each pairwise contraction
one dot_general. Ellipses broadcast, repeated indices within an operand take diagonals, size-1 dimensions
broadcast, and indices found in one operand only are summed before any contraction."""
from __future__ import annotations

from typing import Any, Sequence

import numpy as _np
import opt_einsum

from ember import _prims as lax
from ember._core import is_python_scalar
from ember._core import dtypes as dt
from ember._core.shape_poly import is_symbolic_dim

from ember._numpy.promotion import _as_operand, _promote
from ember._numpy.shape import ndim, reshape, shape
from ember._api.sharding import reshard
from ember._core.sharding import NamedSharding, P
from ember._prims.explicit import resolve

_OPTIMIZE = {True: "auto", False: None, None: None}


def _operands(name: str, operands: Sequence[Any]) -> tuple[str, list[Any]]:
    """(subscripts, arrays) from einsum's two calling conventions: a subscripts string then operands, or
    interleaved operands and index lists (numpy's einsum(a, [0, 1], b, [1, 2], [0, 2]))."""
    if not operands:
        raise ValueError(f"{name}: no subscripts given")
    if isinstance(operands[0], str):
        subscripts, arrays = operands[0], list(operands[1:])
    else:
        items = list(operands)
        arrays, parts = [], []
        output = None
        if len(items) % 2 == 1:
            output = items.pop()
        letters = opt_einsum.parser.get_symbol

        def text(ix: Sequence[Any]) -> str:
            return "".join("..." if i is Ellipsis else letters(int(i)) for i in ix)
        for k in range(0, len(items), 2):
            arrays.append(items[k])
            parts.append(text(items[k + 1]))
        subscripts = ",".join(parts) + ("->" + text(output) if output is not None else "")
    arrays = [_as_operand(a, name, i) for i, a in enumerate(arrays)]
    arrays = [_promote(name, a)[0] if is_python_scalar(a) or isinstance(a, (_np.ndarray, _np.generic)) else a
              for a in arrays]
    return subscripts, arrays


class _Shaped:
    """A stand-in with a shape, for opt_einsum's parser and path finder."""

    def __init__(self, shape: tuple[int, ...]) -> None:
        self.shape = shape


def _parse(name: str, subscripts: str, arrays: list[Any]) -> tuple[list[str], str]:
    try:
        inputs, output, _ = opt_einsum.parser.parse_einsum_input(
            [subscripts] + [_Shaped(shape(a)) for a in arrays])
    except (ValueError, TypeError) as err:
        raise ValueError(f"{name}: invalid subscripts {subscripts!r} for operands of shapes "
                         f"{[shape(a) for a in arrays]}: {err}") from None
    ins = inputs.split(",")
    if len(ins) != len(arrays):
        raise ValueError(f"{name}: {len(ins)} operand subscripts in {subscripts!r} but {len(arrays)} operands")
    for letters, a in zip(ins, arrays):
        if len(letters) != ndim(a):
            raise ValueError(f"{name}: subscripts {letters!r} do not match an operand of shape {shape(a)}")
    return ins, output


def _diagonal(x: Any, letters: str) -> tuple[Any, str]:
    """x with repeated letters reduced to their diagonal (once per letter)."""
    while True:
        repeated = next((c for c in letters if letters.count(c) > 1), None)
        if repeated is None:
            return x, letters
        i = letters.index(repeated)
        j = letters.index(repeated, i + 1)
        n = shape(x)[i]
        rest = [k for k in range(len(letters)) if k not in (i, j)]
        x = lax.transpose(x, tuple(rest + [i, j]))
        lead = shape(x)[:-2]
        flat = reshape(x, lead + (n * n,))
        x = lax.slice(flat, (0,) * len(lead) + (0,), lead + (n * n,), (1,) * len(lead) + (n + 1,)) if n else \
            reshape(flat, lead + (0,))
        letters = "".join(letters[k] for k in rest) + repeated


def einsum_path(subscripts: str, *operands: Any, optimize: Any = "auto") -> tuple[list[Any], str]:
    """opt_einsum's contraction path and its report, for these subscripts and operand shapes (as numpy's and
    jax.numpy's einsum_path)."""
    subscripts, arrays = _operands("einsum_path", (subscripts,) + operands)
    strategy = _OPTIMIZE.get(optimize, optimize) if not isinstance(optimize, list) else optimize
    return opt_einsum.contract_path(subscripts, *[_Shaped(shape(a)) for a in arrays], shapes=False,
                                    optimize=strategy or "auto")


def einsum(*operands: Any, out: Any = None, optimize: Any = "auto", precision: Any = None,
           preferred_element_type: Any = None, _dot_general: Any = None, out_sharding: Any = None) -> Any:
    """Einstein summation, as numpy's and jax.numpy's einsum: explicit ('ij,jk->ik') or implicit ('ij,jk')
    output, '...' broadcasting, repeated indices (diagonals, traces), the interleaved calling convention, and
    contraction in opt_einsum's order (optimize: 'auto', 'greedy', 'optimal', True, False or a path); precision
    (a level or a dot algorithm) is each contraction's, as lax.dot_general's.
    out_sharding (JAX's explicit sharding mode) splits the result: the last contraction computes it so split."""
    if out is not None:
        raise TypeError("einsum: the out argument is not supported (ember arrays are immutable)")
    out_sharding = resolve("einsum", out_sharding)
    subscripts, arrays = _operands("einsum", operands)
    ins, output = _parse("einsum", subscripts, arrays)
    if len(set(output)) != len(output):
        raise ValueError(f"einsum: output subscript {output!r} repeats an index")
    arrays = list(_promote("einsum", *arrays)) if len(arrays) > 1 else arrays
    sizes: dict[str, int] = {}
    for letters, x in zip(ins, arrays):
        for c, n in zip(letters, shape(x)):
            if n != 1:
                if sizes.setdefault(c, n) != n:
                    raise ValueError(f"einsum: index {c!r} has sizes {sizes[c]} and {n}")
            else:
                sizes.setdefault(c, 1)
    if set(output) - set("".join(ins)):
        raise ValueError(f"einsum: output subscripts {output!r} name indices absent from the operands")
    # each operand: diagonals, drop broadcast size-1 dims, sum indices nobody else needs
    work = []
    for k, (letters, x) in enumerate(zip(ins, arrays)):
        x, letters = _diagonal(x, letters)
        ones = [i for i, c in enumerate(letters) if shape(x)[i] == 1 and sizes[c] != 1]
        if ones:
            x = reshape(x, tuple(d for i, d in enumerate(shape(x)) if i not in ones))
            letters = "".join(c for i, c in enumerate(letters) if i not in ones)
        others = "".join(spec for j, spec in enumerate(ins) if j != k) + output
        lone = tuple(i for i, c in enumerate(letters) if c not in others)
        if lone:
            x = lax.reduce_sum(x, lone)
            letters = "".join(c for i, c in enumerate(letters) if i not in lone)
        work.append((x, letters))
    path = _contraction_path(work, output, optimize)
    want = None
    if isinstance(out_sharding, NamedSharding):  # (output letter -> its mesh axes)
        spec = tuple(out_sharding.spec) + (None,) * (len(output) - len(out_sharding.spec))
        want = (out_sharding.mesh, dict(zip(output, spec)))
    for step, pair in enumerate(path):
        picked = [work[i] for i in pair]
        work = [w for i, w in enumerate(work) if i not in pair]
        rest = "".join(spec for _, spec in work) + output
        if len(picked) == 1:
            x, letters = picked[0]
            keep = tuple(i for i, c in enumerate(letters) if c not in rest)
            if keep:
                x = lax.reduce_sum(x, keep)
                letters = "".join(c for c in letters if c in rest)
            work.append((x, letters))
            continue
        (x, lx), (y, ly) = picked[0], picked[1]
        for extra in picked[2:]:  # (paths of more than two operands: contract left to right)
            x, lx = _contract(x, lx, y, ly, rest + extra[1], preferred_element_type, precision)
            y, ly = extra
        work.append(_contract(x, lx, y, ly, rest, preferred_element_type, precision,
                              want if step == len(path) - 1 else None))
    (result, letters), = work
    drop = tuple(i for i, c in enumerate(letters) if c not in output)
    if drop:
        result = lax.reduce_sum(result, drop)
        letters = "".join(c for c in letters if c in output)
    # broadcast indices that were size 1 everywhere they appeared and were dropped
    missing = [c for c in output if c not in letters]
    if missing:
        result = reshape(result, shape(result) + (1,) * len(missing))
        letters += "".join(missing)
    result = lax.transpose(result, tuple(letters.index(c) for c in output))
    if preferred_element_type is not None:
        result = lax.convert_element_type(result, dt.check_user_dtype(preferred_element_type, "einsum"))
    return result if out_sharding is None else reshard(result, out_sharding)


def _contraction_path(work: list[tuple[Any, str]], output: str, optimize: Any) -> list[tuple[int, ...]]:
    if len(work) == 1:
        return [(0,)]
    if isinstance(optimize, list):
        steps = [tuple(p) for p in optimize if not isinstance(p, str)]
        return steps
    strategy = _OPTIMIZE.get(optimize, optimize) if isinstance(optimize, (bool, type(None))) else optimize
    if strategy is None:
        return [(0, 1)] * (len(work) - 1)
    spec = ",".join(letters for _, letters in work) + "->" + output
    # (a symbolic dimension, ember.export's, counts as 8 for the path, as JAX counts it)
    path, _ = opt_einsum.contract_path(spec, *[_Shaped(tuple(8 if is_symbolic_dim(d) else d for d in shape(x)))
                                               for x, _ in work], optimize=strategy)
    return [tuple(p) for p in path]


def _contract(x: Any, lx: str, y: Any, ly: str, rest: str, preferred: Any, precision: Any, want: Any = None
              ) -> tuple[Any, str]:
    """One pairwise contraction by dot_general (of this precision): shared letters still needed are batch
    dimensions, the others are contracted; letters of one operand alone that nobody needs are summed first. want:
    (mesh, letter -> mesh axes), how the product is split (an out_sharding)."""
    lone_x = tuple(i for i, c in enumerate(lx) if c not in ly and c not in rest)
    if lone_x:
        x = lax.reduce_sum(x, lone_x)
        lx = "".join(c for i, c in enumerate(lx) if i not in lone_x)
    lone_y = tuple(i for i, c in enumerate(ly) if c not in lx and c not in rest)
    if lone_y:
        y = lax.reduce_sum(y, lone_y)
        ly = "".join(c for i, c in enumerate(ly) if i not in lone_y)
    shared = [c for c in lx if c in ly]
    batch = [c for c in shared if c in rest]
    contract = [c for c in shared if c not in rest]
    dims = ((tuple(lx.index(c) for c in contract), tuple(ly.index(c) for c in contract)),
            (tuple(lx.index(c) for c in batch), tuple(ly.index(c) for c in batch)))
    letters = "".join(batch) + "".join(c for c in lx if c not in shared) + "".join(c for c in ly if c not in shared)
    split = None if want is None else NamedSharding(want[0], P(*[want[1].get(c) for c in letters]))
    return lax.dot_general(x, y, dims, precision=precision, preferred_element_type=preferred,
                           out_sharding=split), letters


__all__ = ["einsum", "einsum_path"]
