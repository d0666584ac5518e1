"""Mesh and spec arithmetic lives once, in ember._core.sharding (the axes a spec names, their product, the blocks of
a shape, whether a dimension divides): NamedSharding, shard_map and the collectives read it there, so they agree,
and a split that does not divide is the core's IndivisibleError (a ValueError, as JAX's) wherever it is refused."""
import itertools

import numpy as np
import pytest

import ember
from ember import lax
from ember._control.shard_map import block_aval, full_aval
from ember._prims.collectives import all_to_all_p
from ember._core import ShapedArray
from ember._core import sharding as cs
from ember.sharding import Mesh, NamedSharding, P

pytestmark = pytest.mark.usefixtures("jax_in_embers_mode")


class FakeDevice:
    def __init__(self, id):
        self.id, self.platform, self.process_index = id, "cpu", 0


FAKE = [FakeDevice(i) for i in range(8)]


def fake_mesh(shape, names):
    return Mesh(np.array(FAKE[:int(np.prod(shape))], dtype=object).reshape(shape), names)


def test_the_facts_of_a_spec():
    mesh = fake_mesh((2, 1, 4), ("a", "b", "c"))
    spec = P(("c", "a"), None, "b", P.UNCONSTRAINED)
    assert cs.entry_axes(("c", "a")) == ("c", "a") and cs.entry_axes("b") == ("b",)
    assert cs.entry_axes(None) == cs.entry_axes(P.UNCONSTRAINED) == ()
    assert cs.spec_axes(spec) == ("c", "a", "b") and cs.spec_axes(P()) == ()
    assert cs.repeated_axes(["x", "y", "x", "z", "y", "x"]) == ["x", "y"] and cs.repeated_axes(["x"]) == []
    assert cs.unknown_axes(["q", "a", "q", "r"], mesh.axis_names) == ["q", "r"]
    assert cs.size_of_axes(mesh.shape, ("c", "a")) == 8 and cs.size_of_axes(mesh.shape, ()) == 1
    assert cs.spec_tiles(mesh, spec, 5) == (8, 1, 1, 1, 1)
    assert cs.divides(4, 8) and not cs.divides(3, 8) and not cs.divides(0, 8) and cs.divides(2, 0)
    assert cs.block_shape((16, 3), (8, 1), None) == (2, 3) and cs.full_shape((2, 3), (8, 1)) == (16, 3)
    with pytest.raises(cs.IndivisibleError, match=r"dim 1: 3 in 2") as err:
        cs.block_shape((4, 3), (2, 2), lambda d, n, k: f"dim {d}: {n} in {k}")
    assert isinstance(err.value, ValueError)
    with pytest.raises(ValueError, match="Using \\*pspec is dangerous"):  # (iterating the spec, as JAX refuses)
        cs.spec_axes(P("a", unreduced={"c"}))
    assert cs.spec_axes(P("a", unreduced={"c"}).partitions) == ("a",)


MESHES = {(2, 2): ("x", "y"), (4,): ("x",), (2, 1, 2): ("a", "b", "c")}


def specs(names, ndim):
    """Every spec of rank <= ndim naming each axis at most once, in every order within a dimension."""
    for slots in itertools.product(range(ndim + 1), repeat=len(names)):
        groups = [[n for n, s in zip(names, slots) if s == d] for d in range(ndim)]
        for orders in itertools.product(*(itertools.permutations(g) for g in groups)):
            yield P(*[None if not o else o[0] if len(o) == 1 else tuple(o) for o in orders])


def test_shard_map_blocks_are_the_shardings_shards():
    """shard_map's block of an argument, and the whole array its blocks make, are those NamedSharding says (the
    same shapes, the same refusals) for every spec and shape of a sweep."""
    checked = refused = 0
    for mesh_shape, names in MESHES.items():
        mesh = fake_mesh(mesh_shape, names)
        for shape in [(8,), (4, 6), (2, 3), (6, 4, 2)]:
            for spec in specs(names, len(shape)):
                aval = ShapedArray(shape, np.float32)
                try:
                    want = NamedSharding(mesh, spec).shard_shape(shape)
                except cs.IndivisibleError:
                    with pytest.raises(cs.IndivisibleError, match=r"shard_map\(f\): argument 0 of shape"):
                        block_aval("shard_map(f)", mesh, spec, aval, "argument 0")
                    refused += 1
                    continue
                block = block_aval("shard_map(f)", mesh, spec, aval, "argument 0")
                assert block.shape == want, (mesh_shape, spec, shape)
                assert full_aval(mesh, spec, block).shape == shape
                checked += 1
    assert checked > 100 and refused > 50


def test_shard_map_refuses_an_indivisible_split_with_the_cores_error():
    import jax
    mesh = Mesh(np.array(ember.devices()[:2]), ("x",))

    def f(u, v):
        return u

    for run in (lambda g, *xs: g(*xs), lambda g, *xs: ember.jit(g)(*xs)):
        with pytest.raises(cs.IndivisibleError) as ours:
            run(ember.shard_map(f, mesh=mesh, in_specs=(P(), P("x")), out_specs=P()), np.ones(4), np.ones((3, 2)))
        assert str(ours.value) == ("shard_map(f): argument 1 of shape (3, 2) cannot be split by P('x',): dimension 0 "
                                   "(3) is not divisible by 2, the size of the mesh axes its spec names")
    # (JAX refuses it with a ValueError too, naming the function, the argument's shape and its spec)
    jmesh = jax.sharding.Mesh(np.array(jax.devices()[:2]), ("x",))
    with pytest.raises(ValueError) as theirs:
        jax.shard_map(f, mesh=jmesh, in_specs=(jax.P(), jax.P("x")), out_specs=jax.P())(np.ones(4), np.ones((3, 2)))
    assert "'f'" in str(theirs.value) and "P('x',)" in str(theirs.value) and isinstance(ours.value, ValueError)


def test_collectives_refuse_an_indivisible_split_with_the_cores_error():
    x = np.ones((2, 3), np.float32)  # (each of the 2 members holds 3 elements: they do not split in 2)
    with pytest.raises(cs.IndivisibleError, match=r"psum_scatter: with tiled=True, dimension 0 of the operand f32"):
        ember.vmap(lambda v: lax.psum_scatter(v, "i", tiled=True), axis_name="i")(x)
    with pytest.raises(cs.IndivisibleError, match=r"all_to_all: dimension split_axis=0 of the operand f32\[3\]"):
        ember.vmap(lambda v: all_to_all_p.bind(v, axes=("i",), split_axis=0, concat_axis=0, axis_size=2),
                   axis_name="i")(x)
    with pytest.raises(ValueError, match=r"all_to_all: the size of split_axis \(3\)"):  # (the public function's)
        ember.vmap(lambda v: lax.all_to_all(v, "i", 0, 0, tiled=True), axis_name="i")(x)
