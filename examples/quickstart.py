"""ember quickstart: the seed design, then jit, grad and a tiny training loop."""
import numpy as np

import ember
import ember.numpy as jnp
from ember import ShapedArray, compile, grad, stage_out


def f(lhs, rhs):
    return (lhs + rhs) * 2


# 1. Stage a function out to a typed IR, compile it with XLA, run it.
ir = stage_out(f, ShapedArray((1,), "f32"), ShapedArray((1,), "f32"))
print("IR of f:")
print(ir)
print("f(1, 2) =", compile(ir)(np.float32([1]), np.float32([2])))

# 2. grad(ir) is a new IR computing the gradient: the backward pass is an IR -> IR transformation.
print("\nIR of grad(f):")
print(grad(ir))
print("df/dlhs at (1, 2) =", compile(grad(ir))(np.float32([1]), np.float32([2])))

# 3. JAX-style transformations on Python functions: fit a small model with jit(value_and_grad).
rng = np.random.default_rng(0)
x = rng.normal(size=(64, 3)).astype(np.float32)
true_w = np.array([[2.0], [-1.0], [0.5]], np.float32)
y = x @ true_w + 0.3


def loss(params, x, y):
    pred = x @ params["w"] + params["b"]
    return jnp.mean((pred - y) ** 2)


@ember.jit
def train_step(params, x, y):
    value, grads = ember.value_and_grad(loss)(params, x, y)
    new_params = ember.tree_util.tree_map(lambda p, g: p - 0.1 * g, params, grads)
    return new_params, value


params = {"w": jnp.zeros((3, 1)), "b": jnp.zeros((1,))}
for step in range(100):
    params, value = train_step(params, x, y)
print(f"\nafter 100 steps: loss={float(value):.2e}, w={np.asarray(params['w']).ravel()}, b={float(params['b'][0]):.3f}")
print("one XLA program per step:", train_step.lower(params, x, y).as_text().count("func.func") == 1)

# 4. vmap, forward mode, Jacobians: per-example gradients, a Jacobian-vector product, the Hessian.
per_example = ember.jit(ember.vmap(ember.grad(loss), in_axes=(None, 0, 0)))(params, x, y)
print("per-example gradient of w:", per_example["w"].shape)            # (64, 3, 1): one per example
out, out_dot = ember.jvp(jnp.tanh, (x[0],), (jnp.ones_like(x[0]),))
print("jvp of tanh along ones:", np.round(np.asarray(out_dot), 4))
H = ember.hessian(loss)(params, x, y)                                  # a dict of dicts of blocks, as in JAX
print("Hessian block d2L/dw2:", H["w"]["w"].shape)                      # (3, 1, 3, 1)
hvp = ember.jvp(lambda p: ember.grad(loss)(p, x, y), (params,), (params,))[1]
print("Hessian-vector product matches:",
      np.allclose(np.asarray(H["w"]["w"]).reshape(3, 3) @ np.asarray(params["w"]).ravel()
                  + np.asarray(H["w"]["b"]).reshape(3, 1) @ np.asarray(params["b"]),
                  np.asarray(hvp["w"]).ravel(), rtol=1e-4))
