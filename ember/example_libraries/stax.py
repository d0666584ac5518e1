"""Stax, as jax.example_libraries.stax: a small neural-network library where a layer is a pair of functions,

    init_fun(rng, input_shape) -> (output_shape, params)
    apply_fun(params, inputs, **kwargs) -> outputs       # kwargs: rng= (a PRNG key, for Dropout)

and networks are layers composed with the combinators `serial`, `parallel`, `FanOut`, `FanInSum`, `FanInConcat`
and `shape_dependent`:

    init_fun, predict = stax.serial(stax.Dense(512), stax.Relu, stax.Dense(10), stax.LogSoftmax)
    out_shape, params = init_fun(ember.random.PRNGKey(0), (-1, 784))   # (-1: any batch size)
    logits = predict(params, x)

Params are nested lists and tuples of arrays (pytrees), so they go through `ember.grad`, `ember.jit` and
`ember.example_libraries.optimizers`. The default initializers, dimension numbers (NHWC inputs, HWIO kernels) and
the order in which keys are split are JAX's, so that `init_fun` gives JAX's parameters for the same key, bit for
bit, and the same params give the same outputs. Layers whose constructor takes no arguments (`Relu`, `Flatten`,
`Identity`, `FanInSum`, ...) are the pairs themselves, as in JAX: `serial(Dense(10), Relu)`, not `Relu()`."""
from __future__ import annotations

import functools  # noqa: F401 (one of stax's names, as in JAX's module)
import math
import operator as _operator
import typing as _typing

import ember.numpy as jnp
from ember import lax, random
from ember.nn import elu, gelu, leaky_relu, log_softmax, relu, selu, sigmoid, softmax, softplus, standardize
from ember.nn.initializers import glorot_normal, normal, ones, zeros

if _typing.TYPE_CHECKING:  # (annotations only: not stax's names at run time)
    from typing import Any, Callable, Sequence

# JAX's aliases (kept for programs written against older versions of stax)
glorot = glorot_normal
randn = normal
logsoftmax = log_softmax

_Layer = tuple  # (init_fun, apply_fun)


def _shape_of(layer: str, input_shape: Any) -> tuple[int, ...]:
    try:
        return tuple(_operator.index(d) for d in input_shape)
    except TypeError:
        raise TypeError(f"stax.{layer}: input_shape must be a tuple of ints (use -1 for an unknown batch size), "
                        f"got {input_shape!r}") from None


def _check_rank(layer: str, shape: Sequence[int], rank: int, what: str) -> None:
    if len(shape) != rank:
        raise ValueError(f"stax.{layer}: expected {what} of rank {rank}, got shape {tuple(shape)}")


# Dense and convolutions


def Dense(out_dim: int, W_init: Callable = glorot_normal(), b_init: Callable = normal()) -> _Layer:
    """A fully-connected layer: inputs (..., in_dim) @ W (in_dim, out_dim) + b (out_dim,)."""
    def init_fun(rng: Any, input_shape: Any) -> tuple[Any, Any]:
        input_shape = _shape_of("Dense", input_shape)
        if not input_shape:
            raise ValueError("stax.Dense: the input must have at least one dimension (its features), got shape ()")
        k1, k2 = random.split(rng)
        W, b = W_init(k1, (input_shape[-1], out_dim)), b_init(k2, (out_dim,))
        return input_shape[:-1] + (out_dim,), (W, b)

    def apply_fun(params: Any, inputs: Any, **kwargs: Any) -> Any:
        W, b = params
        shape = jnp.shape(inputs)
        if not shape or shape[-1] != jnp.shape(W)[0]:
            raise ValueError(f"stax.Dense: inputs of shape {tuple(shape)} do not fit a weight of shape "
                             f"{tuple(jnp.shape(W))}: the last dimension must be {jnp.shape(W)[0]}")
        return jnp.dot(inputs, W) + b
    return init_fun, apply_fun


def _kernel_shape(rhs_spec: str, lhs_spec: str, input_shape: Sequence[int], out_chan: int,
                  filter_shape: Sequence[int]) -> list[int]:
    spatial = iter(filter_shape)
    return [out_chan if c == "O" else input_shape[lhs_spec.index("C")] if c == "I" else next(spatial)
            for c in rhs_spec]


def _conv_layer(layer: str, transpose: bool, dimension_numbers: Sequence[str], out_chan: int,
                filter_shape: Sequence[int], strides: Sequence[int] | None, padding: Any, W_init: Callable | None,
                b_init: Callable) -> _Layer:
    specs = tuple(dimension_numbers) if isinstance(dimension_numbers, (tuple, list)) else ()
    if len(specs) != 3 or not all(isinstance(s, str) for s in specs):
        raise TypeError(f"stax.{layer}: dimension_numbers must be three strings such as ('NHWC', 'HWIO', 'NHWC'), "
                        f"got {dimension_numbers!r}")
    lhs_spec, rhs_spec, out_spec = specs
    filter_shape = tuple(filter_shape)
    if len(rhs_spec) != len(filter_shape) + 2 or len(lhs_spec) != len(rhs_spec) or len(out_spec) != len(rhs_spec):
        raise ValueError(f"stax.{layer}: a filter_shape of {len(filter_shape)} spatial dimensions {filter_shape} "
                         f"does not fit the dimension numbers {tuple(dimension_numbers)}")
    ones_ = (1,) * len(filter_shape)
    strides = tuple(strides) if strides else ones_
    W_init = W_init or glorot_normal(rhs_spec.index("I"), rhs_spec.index("O"))
    shape_tuple = lax.conv_transpose_shape_tuple if transpose else lax.conv_general_shape_tuple
    rank = len(lhs_spec)

    def init_fun(rng: Any, input_shape: Any) -> tuple[Any, Any]:
        input_shape = _shape_of(layer, input_shape)
        _check_rank(layer, input_shape, rank, f"inputs ({lhs_spec})")
        kernel_shape = _kernel_shape(rhs_spec, lhs_spec, input_shape, out_chan, filter_shape)
        output_shape = shape_tuple(input_shape, kernel_shape, strides, padding, specs)
        bias_shape = [out_chan if c == "C" else 1 for c in out_spec]
        k1, k2 = random.split(rng)
        W, b = W_init(k1, kernel_shape), b_init(k2, bias_shape)
        return tuple(output_shape), (W, b)

    def apply_fun(params: Any, inputs: Any, **kwargs: Any) -> Any:
        W, b = params
        shape = jnp.shape(inputs)
        _check_rank(layer, shape, rank, f"inputs ({lhs_spec})")
        in_chan, w_in = shape[lhs_spec.index("C")], jnp.shape(W)[rhs_spec.index("I")]
        if in_chan != w_in:
            raise ValueError(f"stax.{layer}: inputs of shape {tuple(shape)} have {in_chan} channels ({lhs_spec}) "
                             f"but the kernel of shape {tuple(jnp.shape(W))} takes {w_in} ({rhs_spec})")
        if jnp.result_type(inputs) != jnp.result_type(W):  # (lax convolutions do not promote, as JAX's)
            raise TypeError(f"stax.{layer}: inputs of dtype {jnp.result_type(inputs)} and a kernel of dtype "
                            f"{jnp.result_type(W)}: give the inputs the params' dtype")
        if transpose:
            out = lax.conv_transpose(inputs, W, strides, padding, dimension_numbers=specs)
        else:
            out = lax.conv_general_dilated(inputs, W, strides, padding, ones_, ones_, dimension_numbers=specs)
        return out + b
    return init_fun, apply_fun


def GeneralConv(dimension_numbers: Sequence[str], out_chan: int, filter_shape: Sequence[int],
                strides: Sequence[int] | None = None, padding: Any = "VALID", W_init: Callable | None = None,
                b_init: Callable = normal(1e-6)) -> _Layer:
    """A convolution (lax.conv_general_dilated) plus a bias, with dimension_numbers = (lhs, rhs, out) specs such as
    ('NCHW', 'OIHW', 'NCHW'); W_init defaults to glorot_normal over the kernel's I and O axes."""
    return _conv_layer("GeneralConv", False, dimension_numbers, out_chan, filter_shape, strides, padding, W_init,
                       b_init)


def Conv(out_chan: int, filter_shape: Sequence[int], strides: Sequence[int] | None = None, padding: Any = "VALID",
         W_init: Callable | None = None, b_init: Callable = normal(1e-6)) -> _Layer:
    """A 2-D convolution plus a bias: GeneralConv with NHWC inputs and outputs and an HWIO kernel."""
    return _conv_layer("Conv", False, ("NHWC", "HWIO", "NHWC"), out_chan, filter_shape, strides, padding, W_init,
                       b_init)


def GeneralConvTranspose(dimension_numbers: Sequence[str], out_chan: int, filter_shape: Sequence[int],
                         strides: Sequence[int] | None = None, padding: Any = "VALID", W_init: Callable | None = None,
                         b_init: Callable = normal(1e-6)) -> _Layer:
    """A transposed convolution (lax.conv_transpose) plus a bias, with dimension_numbers as GeneralConv's."""
    return _conv_layer("GeneralConvTranspose", True, dimension_numbers, out_chan, filter_shape, strides, padding,
                       W_init, b_init)


def Conv1DTranspose(out_chan: int, filter_shape: Sequence[int], strides: Sequence[int] | None = None,
                    padding: Any = "VALID", W_init: Callable | None = None, b_init: Callable = normal(1e-6)) -> _Layer:
    """A 1-D transposed convolution plus a bias: NHC inputs and outputs, an HIO kernel."""
    return _conv_layer("Conv1DTranspose", True, ("NHC", "HIO", "NHC"), out_chan, filter_shape, strides, padding,
                       W_init, b_init)


def ConvTranspose(out_chan: int, filter_shape: Sequence[int], strides: Sequence[int] | None = None,
                  padding: Any = "VALID", W_init: Callable | None = None, b_init: Callable = normal(1e-6)) -> _Layer:
    """A 2-D transposed convolution plus a bias: NHWC inputs and outputs, an HWIO kernel."""
    return _conv_layer("ConvTranspose", True, ("NHWC", "HWIO", "NHWC"), out_chan, filter_shape, strides, padding,
                       W_init, b_init)


# Normalization


def BatchNorm(axis: Any = (0, 1, 2), epsilon: float = 1e-5, center: bool = True, scale: bool = True,
              beta_init: Callable = zeros, gamma_init: Callable = ones) -> _Layer:
    """Normalizes the inputs over `axis` with the statistics of the batch itself (stax keeps no running averages),
    then scales by gamma and shifts by beta (params (beta, gamma), of the shape of the other axes; () for one
    turned off by center=False or scale=False)."""
    axes = (axis,) if jnp.isscalar(axis) else tuple(axis)

    def normalized(shape: Sequence[int]) -> tuple[int, ...]:
        for a in axes:
            if not -len(shape) <= a < len(shape):
                raise ValueError(f"stax.BatchNorm: axis {a} is out of bounds for inputs of shape {tuple(shape)}")
        return tuple(sorted({a % len(shape) for a in axes}))

    def init_fun(rng: Any, input_shape: Any) -> tuple[Any, Any]:
        input_shape = _shape_of("BatchNorm", input_shape)
        norm_axes = normalized(input_shape)
        shape = tuple(d for i, d in enumerate(input_shape) if i not in norm_axes)
        k1, k2 = random.split(rng)
        beta = beta_init(k1, shape) if center else ()
        gamma = gamma_init(k2, shape) if scale else ()
        return input_shape, (beta, gamma)

    def apply_fun(params: Any, x: Any, **kwargs: Any) -> Any:
        beta, gamma = params
        norm_axes = normalized(jnp.shape(x))
        expand = tuple(None if i in norm_axes else slice(None) for i in range(jnp.ndim(x)))
        z = standardize(x, norm_axes, epsilon=epsilon)
        if scale:
            z = gamma[expand] * z
        if center:
            z = z + beta[expand]
        return z
    return init_fun, apply_fun


# Elementwise layers


def elementwise(fun: Callable, **fun_kwargs: Any) -> _Layer:
    """A layer without params that applies fun(inputs, **fun_kwargs) (and keeps the shape)."""
    def init_fun(rng: Any, input_shape: Any) -> tuple[Any, Any]:
        return input_shape, ()

    def apply_fun(params: Any, inputs: Any, **kwargs: Any) -> Any:
        return fun(inputs, **fun_kwargs)
    return init_fun, apply_fun


Tanh = elementwise(jnp.tanh)
Relu = elementwise(relu)
Exp = elementwise(jnp.exp)
LogSoftmax = elementwise(log_softmax, axis=-1)
Softmax = elementwise(softmax, axis=-1)
Softplus = elementwise(softplus)
Sigmoid = elementwise(sigmoid)
Elu = elementwise(elu)
LeakyRelu = elementwise(leaky_relu)
Selu = elementwise(selu)
Gelu = elementwise(gelu)


# Pooling


def _pooling_layer(layer: str, reducer: Callable, init_val: float, average: bool = False) -> Callable[..., _Layer]:
    def PoolingLayer(window_shape: Sequence[int], strides: Sequence[int] | None = None, padding: str = "VALID",
                     spec: str | None = None) -> _Layer:
        window_shape = tuple(window_shape)
        strides = tuple(strides) if strides else (1,) * len(window_shape)
        if len(strides) != len(window_shape):
            raise ValueError(f"stax.{layer}: strides {strides} and window_shape {window_shape} have different "
                             "lengths")
        if not isinstance(padding, str):
            raise TypeError(f"stax.{layer}: padding must be 'VALID', 'SAME' or 'SAME_LOWER', got {padding!r}")
        rank = len(window_shape) + 2
        if spec is None:
            batch_axis, channel_axis = 0, rank - 1
        else:
            if len(spec) != rank or "N" not in spec or "C" not in spec:
                raise ValueError(f"stax.{layer}: spec {spec!r} must name the {rank} axes of the inputs, with 'N' "
                                 f"and 'C', for a window of {len(window_shape)} spatial dimensions")
            batch_axis, channel_axis = spec.index("N"), spec.index("C")
        spatial_window, spatial_strides = window_shape, strides
        window, steps = list(window_shape), list(strides)
        for i in sorted((batch_axis, channel_axis)):  # (a window of 1 on the batch and channel axes)
            window.insert(i, 1)
            steps.insert(i, 1)
        window, steps = tuple(window), tuple(steps)

        def init_fun(rng: Any, input_shape: Any) -> tuple[Any, Any]:
            input_shape = _shape_of(layer, input_shape)
            _check_rank(layer, input_shape, rank, "inputs" + (f" ({spec})" if spec else ""))
            pads = lax.padtype_to_pads(input_shape, window, steps, padding)
            out = list(lax.reduce_window_shape_tuple(input_shape, window, steps, pads))
            out[batch_axis], out[channel_axis] = input_shape[batch_axis], input_shape[channel_axis]  # (-1 kept)
            return tuple(out), ()

        def apply_fun(params: Any, inputs: Any, **kwargs: Any) -> Any:
            _check_rank(layer, jnp.shape(inputs), rank, "inputs" + (f" ({spec})" if spec else ""))
            out = lax.reduce_window(inputs, init_val, reducer, window, steps, padding)
            if not average:
                return out
            # the number of inputs in each window (fewer at the edges with padding='SAME')
            spatial = tuple(d for i, d in enumerate(jnp.shape(inputs)) if i not in (batch_axis, channel_axis))
            counts = lax.reduce_window(jnp.ones(spatial, out.dtype), 0.0, lax.add, spatial_window,
                                       spatial_strides, padding)
            return out / jnp.expand_dims(counts, tuple(sorted((batch_axis, channel_axis))))
        return init_fun, apply_fun
    PoolingLayer.__name__ = PoolingLayer.__qualname__ = layer
    what = {"MaxPool": "the maximum", "SumPool": "the sum", "AvgPool": "the mean"}[layer]
    PoolingLayer.__doc__ = (f"A pooling layer: {what} over windows of window_shape (the spatial "
                            "dimensions) moved by strides (default 1), padding 'VALID' or 'SAME'; spec names the "
                            "inputs' axes (such as 'NCHW'; default: batch first, channels last).")
    return PoolingLayer


MaxPool = _pooling_layer("MaxPool", lax.max, -jnp.inf)
SumPool = _pooling_layer("SumPool", lax.add, 0.0)
AvgPool = _pooling_layer("AvgPool", lax.add, 0.0, average=True)


# Reshaping and structural layers


def _flatten() -> _Layer:
    def init_fun(rng: Any, input_shape: Any) -> tuple[Any, Any]:
        input_shape = _shape_of("Flatten", input_shape)
        if not input_shape:
            raise ValueError("stax.Flatten: the inputs must have a batch dimension, got shape ()")
        return (input_shape[0], math.prod(input_shape[1:])), ()

    def apply_fun(params: Any, inputs: Any, **kwargs: Any) -> Any:
        shape = jnp.shape(inputs)
        if not shape:
            raise ValueError("stax.Flatten: the inputs must have a batch dimension, got shape ()")
        return jnp.reshape(inputs, (shape[0], -1))
    return init_fun, apply_fun


Flatten = _flatten()  # flattens every dimension but the first (the batch)
Identity = elementwise(lambda x: x)


def FanOut(num: int) -> _Layer:
    """Passes its inputs on as a list of num copies (for parallel branches)."""
    def init_fun(rng: Any, input_shape: Any) -> tuple[Any, Any]:
        return [input_shape] * num, ()

    def apply_fun(params: Any, inputs: Any, **kwargs: Any) -> Any:
        return [inputs] * num
    return init_fun, apply_fun


def _fan_in_sum() -> _Layer:
    def init_fun(rng: Any, input_shape: Any) -> tuple[Any, Any]:
        return input_shape[0], ()

    def apply_fun(params: Any, inputs: Any, **kwargs: Any) -> Any:
        total = inputs[0]
        for x in inputs[1:]:
            total = total + x
        return total
    return init_fun, apply_fun


FanInSum = _fan_in_sum()  # sums a sequence of inputs (of one shape)


def FanInConcat(axis: int = -1) -> _Layer:
    """Concatenates a sequence of inputs along axis."""
    def init_fun(rng: Any, input_shape: Any) -> tuple[Any, Any]:
        first = tuple(input_shape[0])
        ax = axis % len(first)
        for shape in input_shape:
            if len(shape) != len(first) or any(a != b for i, (a, b) in enumerate(zip(shape, first)) if i != ax):
                raise ValueError(f"stax.FanInConcat: cannot concatenate shapes {[tuple(s) for s in input_shape]} "
                                 f"along axis {axis}")
        return first[:ax] + (sum(shape[ax] for shape in input_shape),) + first[ax + 1:], ()

    def apply_fun(params: Any, inputs: Any, **kwargs: Any) -> Any:
        return jnp.concatenate(inputs, axis)
    return init_fun, apply_fun


def Dropout(rate: float, mode: str = "train") -> _Layer:
    """Dropout, as JAX's stax: in mode 'train', each input is KEPT with probability `rate` (and scaled by 1 / rate)
    and zeroed otherwise, drawn from the key passed as apply_fun(params, inputs, rng=key); in any other mode
    (such as 'test') the inputs pass unchanged. (So Dropout(0.9) drops 10%: stax's `rate` is the keep rate.)"""
    def init_fun(rng: Any, input_shape: Any) -> tuple[Any, Any]:
        return input_shape, ()

    def apply_fun(params: Any, inputs: Any, **kwargs: Any) -> Any:
        rng = kwargs.get("rng")
        if rng is None:
            raise ValueError("stax.Dropout: apply_fun needs a PRNG key: call it as apply_fun(params, inputs, rng=key) "
                             "(serial and parallel split it among their layers), with a key from "
                             "ember.random.PRNGKey / ember.random.key")
        if mode != "train":
            return inputs
        keep = random.bernoulli(rng, rate, jnp.shape(inputs))
        return jnp.where(keep, inputs / rate, 0)
    return init_fun, apply_fun


# Combinators


def _unzip(layer: str, layers: Sequence[Any]) -> tuple[tuple[Callable, ...], tuple[Callable, ...]]:
    for i, pair in enumerate(layers):
        if not (isinstance(pair, (tuple, list)) and len(pair) == 2 and all(callable(f) for f in pair)):
            hint = " (a layer maker not called? e.g. Dense(10), FanOut(2))" if callable(pair) else ""
            raise TypeError(f"stax.{layer}: layer {i} is not an (init_fun, apply_fun) pair: {pair!r}{hint}")
    return tuple(p[0] for p in layers), tuple(p[1] for p in layers)


def _layer_keys(rng: Any, n: int) -> Sequence[Any]:
    return (None,) * n if rng is None else random.split(rng, n)


def serial(*layers: _Layer) -> _Layer:
    """Composes layers in sequence: each one's output is the next one's input. Params: a list of each layer's; the
    rng keyword, when given, is split into one key per layer."""
    init_funs, apply_funs = _unzip("serial", layers)

    def init_fun(rng: Any, input_shape: Any) -> tuple[Any, Any]:
        params = []
        for init in init_funs:
            rng, layer_rng = random.split(rng)
            input_shape, p = init(layer_rng, input_shape)
            params.append(p)
        return input_shape, params

    def apply_fun(params: Any, inputs: Any, **kwargs: Any) -> Any:
        rngs = _layer_keys(kwargs.pop("rng", None), len(apply_funs))
        for apply, p, r in zip(apply_funs, params, rngs):
            inputs = apply(p, inputs, rng=r, **kwargs)
        return inputs
    return init_fun, apply_fun


def parallel(*layers: _Layer) -> _Layer:
    """Applies layer i to input i of a sequence of inputs (as FanOut makes), giving a list of outputs; the input
    shape is a sequence of shapes, and init returns the tuple of output shapes and the tuple of params."""
    init_funs, apply_funs = _unzip("parallel", layers)

    def init_fun(rng: Any, input_shape: Any) -> tuple[Any, Any]:
        if len(input_shape) != len(init_funs):
            raise ValueError(f"stax.parallel: {len(init_funs)} layers but {len(input_shape)} input shapes")
        results = [init(r, shape) for init, r, shape in zip(init_funs, random.split(rng, len(init_funs)),
                                                             input_shape)]
        return tuple(r[0] for r in results), tuple(r[1] for r in results)

    def apply_fun(params: Any, inputs: Any, **kwargs: Any) -> Any:
        if len(inputs) != len(apply_funs):
            raise ValueError(f"stax.parallel: {len(apply_funs)} layers but {len(inputs)} inputs")
        rngs = _layer_keys(kwargs.pop("rng", None), len(apply_funs))
        return [apply(p, x, rng=r, **kwargs) for apply, p, x, r in zip(apply_funs, params, inputs, rngs)]
    return init_fun, apply_fun


def shape_dependent(make_layer: Callable[[Any], _Layer]) -> _Layer:
    """A layer built by make_layer(input_shape) once the input shape is known (at init, and from the inputs' shape
    at apply)."""
    def init_fun(rng: Any, input_shape: Any) -> tuple[Any, Any]:
        return make_layer(input_shape)[0](rng, input_shape)

    def apply_fun(params: Any, inputs: Any, **kwargs: Any) -> Any:
        return make_layer(jnp.shape(inputs))[1](params, inputs, **kwargs)
    return init_fun, apply_fun


del annotations  # (the __future__ feature: not one of stax's names)
