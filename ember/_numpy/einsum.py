"""einsum of ember.numpy: Einstein summation, contracted operand by operand with dot_general."""
from __future__ import annotations

from typing import Any

from ember import _prims as lax

from ember._numpy.promotion import _promote
from ember._numpy.shape import ndim, shape


def einsum(subscripts: str, *operands: Any) -> Any:
    """Einstein summation over explicit or implicit subscripts ("ij,jk->ik", "ij,jk"), operand by operand with
    dot_general. Repeated indices within one operand (diagonals) and '...' are not supported."""
    spec = subscripts.replace(" ", "")
    if "." in spec:
        raise NotImplementedError("einsum: '...' (ellipsis) subscripts are not supported yet")
    inputs_text, arrow, output = spec.partition("->")
    inputs = inputs_text.split(",")
    if len(inputs) != len(operands):
        raise ValueError(f"einsum: {len(inputs)} operand subscripts in {subscripts!r} but {len(operands)} operands")
    if not arrow:
        counts = {c: inputs_text.count(c) for c in inputs_text if c.isalpha()}
        output = "".join(sorted(c for c, n in counts.items() if n == 1))
    operands = list(_promote("einsum", *operands))
    for letters, x in zip(inputs, operands):
        if len(letters) != ndim(x):
            raise ValueError(f"einsum: subscripts {letters!r} do not match an operand of shape {shape(x)}")
        if len(set(letters)) != len(letters):
            raise NotImplementedError(f"einsum: repeated subscripts within one operand ({letters!r}) are not "
                                      "supported yet")
    sizes: dict[str, int] = {}
    for letters, x in zip(inputs, operands):
        for c, n in zip(letters, shape(x)):
            if sizes.setdefault(c, n) != n:
                raise ValueError(f"einsum: index {c!r} has sizes {sizes[c]} and {n}")

    def sum_unused(x: Any, letters: str, keep: str) -> tuple[Any, str]:
        axes = tuple(i for i, c in enumerate(letters) if c not in keep)
        if not axes:
            return x, letters
        return lax.reduce_sum(x, axes), "".join(c for c in letters if c in keep)

    result, letters = operands[0], inputs[0]
    for k in range(1, len(operands)):
        rest = "".join(inputs[k + 1:]) + output
        other, other_letters = operands[k], inputs[k]
        result, letters = sum_unused(result, letters, other_letters + rest)
        other, other_letters = sum_unused(other, other_letters, letters + rest)
        shared = [c for c in letters if c in other_letters]
        batch = [c for c in shared if c in rest]
        contract = [c for c in shared if c not in rest]
        dims = ((tuple(letters.index(c) for c in contract), tuple(other_letters.index(c) for c in contract)),
                (tuple(letters.index(c) for c in batch), tuple(other_letters.index(c) for c in batch)))
        result = lax.dot_general(result, other, dims)
        letters = ("".join(batch) + "".join(c for c in letters if c not in shared)
                   + "".join(c for c in other_letters if c not in shared))
    result, letters = sum_unused(result, letters, output)
    if set(output) - set(letters):
        raise ValueError(f"einsum: output subscripts {output!r} name indices absent from the operands")
    return lax.transpose(result, tuple(letters.index(c) for c in output))
