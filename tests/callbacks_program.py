"""A program of debug prints and callbacks under jit, grad, vmap and loops, run by tests/test_callbacks.py in a
subprocess with ember and with JAX: the two outputs must be equal."""
import sys

import numpy as np

which = sys.argv[1]
if which == "jax":
    import jax as E
    import jax.numpy as np_
    from jax import lax
    from jax.experimental import io_callback
    E.config.update("jax_platforms", "cpu")
else:
    import ember as E
    import ember.numpy as np_
    from ember import lax
    from ember.experimental import io_callback
dbg = E.debug


def f1(x):
    for i in range(20):
        dbg.print("step {i} {v}", i=i, v=x[i % 3])
    return x * 2
E.jit(f1)(np_.arange(3.0))

def f2(x):
    dbg.print("x={}", x)
    return np_.sum(np_.sin(x) * x)
print(E.grad(f2)(np_.arange(3.0)))
print(E.jit(E.grad(f2))(np_.arange(3.0)))
E.vmap(f2)(np_.arange(6.0).reshape(3, 2))
def f3(x):
    def body(c, xi):
        dbg.print("body c={} xi={}", c, xi)
        return c + xi, c
    return lax.scan(body, 0.0, x)
E.jit(f3)(np_.arange(4.0))
def f4(x):
    def body(i, c):
        dbg.print("fori {} {}", i, c)
        return c * 2
    c = lax.fori_loop(0, 3, body, x)
    dbg.print("after {}", c)
    return lax.cond(c > 5, lambda: dbg.print("big {}", c) or c, lambda: dbg.print("small {}", c) or c)
E.jit(f4)(1.0)
E.jit(f4)(0.5)
dbg.print("eager {} {}", np_.arange(2), 3)
def f5(x):  # (JAX orders debug prints and io_callbacks in two separate chains: not mixed here)
    dbg.print("ordered 1 {}", x, ordered=True)
    dbg.print("ordered 2 {}", x * 2, ordered=True)
    return x
E.jit(f5)(np_.arange(2))
def f5io(x):
    io_callback(lambda v: print("io 1", v), None, x, ordered=True)
    io_callback(lambda v: print("io 2", v), None, x + 1, ordered=True)
    return x
E.jit(f5io)(np_.arange(2))
def f5loops(x):  # ordered prints before, inside and after loops and a branch whose results are unused
    dbg.print("start", ordered=True)
    lax.while_loop(lambda c: c[0] < 2, lambda c: (dbg.print("w {}", c[0], ordered=True), (c[0] + 1, c[1] * 2))[1],
                   (0, x))
    lax.scan(lambda c, xi: (dbg.print("s {}", xi, ordered=True), (c, xi))[1], 0.0, np_.arange(2.0))
    lax.cond(x > 0, lambda: dbg.print("pos", ordered=True), lambda: None)
    dbg.print("end", ordered=True)
    return x
E.jit(f5loops)(1.5)
def f6(x):
    return E.pure_callback(lambda v: np.cumsum(v), E.ShapeDtypeStruct((3,), np.float32), x, vmap_method="sequential")
print(E.vmap(f6)(np_.arange(6.0).reshape(2, 3)))
print(E.vmap(f6, in_axes=1)(np_.arange(6.0).reshape(3, 2)))
def f7(x, y):
    return E.pure_callback(lambda a, b: a + b, E.ShapeDtypeStruct((3,), np.float32), x, y, vmap_method="expand_dims")
print(E.vmap(f7, in_axes=(0, None))(np_.ones((2, 3)), np_.arange(3.0)))
def f8(x):
    dbg.callback(lambda v: print("cb", v.shape, v.dtype), x)
    return x
E.jit(E.vmap(f8))(np_.ones((2, 2)))
