"""Mutable array references (ember.new_ref, Ref, freeze, ember.ref) against JAX's (jax.new_ref, jax.ref): the
programs of JAX's "Ref" guide and more, written once for both libraries and run on each; values and final Ref
contents compared, eagerly, under jit, in scan/fori_loop/while_loop/cond bodies, under grad, jvp, vjp, vmap and
hessian; the IR printout (Ref types, reads and writes, their discharge); and the errors JAX raises (returning a Ref,
passing one twice or both ways, a differentiated write, a vmapped write into an unmapped Ref, math on a Ref) as
errors of the same types."""
import jax
import jax.numpy as jjnp
import numpy as np
import pytest

import ember
import ember.numpy as enp
from ember import lax as elax
from recorded import jax_result


def _run(lib, np_, lax, build, args):
    fn, refs = build(lib, np_, lax)
    result = fn(*args)
    return result, [np.asarray(r[...]) for r in refs]


def both(build, *args, rtol=1e-6):
    """build(lib, np_, lax) -> (function, refs it reads after) run on ember and on JAX (recorded: tests/recorded.py):
    results and the refs' final contents compared."""
    ours, our_refs = _run(ember, enp, elax, build, args)
    theirs, their_refs = jax_result(lambda: _run(jax, jjnp, jax.lax, build, args))
    for a, b in zip(jax.tree.leaves(ours), jax.tree.leaves(theirs)):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=rtol, atol=1e-6)
    assert len(our_refs) == len(their_refs)
    for a, b in zip(our_refs, their_refs):
        np.testing.assert_allclose(a, b, rtol=rtol, atol=1e-6)
    return ours, our_refs


def test_eager_reads_and_writes_of_every_index_kind():
    def build(lib, np_, lax):
        ref = lib.new_ref(np_.arange(12.).reshape(3, 4))

        def run():
            row = ref[0]
            ref[1] = row
            ref[2, 3] = ref[1, 2]
            ref[0, :3] = ref[:, 1]
            vals = ref[np_.array([0, 0, 1]), np_.array([1, 2, 3])]
            ref[np_.array([1, 2, 1]), np_.array([0, 0, 1])] = vals
            ref[1:] += 1.0
            ref[...] = ref[...] * 2
            return ref[::2, 1]
        return run, [ref]
    both(build)
    r = ember.new_ref(enp.zeros(3))
    assert isinstance(r, ember.Ref) and not isinstance(r, ember.Array)
    assert (r.shape, r.dtype, r.ndim, r.size, len(r)) == ((3,), np.float32, 1, 3, 3)
    assert str(r.aval) == "Ref{f32[3]}" and repr(r) == "Ref([0., 0., 0.], dtype=float32)"
    seen = []
    ember.jit(lambda q: seen.append((isinstance(q, ember.Ref), isinstance(q, ember.Array),
                                     isinstance(q[...], ember.Array))))(r)
    assert seen == [(True, False, True)]


def test_jit_closing_over_a_ref_updates_it_each_call():
    def build(lib, np_, lax):
        x_ref = lib.new_ref(np_.zeros(3))

        @lib.jit
        def f():
            x_ref[1] += 1.0

        def run():
            f()
            f()
        return run, [x_ref]
    both(build)


def test_jit_taking_refs_and_internal_refs():
    def build(lib, np_, lax):
        a = lib.new_ref(np_.arange(3.0))
        b = lib.new_ref(np_.ones(3))

        @lib.jit
        def sin_inplace(x_ref, y_ref, scale):
            x_ref[...] = np_.sin(x_ref[...]) * scale
            y_ref[1:] += x_ref[:2]

        @lib.jit
        def pure1(x):
            ref = lib.new_ref(x)
            ref[...] = ref[...] + ref[...]
            ref[0] = -1.0
            return ref[...], lib.freeze(ref)

        def run(x):
            sin_inplace(a, b, 2.0)
            sin_inplace(a, b, 0.5)
            return pure1(x)
        return run, [a, b]
    both(build, np.array([1.0, 2.0, 3.0], np.float32))


def test_the_ir_shows_the_references_and_their_discharge():
    def f(x_ref, x):
        r = ember.new_ref(x)
        r[...] += x_ref[...]
        x_ref[...] = r[...] * 2
        return ember.freeze(r)

    ir = ember.make_jaxpr(f)(ember.new_ref(enp.zeros(3)), enp.ones(3))
    text = str(ir)
    assert "a:Ref{f32[3]}" in text and "new_ref" in text and "freeze" in text
    assert "<- a[...]" in text and "a[...] <-" in text
    pure = ember.passes.discharge_refs(ir)
    printed = str(pure)
    assert "Ref" not in printed and "new_ref" not in printed and "<-" not in printed
    assert [a.str_short() for a in pure.in_avals] == ["f32[3]", "f32[3]"] and len(pure.outs) == 2  # (value, x_ref's final)
    ember.check_ir(pure)
    x_ref = ember.new_ref(enp.full(3, 2.0))
    out = ember.jit(f)(x_ref, enp.ones(3))
    np.testing.assert_allclose(np.asarray(out), [3.0, 3.0, 3.0])
    np.testing.assert_allclose(np.asarray(x_ref[...]), [6.0, 6.0, 6.0])


def test_loops_and_branches_read_and_write_refs():
    def build(lib, np_, lax):
        total = lib.new_ref(0)
        hist = lib.new_ref(np_.zeros(4))
        flags = lib.new_ref(np_.zeros(3))

        def foreach(*args):
            def decorator(body):
                return lax.scan(lambda _, elts: (None, body(*elts)), None, args)[1]
            return decorator

        @lib.jit
        def run(xs):
            @foreach(xs)
            def ys(x):
                total[...] += x
                return x * 2

            def body(i, c):
                hist[i % 4] += lax.convert_element_type(i, np_.float32)
                return c + hist[0]
            c = lax.fori_loop(0, 7, body, 0.0)

            def cond_body(i):
                flags[i] = flags[i] + total[...].astype(np_.float32)
                return i + 1
            n = lax.while_loop(lambda i: (i < 3) & (flags[0] < 100.0), cond_body, 0)
            lax.cond(ys[0] > 0, lambda: flags.__setitem__(2, -1.0), lambda: flags.__setitem__(1, 7.0))
            return ys, c, n
        return run, [total, hist, flags]
    both(build, np.arange(10, dtype=np.int32))
    both(build, -np.arange(10, dtype=np.int32))


def test_eager_loops_over_closed_over_refs():
    def build(lib, np_, lax):
        r = lib.new_ref(np_.zeros(3))

        def run(xs):
            lax.scan(lambda c, x: (r.__setitem__(Ellipsis, r[...] + x), (c, None))[1], 0.0, xs)
            return lax.cond(r[0] > 1, lambda: r[1] * 2, lambda: r[2])
        return run, [r]
    both(build, np.arange(12.0, dtype=np.float32).reshape(4, 3))


def test_grad_of_functions_using_refs():
    def g(lib, np_):
        def f(x):
            x_ref = lib.new_ref(0.0)
            x_ref[...] = np_.sin(x)
            return x_ref[...]
        return f

    def pure2(lib, np_):
        @lib.jit
        def f(x):
            ref = lib.new_ref(x)
            ref[...] = ref[...] + ref[...]
            return ref[...]
        return f

    def accumulate(lib, np_):
        def f(w, xs):
            acc = lib.new_ref(np_.zeros_like(w))

            def body(c, x):
                acc[...] += np_.tanh(w * x)
                acc[0] *= 0.5
                return c + acc[1], None
            c, _ = lib.lax.scan(body, 0.0, xs)
            return np_.sum(lib.freeze(acc) ** 2) + c
        return f

    w, xs = np.array([0.3, -0.7, 1.1], np.float32), np.linspace(-1, 1, 15).reshape(5, 3).astype(np.float32)
    grad, jit_grad = (lambda lib, f: lib.grad(f)), (lambda lib, f: lib.jit(lib.grad(f)))
    cases = ((g, (1.0,), [grad]), (pure2, (3.0,), [grad]), (accumulate, (w, xs), [grad, jit_grad]))
    for make, args, transforms in cases:
        ours, theirs = make(ember, enp), make(jax, jjnp)
        for transform in transforms:
            np.testing.assert_allclose(np.asarray(transform(ember, ours)(*args)),
                                       np.asarray(transform(jax, theirs)(*args)), rtol=1e-5, atol=1e-6)
    def functional(w, xs):  # (the oracle of hessian, which JAX 0.10.2 cannot take of refs: the same, without)
        def body(carry, x):
            c, acc = carry
            acc = (acc + jjnp.tanh(w * x)).at[0].multiply(0.5)
            return (c + acc[1], acc), None
        (c, acc), _ = jax.lax.scan(body, (0.0, jjnp.zeros_like(w)), xs)
        return jjnp.sum(acc ** 2) + c

    ours, theirs = accumulate(ember, enp), accumulate(jax, jjnp)
    np.testing.assert_allclose(np.asarray(ember.hessian(ours)(w, xs)), np.asarray(jax.hessian(functional)(w, xs)),
                               rtol=1e-4, atol=1e-5)
    (o, t), (jo, jt) = ember.jvp(ours, (w, xs), (xs[0], xs)), jax.jvp(theirs, (w, xs), (xs[0], xs))
    np.testing.assert_allclose([float(o), float(t)], [float(jo), float(jt)], rtol=1e-5)
    (o, pull), (jo, jpull) = ember.vjp(ours, w, xs), jax.vjp(theirs, w, xs)
    for a, b in zip(pull(np.float32(1.0)), jpull(np.float32(1.0))):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-5, atol=1e-6)


def test_plumbing_refs_along_for_the_ride_under_grad():
    def build(lib, np_, lax):
        plumbing = lib.new_ref(0.0)
        seen = lib.new_ref(np_.zeros(2))

        def foo(x, some_plumbing_ref):
            y = x + x
            some_plumbing_ref[...] += lax.stop_gradient(y)
            seen[0] = seen[1] + 1.0
            seen[1] = some_plumbing_ref[...]
            return y * x

        def run(x):
            return lib.grad(foo)(x, plumbing), lib.jit(lib.grad(foo))(x, plumbing), lib.value_and_grad(foo)(x, plumbing)
        return run, [plumbing, seen]
    both(build, 1.5)


def test_microbatched_gradient_accumulation_into_a_ref():
    def build(lib, np_, lax):
        def loss(ws, xs):
            act, _ = lax.scan(lambda x, w: (np_.tanh(np_.dot(x, w)), None), xs, ws)
            return np_.mean(act)

        @lib.jit
        def process_batch(ws, batch):
            grad_acc = lib.new_ref(np_.zeros_like(ws))

            def step(_, xs):
                value, grads = lib.value_and_grad(loss)(ws, xs)
                grad_acc[...] += grads
                return (), value
            (), losses = lax.scan(step, (), batch.reshape(5, 7, -1))
            return lib.freeze(grad_acc), losses
        return process_batch, []
    rng = np.random.default_rng(0)
    ws, batch = rng.normal(size=(3, 4, 4)).astype(np.float32) * 0.5, rng.normal(size=(35, 4)).astype(np.float32)
    (grads, losses), _ = both(build, ws, batch, rtol=1e-5)
    expected = jax.grad(lambda w: sum(jjnp.mean(jax.lax.scan(lambda x, wi: (jjnp.tanh(x @ wi), None), xs, w)[0])
                                      for xs in batch.reshape(5, 7, -1)))(ws)
    np.testing.assert_allclose(np.asarray(grads), np.asarray(expected), rtol=1e-4, atol=1e-6)


def test_vmap_over_ref_arguments_and_internal_refs():
    def build(lib, np_, lax):
        out_ref = lib.new_ref(np_.zeros((3, 3), np_.float32))
        per_member = lib.new_ref(np_.zeros((3, 2), np_.float32))

        def dist(x, y, out_ref):
            out_ref[...] = np_.sum((x - y) ** 2)

        def internal(x, r):
            q = lib.new_ref(x)
            q[0] = q[1] * 2
            r[1] = q[0] + r[0]
            return lib.freeze(q)

        def run(vecs, xs):
            lib.vmap(lib.vmap(dist, (0, None, 0)), (None, 0, 0))(vecs, vecs, out_ref)
            return lib.vmap(internal, (0, 0))(xs, per_member), lib.jit(lib.vmap(internal, (1, 0)))(xs.T, per_member)
        return run, [out_ref, per_member]
    both(build, np.arange(12.0, dtype=np.float32).reshape(3, 4), np.arange(6.0, dtype=np.float32).reshape(3, 2))


def test_ref_functions():
    def build(lib, np_, lax):
        r = lib.new_ref(np_.zeros(4, np_.float32))

        def run():
            old = lib.ref.swap(r, 1, np_.float32(7.0))
            lib.ref.set(r, slice(2, 4), np_.array([1.0, 2.0], np_.float32))
            lib.ref.addupdate(r, 0, np_.float32(3.0))
            lib.ref.addupdate(r, ..., np_.ones(4, np_.float32))
            return old, lib.ref.get(r, 1), lib.ref.get(r), lib.ref.get(r, None)
        return run, [r]
    both(build)
    e = ember.empty_ref(ember.ShapeDtypeStruct((2,), np.float32))
    assert str(e.aval) == "Ref{f32[2]}"
    e[...] = enp.ones(2)
    ember.free_ref(e)
    with pytest.raises(ember.ref.InvalidRefError):
        e[...]
    q = ember.new_ref(enp.arange(5))
    q[3] = 100
    np.testing.assert_array_equal(np.asarray(ember.freeze(q)), [0, 1, 2, 100, 4])
    with pytest.raises(ember.ref.InvalidRefError, match="after ember.freeze"):
        q[0] = 1


def test_errors_as_jax():
    x_ref, j_ref = ember.new_ref(0.0), jax.new_ref(0.0)

    def err1(lib):
        @lib.jit
        def f(r):
            r[...] = 5.0
            return r
        return f

    def err2(lib):
        return lib.jit(lambda a, b: None)

    for build, args in ((err1, 1), (err2, 2)):
        with pytest.raises(ValueError):
            build(jax)(*[j_ref] * args)
        with pytest.raises(ValueError, match="mutable array reference"):
            build(ember)(*[x_ref] * args)
    with pytest.raises(ValueError, match="both closed over and passed"):
        ember.jit(lambda y: y.__setitem__(Ellipsis, x_ref[...]))(x_ref)
    with pytest.raises(ValueError, match="frozen in the function that made it"):
        ember.jit(lambda r: ember.freeze(r))(x_ref)
    with pytest.raises(ValueError, match="unbatched array reference"):
        ember.vmap(lambda x: x_ref.__setitem__(Ellipsis, x))(enp.arange(3.0))
    with pytest.raises(Exception, match="unbatched array reference"):
        jax.vmap(lambda x: j_ref.__setitem__(Ellipsis, x))(jjnp.arange(3.0))

    def err6(x, some_plumbing_ref):
        y = x + x
        some_plumbing_ref[...] += y
        return y
    with pytest.raises(Exception, match="differentiated value"):
        jax.grad(err6)(1.0, j_ref)
    with pytest.raises(ValueError, match="differentiated value"):
        ember.grad(err6)(1.0, x_ref)
    with pytest.raises(ValueError, match="differentiated value"):
        ember.jvp(lambda x: err6(x, x_ref), (1.0,), (1.0,))
    with pytest.raises(TypeError, match="cannot be differentiated with respect to"):
        ember.grad(lambda r: r[...] ** 2)(x_ref)
    with pytest.raises(TypeError):
        jjnp.sin(j_ref)
    with pytest.raises(TypeError, match="Ref"):
        enp.sin(x_ref)
    with pytest.raises(TypeError, match="mutable array reference"):
        ember.jit(lambda r: enp.sin(r))(x_ref)
    for lib, r, np_ in ((ember, ember.new_ref(enp.zeros(3)), enp), (jax, jax.new_ref(jjnp.zeros(3)), jjnp)):
        with pytest.raises(ValueError, match="Invalid dtype"):
            r[0] = 5
        with pytest.raises(ValueError, match="Invalid shape"):
            r[...] = np_.ones(4)
        with pytest.raises(ValueError, match="cannot be returned"):
            lib.lax.scan(lambda c, x: (c, x), lib.new_ref(0.0), np_.arange(3.0))
    with pytest.raises(TypeError, match="mutable array reference"):
        ember.jit(ember.checkpoint(lambda x: (x_ref.__setitem__(Ellipsis, x), x)[1]))(1.0)
    with pytest.raises(TypeError, match="cond_fun writes"):
        elax.while_loop(lambda i: (x_ref.__setitem__(Ellipsis, 1.0), i < 3)[1], lambda i: i + 1, 0)


def test_rules_of_the_reference_primitives():
    from ember._prims.refs import freeze_p, new_ref_p, ref_get_p, ref_swap_p
    for prim in (new_ref_p, freeze_p):  # discharged before anything transforms or lowers them
        for kind in ("lowering", "jvp", "vjp", "batching"):
            with pytest.raises(NotImplementedError, match="discharged before"):
                prim.rule(kind)
    for prim in (ref_get_p, ref_swap_p):
        with pytest.raises(NotImplementedError, match="discharged before lowering"):
            prim.rule("lowering")

    def f(r, x):
        r[1:] = r[:-1] * x
        return r[0] + x

    ir = ember.make_jaxpr(f)(ember.new_ref(enp.zeros(3)), 1.0)
    with pytest.raises(Exception, match="ref_get"):
        ember.lower(ir)
    assert "stablehlo" in ember.lower(ember.passes.discharge_refs(ir))

    # batching: a Ref mapped along axis 1, written with batched and unbatched values; a read of an unmapped Ref
    def g(x, r, s):
        r[0] = x * s[...]
        r[1] = s[...]
        return r[...].sum()

    for lib, np_ in ((ember, enp), (jax, jjnp)):
        r, s = lib.new_ref(np_.zeros((2, 4), np_.float32)), lib.new_ref(np_.float32(3.0))
        out = lib.vmap(g, (0, 1, None))(np_.arange(4.0, dtype=np_.float32), r, s)
        np.testing.assert_allclose(np.asarray(out), np.arange(4.0) * 3 + 3)
        np.testing.assert_allclose(np.asarray(r[...]), [np.arange(4.0) * 3, [3.0] * 4])

    # forward mode: a write of a value without tangent (stop_gradient) is kept; the read has no tangent
    plumb = ember.new_ref(0.0)

    def h(x):
        plumb[...] = elax.stop_gradient(x) * 2 + plumb[...]
        return x * plumb[...]
    out, tangent = ember.jvp(h, (3.0,), (1.0,))
    assert (float(out), float(tangent), float(plumb[...])) == (18.0, 6.0, 6.0)


def test_complex_references():
    def build(lib, np_, lax):
        z = lib.new_ref(np_.array([1 + 2j, 3 - 1j], np_.complex64))

        @lib.jit
        def run(w):
            z[...] = z[...] * w
            q = lib.new_ref(z[...])
            q[0] = q[1] * 1j
            return lib.freeze(q), lib.grad(lambda a: np_.abs(lib.freeze(lib.new_ref(a * w))).sum())(z[0].real)
        return run, [z]
    both(build, np.complex64(0.5 - 0.5j))


def test_custom_vjp_stashes_gradients_into_a_ref():
    """The guide's stash_grads: a custom_vjp whose bwd writes the cotangent into a Ref it takes (the Ref stays one
    through the transformation, so the write happens in the backward pass), eagerly and under jit."""
    def build(lib, np_, lax):
        @lib.custom_vjp
        def stash_grads(grads_ref, x):
            return x

        def fwd(grads_ref, x):
            return x, grads_ref

        def bwd(grads_ref, g):
            grads_ref[...] = g
            return None, g
        stash_grads.defvjp(fwd, bwd)
        point, layer = lib.new_ref(np_.float32(0.0)), lib.new_ref(np_.zeros(3, np_.float32))

        def f(x, grads_ref):
            return np_.sin(stash_grads(grads_ref, x))

        def g(x, r):
            return (stash_grads(r, np_.sin(x) * 3) ** 2).sum()

        def run(x, xs):
            first = lib.grad(f)(x, point)
            return first, point[...], lib.jit(lib.grad(f))(x * 2, point), lib.grad(g)(xs, layer), f(x, point)
        return run, [point, layer]
    both(build, np.float32(1.0), np.arange(3.0, dtype=np.float32))


def test_counting_into_a_ref_beside_differentiated_carries():
    """A loop or branch writing a value that does not depend on the differentiated inputs (a step counter) beside
    carries that do: allowed in reverse and forward mode (the check is per carry, not per loop), as in JAX."""
    def build(lib, np_, lax):
        steps = lib.new_ref(np_.int32(0))
        seen = lib.new_ref(np_.float32(0.0))

        def f(x):
            def body(c, _):
                steps[...] += 1
                seen[...] = lax.stop_gradient(c)
                return c * 1.5 + np_.sin(c), None
            y, _ = lax.scan(body, x, None, length=4)
            return lax.cond(y > 0, lambda: (steps.__setitem__(Ellipsis, steps[...] * 2), y * y)[1], lambda: y)

        def run(x):
            return lib.grad(f)(x), lib.jit(lib.grad(f))(x), lib.jvp(f, (x,), (np_.float32(1.0),))
        return run, [steps, seen]
    both(build, np.float32(0.7), rtol=1e-5)
    counter = ember.new_ref(0)

    def w(x):
        def body(c):
            counter[...] += 1
            return c[0] * 1.5, c[1] + 1
        return elax.while_loop(lambda c: c[1] < 3, body, (x, 0))[0]
    assert float(ember.grad(w)(2.0)) == 1.5 ** 3 and float(ember.jvp(w, (2.0,), (1.0,))[1]) == 1.5 ** 3
    np.testing.assert_allclose(np.asarray(ember.vmap(ember.grad(w))(enp.ones(2))), [1.5 ** 3] * 2)
    assert int(counter[...]) == 9  # (three runs of the loop: vmap's runs it once for the batch)


def test_calls_update_refs_in_place_unless_their_values_are_held():
    """A jitted call donates the buffers of the values it replaces (XLA writes the final values into them), as
    JAX's Refs are updated in place; a value read out of the Ref and kept, or viewed by numpy, stays as it was."""
    r = ember.new_ref(enp.zeros((4, 3)))
    step = ember.jit(lambda r, i, v: r.__setitem__(i, r[i] * 0.5 + v))
    step(r, 1, enp.ones(3))
    step(r, 2, enp.ones(3))
    kept = r[...]
    view = np.asarray(r[...])
    step(r, 0, enp.ones(3))
    expected = np.zeros((4, 3), np.float32)
    expected[1:3] = 1
    np.testing.assert_array_equal(np.asarray(kept), expected)
    np.testing.assert_array_equal(view, expected)
    expected[0] = 1
    np.testing.assert_array_equal(np.asarray(r[...]), expected)
    (run, _), = step._programs.values()
    assert run.__self__._donating is not None  # (the calls with nothing else holding the value donated it)


def test_which_ref_values_a_call_donates_is_a_property_of_the_program():
    """A call donates the value a Ref holds when the Ref alone holds it: a program's final value written back, not
    yet read out. The array given to new_ref or written by the user, and a value read out of the Ref, are the
    user's too: a call then runs without donating them (decided by what happened to the Ref, not by counting
    Python references)."""
    given = enp.arange(3.0)
    r = ember.new_ref(given)
    step = ember.jit(lambda r: r.__setitem__(..., r[...] + 1.0))
    assert not r.owns_value
    step(r)  # (the user's array: copied, kept)
    assert r.owns_value and not given.is_deleted() and np.asarray(given).tolist() == [0, 1, 2]
    held = r.peek()
    step(r)  # (the program's own value: donated)
    assert held.is_deleted() and np.asarray(r[...]).tolist() == [2, 3, 4]
    read = r[...]
    assert not r.owns_value
    step(r)
    assert not read.is_deleted() and np.asarray(read).tolist() == [2, 3, 4]
    r[...] = given
    assert not r.owns_value
    step(r)
    assert np.asarray(given).tolist() == [0, 1, 2] and np.asarray(r[...]).tolist() == [1, 2, 3]
