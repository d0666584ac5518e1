"""ember.experimental.rnn against jax.experimental.rnn: the flat weight layout (get_num_params_in_lstm,
init_lstm_weight with the same key, unpack_lstm_weights, swap_lstm_gates), lstm_ref's and lstm's values against
JAX's lstm_ref (JAX's lstm needs cuDNN), one and several layers, one and two directions, ragged lengths; lstm's
gradients (its custom VJP, lstm_fwd and lstm_bwd) against JAX's gradients of lstm_ref, under jit and vmap; the
masking against the same sequences run unpadded; the errors."""
import jax
import jax.experimental.rnn as jrnn
import numpy as np
import pytest

import ember
import ember.experimental.rnn as ernn

pytestmark = pytest.mark.usefixtures("jax_in_embers_mode")

# (input_size, hidden_size, num_layers, bidirectional, seq_lengths) over x of shape (batch, 5 steps, input_size):
# full lengths, ragged ones, and a length of 0 (the final states are then those after the whole padded run). The
# default run checks BIDIRECTIONAL (two layers of two directions, ragged, a zero length) and ONE_LAYER; the slow
# tier all of them.
ONE_LAYER = (3, 4, 1, False, [5, 5])
BIDIRECTIONAL = (3, 4, 2, True, [4, 0, 5, 2])
CONFIGS = {
    "one_layer": ONE_LAYER,
    "two_layers_ragged": (4, 3, 2, False, [5, 2, 1]),
    "bidirectional_ragged": (3, 5, 1, True, [5, 3, 0]),
    "bidirectional_two_layers_zero_length": BIDIRECTIONAL,
    "bidirectional_three_layers": (2, 4, 3, True, [4, 1, 5, 5]),
}
STEPS = 5


def _inputs(config, seed=0, dtype=np.float32):
    input_size, hidden_size, num_layers, bidirectional, lengths = config
    rng = np.random.default_rng(seed)
    states = ((2 if bidirectional else 1) * num_layers, len(lengths), hidden_size)
    x = rng.standard_normal((len(lengths), STEPS, input_size)).astype(dtype)
    h_0 = rng.standard_normal(states).astype(dtype)
    c_0 = rng.standard_normal(states).astype(dtype)
    weights = np.asarray(jrnn.init_lstm_weight(jax.random.PRNGKey(seed), input_size, hidden_size, num_layers,
                                               bidirectional)).astype(dtype)
    return x, h_0, c_0, weights, np.array(lengths, np.int32)


def _sizes(config):
    return config[:4]


def _jax_ref(x, h_0, c_0, weights, seq_lengths, sizes):
    input_size, hidden_size, num_layers, bidirectional = sizes
    return jrnn.lstm_ref(x, h_0, c_0, *jrnn.unpack_lstm_weights(weights, *sizes), seq_lengths, input_size,
                         hidden_size, num_layers, 0.0, bidirectional)


def _close(ours, theirs, rtol=2e-6, atol=2e-6):
    assert len(ours) == len(theirs)
    for a, b in zip(ours, theirs):
        assert np.asarray(a).shape == np.asarray(b).shape and np.asarray(a).dtype == np.asarray(b).dtype
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=rtol, atol=atol)


def test_the_weight_layout_is_jaxs():
    """The parameter count, the initial weights (bit for bit, old- and new-style keys), the unpacked blocks and the
    gate swap (and that it is its own inverse)."""
    for sizes, ours, theirs in [((3, 4, 1, False), ember.random.PRNGKey(3), jax.random.PRNGKey(3)),
                                ((2, 3, 2, True), ember.random.key(4), jax.random.key(4))]:
        assert ernn.get_num_params_in_lstm(*sizes) == jrnn.get_num_params_in_lstm(*sizes)
        w = ernn.init_lstm_weight(ours, *sizes)
        assert w.dtype == np.float32
        np.testing.assert_array_equal(np.asarray(w), np.asarray(jrnn.init_lstm_weight(theirs, *sizes)))
        w = np.random.default_rng(0).standard_normal(jrnn.get_num_params_in_lstm(*sizes)).astype(np.float32)
        ours, theirs = ernn.unpack_lstm_weights(w, *sizes), jrnn.unpack_lstm_weights(w, *sizes)
        for a, b in zip(ours, theirs):
            assert list(a) == list(b)
            for p in a:
                np.testing.assert_array_equal(np.asarray(a[p]), np.asarray(b[p]))
        swapped = ernn.swap_lstm_gates(w, *sizes)
        np.testing.assert_array_equal(np.asarray(ernn.swap_lstm_gates(swapped, *sizes)), w)
        assert (np.asarray(swapped) != w).any()
    sizes = (3, 2, 1, True)  # (JAX's swap runs block by block, eagerly: one small size)
    w = np.random.default_rng(1).standard_normal(jrnn.get_num_params_in_lstm(*sizes)).astype(np.float32)
    np.testing.assert_array_equal(np.asarray(ernn.swap_lstm_gates(w, *sizes)),
                                  np.asarray(jrnn.swap_lstm_gates(w, *sizes)))


def _cases(default):
    """CONFIGS' names, all but default in the slow tier (same checks on other layer counts and directions)."""
    return [default] + [pytest.param(name, marks=pytest.mark.slow) for name in CONFIGS if name != default]


@pytest.mark.parametrize("name", _cases("bidirectional_two_layers_zero_length"))
def test_lstm_ref_and_lstm_are_jaxs_lstm_ref(name):
    config = CONFIGS[name]
    x, h_0, c_0, weights, seq_lengths = _inputs(config)
    sizes = _sizes(config)
    theirs = _jax_ref(x, h_0, c_0, weights, seq_lengths, sizes)
    input_size, hidden_size, num_layers, bidirectional = sizes
    ref = ernn.lstm_ref(x, h_0, c_0, *ernn.unpack_lstm_weights(weights, *sizes), seq_lengths, input_size,
                        hidden_size, num_layers, 0.0, bidirectional)
    _close(ref, theirs)
    # (JAX's own example passes dropout=False and the sizes by keyword)
    ours = ernn.lstm(x, h_0, c_0, weights, seq_lengths=seq_lengths, input_size=input_size, hidden_size=hidden_size,
                     num_layers=num_layers, dropout=False, bidirectional=bidirectional)
    _close(ours, theirs)
    assert not np.asarray(ours[0])[np.arange(STEPS)[None, :] >= seq_lengths[:, None]].any()


def test_gradients_under_jit_and_vmap_and_the_halves_are_jaxs():
    """jit(vmap(value_and_grad)) of a weighted sum of lstm's three outputs, with respect to x (batched), h_0, c_0
    and the weights, against JAX's of its lstm_ref (one layer, two directions, a zero length); and for the first
    example, lstm_bwd on lstm_fwd's residuals (zeros, int32, for seq_lengths, as JAX's lstm_bwd)."""
    config = CONFIGS["bidirectional_ragged"]
    x, h_0, c_0, weights, seq_lengths = _inputs(config)
    xs = np.stack([x, -0.5 * x, x[:, ::-1]])
    sizes = _sizes(config)
    input_size, hidden_size, num_layers, bidirectional = sizes
    rng = np.random.default_rng(1)
    cts = [rng.standard_normal(shape).astype(np.float32) for shape in [(3, STEPS, 10), (2, 3, 5), (2, 3, 5)]]

    def ember_loss(x, h_0, c_0, w):
        outs = ernn.lstm(x, h_0, c_0, w, seq_lengths, input_size, hidden_size, num_layers, 0.0, bidirectional)
        return sum((o * c).sum() for o, c in zip(outs, cts))

    def jax_loss(x, h_0, c_0, w):
        return sum((o * c).sum() for o, c in zip(_jax_ref(x, h_0, c_0, w, seq_lengths, sizes), cts))

    def batched(lib, loss):
        return lib.vmap(lib.value_and_grad(loss, argnums=(0, 1, 2, 3)), in_axes=(0, None, None, None))

    ours = ember.jit(batched(ember, ember_loss))(xs, h_0, c_0, weights)
    theirs = jax.jit(batched(jax, jax_loss))(xs, h_0, c_0, weights)
    _close([ours[0], *ours[1]], [theirs[0], *theirs[1]], rtol=1e-5, atol=1e-5)

    outs, residuals = ernn.lstm_fwd(x, h_0, c_0, weights, seq_lengths, input_size, hidden_size, num_layers, 0.0,
                                    bidirectional, None)
    _close(outs, ernn.lstm(x, h_0, c_0, weights, seq_lengths, input_size, hidden_size, num_layers, 0.0,
                           bidirectional))
    *halves, d_lengths = ernn.lstm_bwd(input_size, hidden_size, num_layers, 0.0, bidirectional, None, residuals,
                                       tuple(cts))
    _close(halves, [g[0] for g in theirs[1]], rtol=1e-5, atol=1e-5)
    assert d_lengths.dtype == np.int32 and d_lengths.shape == seq_lengths.shape and not np.asarray(d_lengths).any()


@pytest.mark.slow  # (the default run's: test_gradients_under_jit_and_vmap_and_the_halves_are_jaxs)
@pytest.mark.parametrize("name", list(CONFIGS))
def test_gradients_and_the_halves_are_jaxs(name):
    """The VJP of all three outputs with respect to x, h_0, c_0 and the weights, against JAX's VJP of its
    lstm_ref: lstm_bwd on lstm_fwd's residuals, ember's lstm under jit(grad) (its custom VJP), and ember's own
    derivative of its lstm_ref."""
    config = CONFIGS[name]
    x, h_0, c_0, weights, seq_lengths = args = _inputs(config)
    sizes = _sizes(config)
    input_size, hidden_size, num_layers, bidirectional = sizes
    outs, jax_vjp = jax.vjp(lambda *a: _jax_ref(*a, seq_lengths, sizes), x, h_0, c_0, weights)
    rng = np.random.default_rng(1)
    cts = tuple(rng.standard_normal(np.shape(o)).astype(np.float32) for o in outs)
    theirs = jax_vjp(cts)

    ours, residuals = ernn.lstm_fwd(*args, input_size, hidden_size, num_layers, 0.0, bidirectional, None)
    _close(ours, outs)
    *halves, d_lengths = ernn.lstm_bwd(input_size, hidden_size, num_layers, 0.0, bidirectional, None, residuals, cts)
    _close(halves, theirs, rtol=1e-5, atol=1e-5)

    def loss(x, h_0, c_0, weights):
        outs = ernn.lstm(x, h_0, c_0, weights, seq_lengths, input_size, hidden_size, num_layers, 0.0, bidirectional)
        return sum((o * c).sum() for o, c in zip(outs, cts))

    _close(ember.jit(ember.grad(loss, argnums=(0, 1, 2, 3)))(*args[:4]), theirs, rtol=1e-5, atol=1e-5)

    _, ref_vjp = ember.vjp(lambda *a: ernn.lstm_ref(*a[:3], *ernn.unpack_lstm_weights(a[3], *sizes), seq_lengths,
                                                    input_size, hidden_size, num_layers, 0.0, bidirectional), *args[:4])
    _close(ref_vjp(cts), theirs, rtol=1e-5, atol=1e-5)


def test_padding_changes_nothing_within_each_length():
    """Each sequence run alone, unpadded, gives lstm's outputs up to its length and its final states: the masking
    and the reverse direction's reading of a padded sequence (an oracle independent of JAX)."""
    config = (3, 4, 1, True, [5, 2])
    x, h_0, c_0, weights, seq_lengths = _inputs(config)
    x = x.copy()
    x[1, 2:] = 100.0  # (padding of any value is ignored)
    input_size, hidden_size, num_layers, bidirectional = _sizes(config)
    y, h_n, c_n = ernn.lstm(x, h_0, c_0, weights, seq_lengths, input_size, hidden_size, num_layers, 0.0,
                            bidirectional)
    for b, length in [(1, 2)]:  # (the padded one)
        alone = ernn.lstm(x[b:b + 1, :length], h_0[:, b:b + 1], c_0[:, b:b + 1], weights,
                          np.array([length], np.int32), input_size, hidden_size, num_layers, 0.0, bidirectional)
        np.testing.assert_allclose(np.asarray(y)[b, :length], np.asarray(alone[0])[0], rtol=1e-6, atol=1e-6)
        np.testing.assert_allclose(np.asarray(h_n)[:, b], np.asarray(alone[1])[:, 0], rtol=1e-6, atol=1e-6)
        np.testing.assert_allclose(np.asarray(c_n)[:, b], np.asarray(alone[2])[:, 0], rtol=1e-6, atol=1e-6)


def test_forward_mode_is_refused_as_for_any_custom_vjp():
    config = ONE_LAYER
    x, h_0, c_0, weights, seq_lengths = _inputs(config)
    with pytest.raises(TypeError, match="forward-mode differentiation .* of a custom_vjp function"):
        ember.jvp(lambda x: ernn.lstm(x, h_0, c_0, weights, seq_lengths, *_sizes(config)[:3], 0.0, False),
                  (x,), (x,))


def _call_lstm(config, **changes):
    x, h_0, c_0, weights, seq_lengths = _inputs(config)
    input_size, hidden_size, num_layers, bidirectional = _sizes(config)
    args = dict(x=x, h_0=h_0, c_0=c_0, weights=weights, seq_lengths=seq_lengths, input_size=input_size,
                hidden_size=hidden_size, num_layers=num_layers, dropout=0.0, bidirectional=bidirectional)
    args.update(changes)
    return ernn.lstm(**args)


ERRORS = [
    (dict(seq_lengths=np.array([5.0, 2.0, 1.0], np.float32)), NotImplementedError, r"lstm: `seq_lengths` can only "
     r"be int32 \(as JAX's\), got float32"),
    (dict(dropout=0.25), NotImplementedError, r"lstm: dropout=0.25 is not supported.*num_layers=1"),
    (dict(x=np.zeros((3, 5, 2), np.float32)), ValueError, r"lstm: x must be \(batch_size, max_seq_length >= 1, "
     r"input_size=4\), got shape \(3, 5, 2\)"),
    (dict(x=np.zeros((3, 0, 4), np.float32)), ValueError, r"lstm: x must be .* got shape \(3, 0, 4\)"),
    (dict(h_0=np.zeros((1, 3, 3), np.float32)), ValueError, r"lstm: h_0 must be \(num_directions \* num_layers, "
     r"batch_size, hidden_size\) = \(2, 3, 3\) for x of shape \(3, 5, 4\), got shape \(1, 3, 3\)"),
    (dict(c_0=np.zeros((2, 2, 3), np.float32)), ValueError, r"lstm: c_0 must be .* got shape \(2, 2, 3\)"),
    (dict(seq_lengths=np.array([5, 2], np.int32)), ValueError, r"lstm: seq_lengths must be \(batch_size,\) = \(3,\)"),
    (dict(weights=np.zeros(10, np.float32)), ValueError, r"lstm: weights must be the flat vector of 204 parameters "
     r"of an LSTM with input_size=4, hidden_size=3, num_layers=2, bidirectional=False, got shape \(10,\)"),
    (dict(x=np.zeros((3, 5, 4), np.float16)), TypeError, r"lstm: x, h_0, c_0 and weights must have one floating "
     r"dtype, got x float16, h_0 float32"),
    (dict(num_layers=0), ValueError, r"lstm: num_layers must be a positive int, got 0"),
]


def test_errors_name_the_argument_and_shapes():
    for changes, error, match in ERRORS:
        with pytest.raises(error, match=match):
            _call_lstm(CONFIGS["two_layers_ragged"], **changes)


def test_errors_of_lstm_ref_and_the_layout_functions():
    """JAX's own refusals (a non-int32 seq_lengths, dropout) with JAX's exception types; the weights' and the
    unpacked blocks' shapes named."""
    config = ONE_LAYER
    x, h_0, c_0, weights, seq_lengths = _inputs(config)
    sizes = _sizes(config)
    blocks = ernn.unpack_lstm_weights(weights, *sizes)
    for lib, rnn in ((ember, ernn), (jax, jrnn)):
        with pytest.raises(NotImplementedError, match="`seq_lengths` can only be int32"):
            rnn.lstm_ref(x, h_0, c_0, *blocks, seq_lengths.astype(np.float32), *sizes[:3], 0.0, False)
        with pytest.raises(NotImplementedError, match="[Dd]ropout"):
            rnn.lstm_ref(x, h_0, c_0, *blocks, seq_lengths, *sizes[:3], 0.5, False)
    bad = dict(blocks[1])
    bad[0] = bad[0][:, :2]
    with pytest.raises(ValueError, match=r"lstm_ref: W_hh\[0\] must have shape \(16, 4\), got \(16, 2\)"):
        ernn.lstm_ref(x, h_0, c_0, blocks[0], bad, blocks[2], blocks[3], seq_lengths, *sizes[:3], 0.0, False)
    with pytest.raises(ValueError, match=r"lstm_ref: W_ih must be a dict with the pseudo-layers 0..1 as keys"):
        ernn.lstm_ref(x, np.concatenate([h_0, h_0]), np.concatenate([c_0, c_0]), *blocks, seq_lengths, 3, 4, 1,
                      0.0, True)
    with pytest.raises(ValueError, match=r"swap_lstm_gates: weights must be the flat vector of 144 parameters .* "
                                         r"got shape \(143,\)"):
        ernn.swap_lstm_gates(weights[:-1], *sizes)
    with pytest.raises(ValueError, match=r"get_num_params_in_lstm: hidden_size must be a positive int, got 2.0"):
        ernn.get_num_params_in_lstm(3, 2.0, 1, False)


@pytest.mark.slow  # (larger sizes, more seeds, float64: the default run has the same checks at small sizes)
@pytest.mark.parametrize("seed", [0, 1])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_larger_lstm_and_gradients_are_jaxs(seed, dtype):
    config = (6, 9, 2, True, [7, 1, 0, 7, 3, 5])
    with ember.config.override(enable_x64=True), jax.enable_x64(True):
        x, h_0, c_0, weights, seq_lengths = _inputs(config, seed, dtype)
        x = np.concatenate([x, x[:, :2]], axis=1)  # (7 steps)
        sizes = _sizes(config)

        def loss(lib, rnn_lstm):
            return lambda x, w: sum((o ** 2).sum() for o in rnn_lstm(x, w))

        ember_lstm = lambda x, w: ernn.lstm(x, h_0, c_0, w, seq_lengths, *sizes[:3], 0.0, sizes[3])  # noqa: E731
        jax_lstm = lambda x, w: _jax_ref(x, h_0, c_0, w, seq_lengths, sizes)  # noqa: E731
        tol = 1e-12 if dtype == np.float64 else 1e-5
        _close(ember_lstm(x, weights), jax_lstm(x, weights), rtol=tol, atol=tol)
        _close(ember.grad(loss(ember, ember_lstm), argnums=(0, 1))(x, weights),
               jax.grad(loss(jax, jax_lstm), argnums=(0, 1))(x, weights), rtol=10 * tol, atol=10 * tol)
