"""ember.experimental.rnn, as jax.experimental.rnn: a multi-layer, optionally bidirectional LSTM over cuDNN's flat
weight layout (docs/nn.md, LSTM). JAX's lstm calls cuDNN and fails on a CPU; ember's is the reference computation
(lax.scan over time, JAX's lstm_ref step for step) with a hand-written reverse-mode rule, so it runs on the CPU
and its gradients compose with jit and vmap.

The weights are one flat vector in cuDNN's order. Pseudo-layer p is layer p // D's direction p % D (D = 2 when
bidirectional: forward, then reverse; else 1). All the matrices come first, pseudo-layer by pseudo-layer, W_ih^p
(4H x input width) then W_hh^p (4H x H), then all the biases the same way, b_ih^p then b_hh^p (4H each); the input
width is input_size for layer 0 and D*H above it. Each 4H block stacks the gates in the order i, f, g, o
(input, forget, cell, output: PyTorch's torch.nn.LSTM), so a step is

    z = (x W_ih^T + b_ih) + h W_hh^T + b_hh,   i, f, o = sigmoid(z_i, z_f, z_o),   g = tanh(z_g)
    c' = f c + i g,   h' = o tanh(c')

The inputs are batch-first, (batch, time, features). seq_lengths (int32, one per sequence) masks padding as JAX's
lstm_ref does: every sequence runs over all the steps, the outputs at and past its length are zeros, and the
final states are those after its last step (a length of 0 gives those after the whole padded run, by JAX's index
rule: the step index length - 1 wraps when negative and is clamped into range). The reverse direction reads each
sequence backwards from its last real step, padding kept at the end, and its outputs are put back in time order.
A length above max_seq_length is outside JAX's definition (its forward reads the last step, its derivative drops
that step's cotangent: an out-of-range gather's transpose); ember's derivative is that of its forward.

Dropout: cuDNN drops out the outputs of each layer but the last, with a mask drawn from its own random state (the
signature carries no key), and JAX's reference lstm_ref refuses any dropout for that reason. ember's lstm and
lstm_ref refuse a nonzero dropout too (NotImplementedError); for dropout between layers, run one layer per call
(num_layers=1) and drop out between calls with a key of your own.
"""
from __future__ import annotations

import math
from functools import partial
from typing import Any

import numpy as np

from ember import dtypes, lax, numpy as jnp, random
from ember._api.jit import jit
from ember._control import custom_vjp
from ember._runtime.array import Array
from ember.nn import sigmoid, tanh

# (JAX's module has no __all__: these are the names it defines; it also has Array, custom_vjp, sigmoid and tanh,
# imported above, and the cuDNN primitives rnn_fwd_p and rnn_bwd_p, which ember does not have: see
# tools/api_absent.py.)
__all__ = ["get_num_params_in_lstm", "init_lstm_weight", "lstm", "lstm_bwd", "lstm_fwd", "lstm_ref",
           "swap_lstm_gates", "unpack_lstm_weights"]

Shape = tuple[int, ...]
PRNGKeyArray = Any


# ---------------------------------------------------------------------------------------------------------------
# The flat weight layout
def _check_sizes(name: str, input_size: Any, hidden_size: Any, num_layers: Any) -> None:
    for arg, value in (("input_size", input_size), ("hidden_size", hidden_size), ("num_layers", num_layers)):
        if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < 1:
            raise ValueError(f"{name}: {arg} must be a positive int, got {value!r}")


def _param_shapes(input_size: int, hidden_size: int, num_layers: int, bidirectional: bool) -> list[Shape]:
    """The shapes of the flat vector's blocks, in order: (W_ih, W_hh) per pseudo-layer, then (b_ih, b_hh) per
    pseudo-layer."""
    directions = 2 if bidirectional else 1
    matrices: list[Shape] = []
    for p in range(num_layers * directions):
        width = input_size if p < directions else directions * hidden_size
        matrices += [(4 * hidden_size, width), (4 * hidden_size, hidden_size)]
    return matrices + [(4 * hidden_size,)] * (2 * num_layers * directions)


def get_num_params_in_lstm(input_size: int, hidden_size: int, num_layers: int, bidirectional: bool) -> int:
    """The length of the flat weight vector of an LSTM with these sizes (cuDNN's layout: the module docstring)."""
    _check_sizes("get_num_params_in_lstm", input_size, hidden_size, num_layers)
    return sum(math.prod(shape) for shape in _param_shapes(input_size, hidden_size, num_layers, bidirectional))


def init_lstm_weight(rng: PRNGKeyArray, input_size: int, hidden_size: int, num_layers: int,
                     bidirectional: bool) -> Array:
    """A flat float32 weight vector drawn from U(-k, k), k = sqrt(1 / hidden_size) (PyTorch's initialisation), as
    jax.experimental.rnn.init_lstm_weight: the same values as JAX's for the same key."""
    count = get_num_params_in_lstm(input_size, hidden_size, num_layers, bidirectional)
    k = np.sqrt(1.0 / hidden_size)
    return random.uniform(rng, shape=(count,), dtype=jnp.float32, minval=-k, maxval=k)


def _flat_weights(name: str, weights: Any, input_size: int, hidden_size: int, num_layers: int,
                  bidirectional: bool) -> tuple[Any, list[Shape]]:
    """weights as an array, checked to be the flat vector of these sizes, and the shapes of its blocks."""
    _check_sizes(name, input_size, hidden_size, num_layers)
    weights = jnp.asarray(weights)
    shapes = _param_shapes(input_size, hidden_size, num_layers, bidirectional)
    count = sum(math.prod(shape) for shape in shapes)
    if weights.shape != (count,):
        raise ValueError(f"{name}: weights must be the flat vector of {count} parameters of an LSTM with "
                         f"input_size={input_size}, hidden_size={hidden_size}, num_layers={num_layers}, "
                         f"bidirectional={bidirectional}, got shape {weights.shape}")
    return weights, shapes


def unpack_lstm_weights(weights: Array, input_size: int, hidden_size: int, num_layers: int, bidirectional: bool
                        ) -> tuple[dict[int, Array], dict[int, Array], dict[int, Array], dict[int, Array]]:
    """The flat vector split into W_ih, W_hh, b_ih, b_hh: dicts from pseudo-layer index (layer * D + direction) to
    that pseudo-layer's (4H, width), (4H, H), (4H,) and (4H,) arrays, gates stacked i, f, g, o
    (jax.experimental.rnn.unpack_lstm_weights; lstm_ref takes them)."""
    weights, shapes = _flat_weights("unpack_lstm_weights", weights, input_size, hidden_size, num_layers,
                                    bidirectional)
    blocks, offset = [], 0
    for shape in shapes:
        size = math.prod(shape)
        blocks.append(weights[offset:offset + size].reshape(shape))
        offset += size
    pseudo = len(shapes) // 4
    matrices, biases = blocks[:2 * pseudo], blocks[2 * pseudo:]
    return ({p: matrices[2 * p] for p in range(pseudo)}, {p: matrices[2 * p + 1] for p in range(pseudo)},
            {p: biases[2 * p] for p in range(pseudo)}, {p: biases[2 * p + 1] for p in range(pseudo)})


def swap_lstm_gates(weights: Array, input_size: int, hidden_size: int, num_layers: int, bidirectional: bool
                    ) -> Array:
    """weights with the last two gates of every block exchanged (g, o <-> o, g: each matrix's and bias's rows
    2H..3H and 3H..4H), as jax.experimental.rnn.swap_lstm_gates, for weights from a library that orders the gates
    i, f, o, g. Its own inverse."""
    weights, shapes = _flat_weights("swap_lstm_gates", weights, input_size, hidden_size, num_layers,
                                    bidirectional)
    order, offset = [], 0
    for shape in shapes:
        block = np.arange(offset, offset + math.prod(shape)).reshape(4, -1)
        order.append(block[[0, 1, 3, 2]].ravel())
        offset += block.size
    return weights[np.concatenate(order)]


# ---------------------------------------------------------------------------------------------------------------
# The computation, shared by lstm_ref and lstm
def _last_step(seq_lengths: Any, steps: int) -> Any:
    """The step holding each sequence's final state: length - 1, wrapped once when negative and clamped into
    [0, steps) (JAX's indexing, which lstm_ref's values follow)."""
    last = seq_lengths - 1
    return jnp.clip(jnp.where(last < 0, last + steps, last), 0, steps - 1)


def _flip(seq: Any, seq_lengths: Any) -> Any:
    """Each sequence of seq (time, batch, features) reversed within its length, padding kept at the end: position
    t takes position (length - 1 - t) mod time (jnp.roll by time - length, then reversed in time, as lstm_ref).
    A permutation that is its own inverse, so also its own transpose."""
    steps, batch = seq.shape[0], seq.shape[1]
    source = (seq_lengths[None, :] - 1 - jnp.arange(steps, dtype=seq_lengths.dtype)[:, None]) % steps
    return seq[source, jnp.arange(batch)[None, :]]


def _layer(inputs: Any, h_0: Any, c_0: Any, W_ih: Any, W_hh: Any, b_ih: Any, b_hh: Any,  # noqa: N803
           precision: Any) -> tuple[Any, Any, Any]:
    """One pseudo-layer over all the steps of inputs (time, batch, width): the hidden and cell states after each
    step and the gate activations i, f, g, o of each step (time, batch, 4H). A step's sums are lstm_ref's in its
    order (input product, its bias, recurrent product, its bias), the four gates in one product per matrix: JAX's
    values bit for bit where XLA fuses the loop alike. (One input product over all the steps before the loop was
    no faster on the CPU at batch 16, 100 steps, 128 units, and rounds differently.)"""
    def step(carry: tuple[Any, Any], x: Any) -> tuple[tuple[Any, Any], tuple[Any, Any, Any]]:
        h, c = carry
        z = jnp.matmul(x, W_ih.T, precision=precision) + b_ih + jnp.matmul(h, W_hh.T, precision=precision) + b_hh
        z_i, z_f, z_g, z_o = jnp.split(z, 4, axis=-1)
        i, f, g, o = sigmoid(z_i), sigmoid(z_f), tanh(z_g), sigmoid(z_o)
        c = f * c + i * g
        h = o * tanh(c)
        return (h, c), (h, c, jnp.concatenate([i, f, g, o], axis=-1))

    _, (hs, cs, gates) = lax.scan(step, (h_0, c_0), inputs)
    return hs, cs, gates


def _run(x: Any, h_0: Any, c_0: Any, params: list[tuple[Any, Any, Any, Any]], seq_lengths: Any,
         num_layers: int, bidirectional: bool, precision: Any) -> tuple[Any, Any, Any, list[tuple[Any, ...]]]:
    """y, h_n, c_n, and each pseudo-layer's (inputs in its own time order, hidden states, cell states, gates):
    lstm_ref's computation over params[p] = (W_ih, W_hh, b_ih, b_hh) of pseudo-layer p."""
    steps = x.shape[1]
    seq = jnp.transpose(x, (1, 0, 2))
    valid = (jnp.arange(steps, dtype=seq_lengths.dtype)[:, None] < seq_lengths[None, :])[..., None]
    last, batch = _last_step(seq_lengths, steps), jnp.arange(x.shape[0])
    h_n, c_n, states = [], [], []
    directions = 2 if bidirectional else 1
    for layer in range(num_layers):
        outputs = []
        for direction in range(directions):
            p = layer * directions + direction
            inputs = _flip(seq, seq_lengths) if direction else seq
            hs, cs, gates = _layer(inputs, h_0[p], c_0[p], *params[p], precision)
            h_n.append(hs[last, batch])
            c_n.append(cs[last, batch])
            out = jnp.where(valid, hs, 0)
            outputs.append(_flip(out, seq_lengths) if direction else out)
            states.append((inputs, hs, cs, gates))
        seq = jnp.concatenate(outputs, axis=-1) if directions == 2 else outputs[0]
    return jnp.transpose(seq, (1, 0, 2)), jnp.stack(h_n), jnp.stack(c_n), states


def _shape_of(value: Any) -> tuple[int, ...]:
    return tuple(getattr(value, "shape", np.shape(value)))


def _dtype_of(value: Any) -> Any:
    """The dtype value has as an ember array (a numpy int64 is int32 without x64, as jnp.asarray makes it)."""
    dtype = getattr(value, "dtype", None)
    return dtypes.canonicalize_dtype(np.result_type(value) if dtype is None else dtype)


def _check_inputs(name: str, x: Any, h_0: Any, c_0: Any, seq_lengths: Any, input_size: int, hidden_size: int,
                  num_layers: int, dropout: Any, bidirectional: bool) -> None:
    """JAX's checks (an int32 seq_lengths, no dropout: NotImplementedError, as JAX's), then the shapes that JAX
    leaves to cuDNN or to a failing matrix product."""
    _check_sizes(name, input_size, hidden_size, num_layers)
    if _dtype_of(seq_lengths) != jnp.dtype("int32"):
        raise NotImplementedError(f"{name}: `seq_lengths` can only be int32 (as JAX's), got {_dtype_of(seq_lengths)}")
    if dropout != 0.0:
        raise NotImplementedError(
            f"{name}: dropout={dropout!r} is not supported: cuDNN draws its mask from its own state (JAX's lstm_ref "
            "refuses dropout too); run one layer per call (num_layers=1) and drop out between calls with a key")
    if len(_shape_of(x)) != 3 or _shape_of(x)[2] != input_size or _shape_of(x)[1] == 0:
        raise ValueError(f"{name}: x must be (batch_size, max_seq_length >= 1, input_size={input_size}), got shape "
                         f"{_shape_of(x)}")
    batch = _shape_of(x)[0]
    states = ((2 if bidirectional else 1) * num_layers, batch, hidden_size)
    for arg, value in (("h_0", h_0), ("c_0", c_0)):
        if _shape_of(value) != states:
            raise ValueError(f"{name}: {arg} must be (num_directions * num_layers, batch_size, hidden_size) = "
                             f"{states} for x of shape {_shape_of(x)}, got shape {_shape_of(value)}")
    if _shape_of(seq_lengths) != (batch,):
        raise ValueError(f"{name}: seq_lengths must be (batch_size,) = ({batch},) for x of shape {_shape_of(x)}, "
                         f"got shape {_shape_of(seq_lengths)}")


def _check_lstm(name: str, weights_arg: str, x: Any, h_0: Any, c_0: Any, weights: Any, seq_lengths: Any,
                input_size: int, hidden_size: int, num_layers: int, dropout: Any, bidirectional: bool) -> None:
    """lstm's and lstm_fwd's arguments: _check_inputs, the flat weights' length, and one floating dtype for x, h_0,
    c_0 and the weights (the reverse-mode rule gives each cotangent its argument's dtype)."""
    _check_inputs(name, x, h_0, c_0, seq_lengths, input_size, hidden_size, num_layers, dropout, bidirectional)
    count = get_num_params_in_lstm(input_size, hidden_size, num_layers, bidirectional)
    if _shape_of(weights) != (count,):
        raise ValueError(f"{name}: {weights_arg} must be the flat vector of {count} parameters of an LSTM with "
                         f"input_size={input_size}, hidden_size={hidden_size}, num_layers={num_layers}, "
                         f"bidirectional={bidirectional}, got shape {_shape_of(weights)}")
    found = {"x": _dtype_of(x), "h_0": _dtype_of(h_0), "c_0": _dtype_of(c_0), weights_arg: _dtype_of(weights)}
    if not all(jnp.issubdtype(d, jnp.floating) for d in found.values()) or len(set(found.values())) != 1:
        raise TypeError(f"{name}: x, h_0, c_0 and {weights_arg} must have one floating dtype, got "
                        + ", ".join(f"{arg} {d}" for arg, d in found.items()))


# ---------------------------------------------------------------------------------------------------------------
# lstm_ref: the reference over unpacked weights
def _lstm_ref(x: Array, h_0: Array, c_0: Array, W_ih: dict[int, Array], W_hh: dict[int, Array],  # noqa: N803
              b_ih: dict[int, Array], b_hh: dict[int, Array], seq_lengths: Array, input_size: int,
              hidden_size: int, num_layers: int, dropout: float, bidirectional: bool) -> tuple[Array, Array, Array]:
    """The LSTM over unpacked weights (unpack_lstm_weights' dicts), as jax.experimental.rnn.lstm_ref: returns y
    (batch, time, D*H), h_n and c_n (D*num_layers, batch, H). Compiled; the sizes, dropout and bidirectional are
    static. Differentiable by ember's own rules of its scan (forward and reverse mode)."""
    name = "lstm_ref"
    _check_inputs(name, x, h_0, c_0, seq_lengths, input_size, hidden_size, num_layers, dropout, bidirectional)
    pseudo = (2 if bidirectional else 1) * num_layers
    for arg, table in (("W_ih", W_ih), ("W_hh", W_hh), ("b_ih", b_ih), ("b_hh", b_hh)):
        if not isinstance(table, dict) or set(table) != set(range(pseudo)):
            raise ValueError(f"{name}: {arg} must be a dict with the pseudo-layers 0..{pseudo - 1} as keys "
                             f"(unpack_lstm_weights' form), got {sorted(table) if isinstance(table, dict) else table}")
    shapes = _param_shapes(input_size, hidden_size, num_layers, bidirectional)
    for p in range(pseudo):
        expected = (shapes[2 * p], shapes[2 * p + 1], shapes[2 * pseudo + 2 * p], shapes[2 * pseudo + 2 * p + 1])
        for arg, value, shape in zip(("W_ih", "W_hh", "b_ih", "b_hh"), (W_ih[p], W_hh[p], b_ih[p], b_hh[p]),
                                     expected):
            if tuple(value.shape) != shape:
                raise ValueError(f"{name}: {arg}[{p}] must have shape {shape}, got {value.shape}")
    params = [(W_ih[p], W_hh[p], b_ih[p], b_hh[p]) for p in range(pseudo)]
    y, h_n, c_n, _ = _run(x, h_0, c_0, params, seq_lengths, num_layers, bidirectional, None)
    return y, h_n, c_n


_STATIC = ("input_size", "hidden_size", "num_layers", "dropout", "bidirectional")
lstm_ref = jit(_lstm_ref, static_argnums=(8, 9, 10, 11, 12), static_argnames=_STATIC)


# ---------------------------------------------------------------------------------------------------------------
# lstm: the computation over flat weights, with its reverse-mode rule in two halves
def _params(weights: Any, input_size: int, hidden_size: int, num_layers: int, bidirectional: bool
            ) -> list[tuple[Any, Any, Any, Any]]:
    W_ih, W_hh, b_ih, b_hh = unpack_lstm_weights(weights, input_size, hidden_size, num_layers, bidirectional)
    return [(W_ih[p], W_hh[p], b_ih[p], b_hh[p]) for p in range(len(W_ih))]


@partial(jit, static_argnums=(5, 6, 7, 8, 9))
def _forward(x: Any, h_0: Any, c_0: Any, weights: Any, seq_lengths: Any, input_size: int, hidden_size: int,
             num_layers: int, bidirectional: bool, precision: Any) -> tuple[tuple[Any, Any, Any], Any]:
    params = _params(weights, input_size, hidden_size, num_layers, bidirectional)
    y, h_n, c_n, states = _run(x, h_0, c_0, params, seq_lengths, num_layers, bidirectional, precision)
    return (y, h_n, c_n), (h_0, c_0, weights, seq_lengths, states)


def _layer_backward(d_hs: Any, d_cs: Any, inputs: Any, hs: Any, cs: Any, gates: Any, h_0: Any, c_0: Any,
                    W_ih: Any, W_hh: Any, precision: Any) -> tuple[Any, Any, Any, Any, Any, Any, Any]:  # noqa: N803
    """The cotangents of one pseudo-layer's inputs, h_0, c_0, W_ih, W_hh, b_ih, b_hh from those of its hidden and
    cell states at every step (d_hs, d_cs: time, batch, H), by a reverse scan for the gates' pre-activations
    followed by one matrix product per weight over all the steps."""
    c_before = jnp.concatenate([c_0[None], cs[:-1]])

    def step(carry: tuple[Any, Any], t: tuple[Any, ...]) -> tuple[tuple[Any, Any], Any]:
        d_h, d_c = carry
        d_h_t, d_c_t, gate, c, c_prev = t
        d_h, d_c = d_h + d_h_t, d_c + d_c_t
        i, f, g, o = jnp.split(gate, 4, axis=-1)
        tanh_c = tanh(c)
        d_c = d_c + d_h * o * (1 - tanh_c * tanh_c)
        d_z = jnp.concatenate([d_c * g * i * (1 - i), d_c * c_prev * f * (1 - f), d_c * i * (1 - g * g),
                               d_h * tanh_c * o * (1 - o)], axis=-1)
        return (jnp.matmul(d_z, W_hh, precision=precision), d_c * f), d_z

    zeros = jnp.zeros_like(h_0)
    (d_h_0, d_c_0), d_z = lax.scan(step, (zeros, zeros), (d_hs, d_cs, gates, cs, c_before), reverse=True)
    h_before = jnp.concatenate([h_0[None], hs[:-1]])
    d_inputs = jnp.matmul(d_z, W_ih, precision=precision)
    d_W_ih = jnp.einsum("tbg,tbi->gi", d_z, inputs, precision=precision)
    d_W_hh = jnp.einsum("tbg,tbh->gh", d_z, h_before, precision=precision)
    d_b = jnp.sum(d_z, axis=(0, 1))
    return d_inputs, d_h_0, d_c_0, d_W_ih, d_W_hh, d_b, d_b


@partial(jit, static_argnums=(4, 5, 6, 7, 8))
def _backward(residuals: Any, d_y: Any, d_h_n: Any, d_c_n: Any, input_size: int, hidden_size: int,
              num_layers: int, bidirectional: bool, precision: Any) -> tuple[Any, Any, Any, Any]:
    h_0, c_0, weights, seq_lengths, states = residuals
    params = _params(weights, input_size, hidden_size, num_layers, bidirectional)
    steps = d_y.shape[1]
    valid = (jnp.arange(steps, dtype=seq_lengths.dtype)[:, None] < seq_lengths[None, :])[..., None]
    final = (jnp.arange(steps)[:, None] == _last_step(seq_lengths, steps)[None, :])[..., None]
    directions = 2 if bidirectional else 1
    d_seq = jnp.transpose(d_y, (1, 0, 2))  # the cotangent of the current layer's output, time-major
    d_h_0, d_c_0 = [None] * len(params), [None] * len(params)
    d_matrices, d_biases = [None] * (2 * len(params)), [None] * (2 * len(params))
    for layer in reversed(range(num_layers)):
        d_inputs = 0
        for direction in range(directions):
            p = layer * directions + direction
            d_out = d_seq[..., direction * hidden_size:(direction + 1) * hidden_size]
            d_out = _flip(d_out, seq_lengths) if direction else d_out
            d_hs = jnp.where(valid, d_out, 0) + jnp.where(final, d_h_n[p][None], 0)
            d_cs = jnp.where(final, d_c_n[p][None], 0)
            d_in, d_h_0[p], d_c_0[p], d_matrices[2 * p], d_matrices[2 * p + 1], d_biases[2 * p], \
                d_biases[2 * p + 1] = _layer_backward(d_hs, d_cs, *states[p], h_0[p], c_0[p], *params[p][:2],
                                                      precision)
            d_inputs = d_inputs + (_flip(d_in, seq_lengths) if direction else d_in)
        d_seq = d_inputs
    d_weights = jnp.concatenate([block.ravel() for block in d_matrices + d_biases])
    return jnp.transpose(d_seq, (1, 0, 2)), jnp.stack(d_h_0), jnp.stack(d_c_0), d_weights


def lstm_fwd(x: Array, h_0: Array, c_0: Array, w: Array, seq_lengths: Array, input_size: int, hidden_size: int,
             num_layers: int, dropout: float, bidirectional: bool, precision: Any
             ) -> tuple[tuple[Array, Array, Array], Any]:
    """lstm's forward half, as jax.experimental.rnn.lstm_fwd: ((y, h_n, c_n), residuals). The residuals are
    ember's (JAX's hold cuDNN's reserve space): h_0, c_0, w, seq_lengths and, per pseudo-layer, its inputs in its
    own time order, its hidden and cell states and its gate activations at every step; lstm_bwd reads them."""
    _check_lstm("lstm_fwd", "w", x, h_0, c_0, w, seq_lengths, input_size, hidden_size, num_layers, dropout,
                bidirectional)
    return _forward(x, h_0, c_0, w, seq_lengths, input_size, hidden_size, num_layers, bool(bidirectional),
                    precision)


def lstm_bwd(input_size: int, hidden_size: int, num_layers: int, dropout: float, bidirectional: bool,
             precision: Any, residuals: Any, gradients: tuple[Array, Array, Array]
             ) -> tuple[Array, Array, Array, Array, Array]:
    """lstm's backward half, as jax.experimental.rnn.lstm_bwd: from lstm_fwd's residuals and the cotangents
    (dy, dh_n, dc_n) of its outputs, those of (x, h_0, c_0, w, seq_lengths) — the last zeros, as JAX's (lengths
    are integers)."""
    d_y, d_h_n, d_c_n = gradients
    d_x, d_h_0, d_c_0, d_w = _backward(residuals, d_y, d_h_n, d_c_n, input_size, hidden_size, num_layers,
                                       bool(bidirectional), precision)
    return d_x, d_h_0, d_c_0, d_w, jnp.zeros_like(residuals[3])


def _lstm_primal(x: Array, h_0: Array, c_0: Array, weights: Array, seq_lengths: Array, input_size: int,
                 hidden_size: int, num_layers: int, dropout: float, bidirectional: bool, precision: Any
                 ) -> tuple[Array, Array, Array]:
    return lstm_fwd(x, h_0, c_0, weights, seq_lengths, input_size, hidden_size, num_layers, dropout,
                    bidirectional, precision)[0]


_lstm = custom_vjp(_lstm_primal, nondiff_argnums=(5, 6, 7, 8, 9, 10))
_lstm.defvjp(lstm_fwd, lstm_bwd)


def lstm(x: Array, h_0: Array, c_0: Array, weights: Array, seq_lengths: Array, input_size: int, hidden_size: int,
         num_layers: int, dropout: float, bidirectional: bool, precision: Any = None) -> tuple[Array, Array, Array]:
    """An LSTM over cuDNN's flat weights, as jax.experimental.rnn.lstm, computed as lstm_ref (on any device).

    x: (batch_size, max_seq_length, input_size), batch-first.
    h_0, c_0: (num_directions * num_layers, batch_size, hidden_size), the initial states of each pseudo-layer.
    weights: (get_num_params_in_lstm(...),), the flat vector (init_lstm_weight); x, h_0, c_0 and weights share
      one floating dtype.
    seq_lengths: (batch_size,) int32, each sequence's length (the masking: module docstring).
    dropout: 0 (False) only: see the module docstring.
    precision: the matrix products' (lax.Precision); on the CPU every choice computes in the inputs' dtype.

    Returns y (batch_size, max_seq_length, num_directions * hidden_size), zeros past each length, and h_n, c_n
    (num_directions * num_layers, batch_size, hidden_size), the states after each sequence's last step.
    Reverse mode is lstm_fwd/lstm_bwd (a custom VJP, as JAX's; forward mode is refused as for any custom VJP);
    the values are lstm_ref's (the same computation)."""
    _check_lstm("lstm", "weights", x, h_0, c_0, weights, seq_lengths, input_size, hidden_size, num_layers, dropout,
                bidirectional)
    return _lstm(x, h_0, c_0, weights, seq_lengths, input_size, hidden_size, num_layers, dropout, bidirectional,
                 precision)
