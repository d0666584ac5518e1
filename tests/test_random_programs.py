"""Random programs built from ember.numpy ops: values against numpy, gradients against JAX, under jit and eagerly."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import ember
import ember.numpy as enp

pytestmark = pytest.mark.usefixtures("ember_x64")  # float64 inputs and oracles (numpy, JAX in x64 mode)

UNARY = ["tanh", "sin", "cos", "exp_neg_sq", "square", "softplus", "abs"]
BINARY = ["add", "subtract", "multiply", "maximum", "safe_divide", "matmul_tanh"]
REDUCE = ["sum0", "mean1", "max1", "none"]


def apply_unary(np_, name, x):
    if name == "exp_neg_sq":
        return np_.exp(-x * x)
    if name == "square":
        return x * x
    if name == "softplus":
        return np_.log1p(np_.exp(-np_.abs(x))) + np_.maximum(x, 0.0)
    return getattr(np_, name)(x)


def apply_binary(np_, name, x, y):
    if name == "safe_divide":
        return x / (1.5 + y * y)
    if name == "matmul_tanh":
        return np_.tanh(x @ np_.transpose(y)) @ y * 0.1
    return getattr(np_, name)(x, y)


def apply_reduce(np_, name, x):
    if name == "sum0":
        return np_.sum(x, axis=0, keepdims=True) + x
    if name == "mean1":
        return x - np_.mean(x, axis=1, keepdims=True)
    if name == "max1":
        return np_.max(x, axis=1, keepdims=True) * x
    return x


def random_program(seed):
    rng = np.random.default_rng(seed)
    steps = []
    for _ in range(rng.integers(3, 7)):
        kind = rng.choice(["unary", "binary", "reduce"])
        if kind == "unary":
            steps.append(("unary", rng.choice(UNARY), None))
        elif kind == "binary":
            steps.append(("binary", rng.choice(BINARY), int(rng.integers(0, 2))))
        else:
            steps.append(("reduce", rng.choice(REDUCE), None))

    def program(np_, x, y):
        values = [x, y]
        for kind, name, other in steps:
            if kind == "unary":
                values.append(apply_unary(np_, name, values[-1]))
            elif kind == "binary":
                values.append(apply_binary(np_, name, values[-1], values[other]))
            else:
                values.append(apply_reduce(np_, name, values[-1]))
        return np_.sum(values[-1] * values[-1]) * 0.01
    return program, steps


@pytest.mark.parametrize("seed", [pytest.param(s, marks=[pytest.mark.slow] if s >= 4 else []) for s in range(40)])
def test_random_program(seed):
    program, steps = random_program(seed)
    rng = np.random.default_rng(1000 + seed)
    x, y = rng.normal(size=(3, 4)), rng.normal(size=(3, 4))
    expected = program(np, x, y)
    np.testing.assert_allclose(float(ember.jit(lambda a, b: program(enp, a, b))(x, y)), expected, rtol=1e-10,
                               err_msg=str(steps))
    ours = ember.jit(ember.grad(lambda a, b: program(enp, a, b), argnums=(0, 1)))(x, y)
    ref = jax.grad(lambda a, b: program(jnp, a, b), argnums=(0, 1))(x, y)
    for o, r in zip(ours, ref):
        np.testing.assert_allclose(np.asarray(o), np.asarray(r), rtol=1e-8, atol=1e-12, err_msg=str(steps))
    eager = ember.grad(lambda a, b: program(enp, a, b))(x.astype(np.float32), y.astype(np.float32))
    np.testing.assert_allclose(np.asarray(eager), np.asarray(ref[0]), rtol=2e-3, atol=1e-5, err_msg=str(steps))
