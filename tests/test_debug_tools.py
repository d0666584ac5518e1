"""jax.debug's breakpoint, log and effect types on ember (ember.debug), against JAX: the debugger's session (frames,
values, moving up and down, errors) eagerly and under jit, with its token form; the log records (message, level,
the user's line) eagerly and from compiled code."""
import io
import logging

import numpy as np
import pytest

import jax
import jax.numpy as jnp

import ember
import ember.numpy as enp

COMMANDS = "p y\np y.shape\npp {'k': y}\nzz\nu\np x\nd\nl\nc\n"


def _session(lib, xs, jit, **breakpoint_kwargs):
    out = io.StringIO()

    def inner(x):
        y = x * 2
        lib.debug.breakpoint(stdin=io.StringIO(COMMANDS), stdout=out, num_frames=2, **breakpoint_kwargs)
        return y + 1

    def outer(x):
        return inner(x) - 1

    result = (lib.jit(outer) if jit else outer)(xs.arange(3.0, dtype=xs.float32))
    return np.asarray(result), out.getvalue()


@pytest.mark.parametrize("jit", [False, True])
def test_breakpoint_session_as_jax(jit):
    ours, theirs = _session(ember, enp, jit), _session(jax, jnp, jit)
    np.testing.assert_array_equal(ours[0], theirs[0])
    assert ours[1] == theirs[1]
    assert "Array([0., 2., 4.], dtype=float32)" in ours[1] and "NameError: name 'zz' is not defined" in ours[1]


def test_breakpoint_with_a_token_and_errors():
    out = io.StringIO()

    def f(x):
        y = x + 1
        y = ember.debug.breakpoint(token=y, stdin=io.StringIO("p y\nc\n"), stdout=out, num_frames=1)
        return y * 2

    np.testing.assert_array_equal(np.asarray(ember.jit(f)(enp.ones(2))), [4.0, 4.0])
    assert "Array([2., 2.], dtype=float32)" in out.getvalue()
    with pytest.raises(ValueError, match="mutually exclusive"):
        ember.debug.breakpoint(token=enp.ones(1), ordered=True)


def test_log_records_as_jax(caplog):
    def run(lib, xs):
        lib.debug.log("x={x}", x=xs.arange(3, dtype=xs.int32))
        lib.jit(lambda v: lib.debug.log("y={} and {}", v * 2, v.sum()))(xs.arange(3.0, dtype=xs.float32))
        lib.debug.log("no placeholders", xs.ones(2, xs.float32), skip_format_check=True)

    with caplog.at_level(logging.INFO):
        run(ember, enp)
        ours = [(r.levelname, r.getMessage(), r.lineno) for r in caplog.records if r.name == "ember.debug"]
        caplog.clear()
        run(jax, jnp)
        theirs = [(r.levelname, r.getMessage(), r.lineno) for r in caplog.records if r.name == "jax._src.debugging"]
    assert ours == theirs
    assert [m for _, m, _ in ours] == ["x=[0 1 2]", "y=[0. 2. 4.] and 3.0", "no placeholders [1. 1.]"]


def test_effect_types():
    assert str(ember.debug.DebugEffect()) == str(jax.debug.DebugEffect()) == "Debug"
    assert str(ember.debug.OrderedDebugEffect()) == str(jax.debug.OrderedDebugEffect()) == "OrderedDebug"
    assert isinstance(ember.debug.OrderedDebugEffect(), ember.extend.core.Effect)


def test_names_match_jax():
    assert [name for name in jax.debug.__all__ if not hasattr(ember.debug, name)] == []
