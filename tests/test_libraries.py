"""JAX's libraries on ember through the drop-in (ember.as_jax): equinox (whose internals define primitives with JAX's
extension API: its checkpointed while loop, error_if, filter transformations), flax.linen and flax.nnx (a training
step with its Optimizer and metrics under nnx.jit; nnx.vmap, scan, remat, split/merge) compute what they compute on
JAX. One subprocess runs the programs on ember (the alias cannot share a process with the real JAX);
JAX's values are recorded. Their own test suites: tools/run_library_tests.py."""
import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from recorded import jax_result

pytest.importorskip("equinox")
pytest.importorskip("flax")
pytestmark = pytest.mark.usefixtures("jax_in_embers_mode")  # (both 32-bit: the programs' random inits agree)

PROGRAMS = textwrap.dedent('''
    import json
    import jax, jax.numpy as jnp, numpy as np
    import equinox as eqx, equinox.internal as eqxi
    from flax import linen as nn

    def equinox_mlp():
        model = eqx.nn.MLP(3, 2, 8, 2, key=jax.random.key(0))
        x = jnp.arange(12.0).reshape(4, 3) / 10

        @eqx.filter_jit
        @eqx.filter_value_and_grad
        def loss(model, x):
            return jnp.sum(jax.vmap(model)(x) ** 2)
        value, grads = loss(model, x)
        return [float(value)] + [np.asarray(g).tolist() for g in jax.tree_util.tree_leaves(grads)]

    def equinox_checkpointed_loop():
        def run(x):
            body = lambda c: (c[0] + 1, c[1] * jnp.sin(c[1]) + x)
            out = eqxi.while_loop(lambda c: c[0] < 5, body, (0, x), max_steps=8, kind="checkpointed")
            return out[1]
        x = jnp.float32(0.7)
        return [float(run(x)), float(jax.grad(run)(x)), float(jax.jit(jax.grad(run))(x))]

    def equinox_error_if():
        f = eqx.filter_jit(lambda x: eqx.error_if(x, x < 0, "negative") * 2)
        try:
            f(jnp.float32(-1))
            raised = None
        except Exception as e:
            raised = "negative" in str(e)
        return [float(f(jnp.float32(3))), raised]

    def flax_mlp():
        class MLP(nn.Module):
            @nn.compact
            def __call__(self, x):
                x = nn.relu(nn.Dense(8)(x))
                return nn.Dense(2)(x)
        model = MLP()
        x = jnp.arange(12.0).reshape(4, 3) / 10
        params = model.init(jax.random.key(0), x)
        loss = lambda p: jnp.sum(model.apply(p, x) ** 2)
        value, grads = jax.jit(jax.value_and_grad(loss))(params)
        return [float(value)] + [np.asarray(g).tolist() for g in jax.tree_util.tree_leaves(grads)]

    def flax_nnx_train():
        import optax
        from flax import nnx

        class MLP(nnx.Module):
            def __init__(self, rngs):
                self.lin1 = nnx.Linear(6, 16, rngs=rngs)
                self.norm = nnx.LayerNorm(16, rngs=rngs)
                self.drop = nnx.Dropout(0.2, rngs=rngs)
                self.lin2 = nnx.Linear(16, 3, rngs=rngs)

            def __call__(self, x):
                return self.lin2(self.drop(nnx.relu(self.norm(self.lin1(x)))))
        model = MLP(nnx.Rngs(0))
        optimizer = nnx.Optimizer(model, optax.adam(1e-2), wrt=nnx.Param)
        metrics = nnx.MultiMetric(accuracy=nnx.metrics.Accuracy(), loss=nnx.metrics.Average("loss"))

        @nnx.jit
        def train_step(model, optimizer, metrics, x, y):
            def loss_fn(model):
                logits = model(x)
                return optax.softmax_cross_entropy_with_integer_labels(logits, y).mean(), logits
            (loss, logits), grads = nnx.value_and_grad(loss_fn, has_aux=True)(model)
            metrics.update(loss=loss, logits=logits, labels=y)
            optimizer.update(model, grads)
            return loss
        rng = np.random.default_rng(0)
        x = jnp.asarray(rng.normal(size=(8, 6)).astype(np.float32))
        y = jnp.asarray(rng.integers(0, 3, size=(8,)).astype(np.int32))
        losses = [float(train_step(model, optimizer, metrics, x, y)) for _ in range(3)]
        computed = metrics.compute()
        model.eval()
        return losses + [float(computed["accuracy"]), float(computed["loss"]), np.asarray(model(x)).tolist()]

    def flax_nnx_transforms():
        from flax import nnx

        class Block(nnx.Module):
            def __init__(self, rngs):
                self.lin = nnx.Linear(4, 4, rngs=rngs)

            def __call__(self, x):
                return x + nnx.gelu(self.lin(x))

        @nnx.split_rngs(splits=3)
        @nnx.vmap(in_axes=(0,), out_axes=0)
        def make_blocks(rngs):
            return Block(rngs)

        @nnx.scan(in_axes=(0, nnx.Carry), out_axes=nnx.Carry)
        def run(block, x):
            return block(x)
        blocks = make_blocks(nnx.Rngs(1))
        x = jnp.linspace(-1.0, 1.0, 8, dtype=jnp.float32).reshape(2, 4)
        grads = nnx.grad(lambda b: nnx.remat(run)(b, x).sum())(blocks)
        graphdef, state = nnx.split(blocks)
        merged = nnx.merge(graphdef, state)
        return [np.asarray(run(blocks, x)).tolist(), np.asarray(grads.lin.kernel[...]).tolist(),
                np.asarray(run(merged, x)).tolist()]

    PROGRAMS = {"equinox_mlp": equinox_mlp, "equinox_checkpointed_loop": equinox_checkpointed_loop,
                "equinox_error_if": equinox_error_if, "flax_mlp": flax_mlp, "flax_nnx_train": flax_nnx_train,
                "flax_nnx_transforms": flax_nnx_transforms}
''')


def _on_jax(name):
    namespace = {}
    exec(PROGRAMS, namespace)
    return json.loads(json.dumps(namespace["PROGRAMS"][name]()))


@pytest.fixture(scope="module")
def on_ember():
    code = PROGRAMS + "\nprint(json.dumps({name: program() for name, program in PROGRAMS.items()}))\n"
    env = {k: v for k, v in os.environ.items() if k not in ("JAX_ENABLE_X64", "EMBER_ENABLE_X64")}
    done = subprocess.run([sys.executable, "-m", "ember.as_jax", "-c", code], capture_output=True, text=True,
                          timeout=600, env=env)
    assert done.returncode == 0, done.stderr[-4000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("name", ["equinox_mlp", "equinox_checkpointed_loop", "equinox_error_if", "flax_mlp",
                                  "flax_nnx_train", "flax_nnx_transforms"])
def test_library_program_matches_jax(on_ember, name):
    want = jax_result(lambda: _on_jax(name))
    got = on_ember[name]
    assert len(got) == len(want)
    for g, w in zip(got, want):
        if isinstance(w, (bool, type(None))):
            assert g == w
        else:
            np.testing.assert_allclose(np.asarray(g, np.float64), np.asarray(w, np.float64), rtol=2e-5, atol=1e-6)
