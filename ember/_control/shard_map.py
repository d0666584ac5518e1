"""shard_map: a function written for one device's block of its inputs, run on every device of a mesh at once.

shard_map(f, mesh=, in_specs=, out_specs=)(*args) splits each argument over the mesh as its PartitionSpec says,
runs f on each device's block (collectives over the mesh's axis names see the other devices), and assembles the
results as out_specs say. One higher-order primitive carries f's staged body; its whole story is here:

- abstract eval: the global shapes (a block's dimension times the mesh axes its spec names);
- lowering (as XLA's SPMD partitioner expects): each input constrained to its sharding and cut to the block
  (custom calls @Sharding, @SPMDFullToShardShape with a {manual} sharding), the body lowered with an AxisContext
  (the collectives' device groups), each output put back (@SPMDShardToFullShape); a program holding a shard_map
  runs partitioned over the mesh's devices (ember._runtime.spmd);
- JVP: a shard_map of the body's JVP, tangents split as their primals;
- reverse mode: a shard_map of the body's VJP. With check_vma=True (the default, as JAX's) the body is typed by
  the axes each value varies over (ember._core.vma): an input split along an axis varies over it, one its spec
  leaves unsplit is the same on every device along it, and each result varies exactly over the axes its out_spec
  names (a result varying over another axis is JAX's error; one varying over fewer is cast). The types make the
  body's own VJP the gradient: a value every device used was cast to varying where it met a varying one, and that
  cast transposes to a psum. With check_vma=False there are no types, and the rule says the same from outside, as
  JAX's does then: a result replicated over mesh axes its spec does not name is one value held by each device, so
  its cotangent is divided among them, and an input replicated so gets the sum of its devices' cotangents (psum
  over those axes), psum transposing to psum;
- batching: the body batched, the batch dimension unsplit (None in the specs)."""
from __future__ import annotations

import functools
from typing import Any, Callable, Sequence

import numpy as np

from ember._control.common import cast_outputs, close_over
from ember._control.shard_eager import arguments_on_devices, evaluate_on_devices
from ember._core.primitive import TRACE_STATE
from ember._core import IR, Primitive, ShapedArray, Tracer, aval_of, eval_ir, stage_flat
from ember._core import dtypes as dt
from ember._core.axes import axis_frame, current_spmd_axes
from ember._core.dtypes import NO_VMA, note_axis_order, ordered_axes
from ember._core.pytree import keystr, tree_leaves_with_path
from ember._core.vma import typed_axes
from ember._core.pytree import prefix_entries, tree_flatten, tree_map, tree_structure
from ember._core.sharding import (Mesh, NamedSharding, PartitionSpec, block_shape, current_abstract_mesh,
                                  current_mesh, explicit_of, full_shape, repeated_axes, size_of_axes, spec_axes,
                                  spec_tiles, unknown_axes)
from ember._hlo import LoweringContext
from ember._hlo.emitter import quoted_text
from ember._hlo.lower import call_function
from ember._hlo.spmd import AxisContext, sharding_text
from ember._prims.collectives import psum
from ember._prims.elementwise import div
from ember._prims.shape import BatchDim, reshape, zeros
from ember._transforms.ad import vjp_ir
from ember._transforms.batching import batch_ir
from ember._transforms.jvp import jvp_ir
from ember._transforms.passes import simplify

Specs = tuple[PartitionSpec, ...]


def check_spec(api: str, mesh: Mesh, spec: Any, aval: ShapedArray, what: str) -> None:
    if not isinstance(spec, PartitionSpec):
        raise TypeError(f"{api}: {what}'s spec must be a PartitionSpec (or None), got {spec!r}")
    if len(spec) > aval.ndim:
        raise ValueError(f"{api}: {what} has the spec {spec} of {len(spec)} entries, more than its rank: "
                         f"{aval.str_short()}")
    names = spec_axes(spec)
    for name in unknown_axes(names, mesh.axis_names):
        raise ValueError(f"{api}: {what}'s spec {spec} names the axis {name!r}, which the mesh "
                         f"{dict(mesh.shape)} does not have")
    if repeated_axes(names):
        raise ValueError(f"{api}: {what}'s spec {spec} names a mesh axis more than once")


def block_aval(api: str, mesh: Mesh, spec: PartitionSpec, aval: ShapedArray, what: str) -> ShapedArray:
    """The aval of one device's block of an array of aval split by spec (an IndivisibleError where a dimension
    does not divide)."""
    check_spec(api, mesh, spec, aval, what)
    shape = block_shape(aval.shape, spec_tiles(mesh, spec, aval.ndim), lambda d, n, k: (
        f"{api}: {what} of shape {aval.shape} cannot be split by {spec}: dimension {d} ({n}) is not divisible by "
        f"{k}, the size of the mesh axes its spec names"))
    return aval.update(shape=shape, explicit=None)  # (a block's mesh axes are Manual in the body)


def full_aval(mesh: Mesh, spec: PartitionSpec, block: ShapedArray) -> ShapedArray:
    """The type of the whole array of blocks split by spec: typed by it over the mesh's Explicit axes (JAX's
    explicit sharding mode)."""
    return ShapedArray(full_shape(block.shape, spec_tiles(mesh, spec, block.ndim)), block.dtype, block.weak_type,
                       explicit=explicit_of(NamedSharding(mesh, spec), block.ndim))


def spec_vma(spec: PartitionSpec) -> frozenset:
    """The axes a block of an array split by spec varies over: those the spec names."""
    return frozenset(spec_axes(spec))


def body_aval(api: str, mesh: Mesh, spec: PartitionSpec, aval: ShapedArray, what: str, check_vma: bool
              ) -> ShapedArray:
    """The type a body takes a block of an input as: its block, varying over the axes its spec names (with
    check_vma)."""
    block = block_aval(api, mesh, spec, aval, what)
    return block.with_vma(spec_vma(spec)) if check_vma else block.with_vma(NO_VMA)


# shard_map(*args; body, mesh, in_specs, out_specs, check_vma): body run on each device's block (see above).
shard_map_p = Primitive("shard_map", multiple_results=True, own_vma=True)


@shard_map_p.def_rule("abstract_eval")
def _shard_map_abstract_eval(*avals: ShapedArray, body: IR, mesh: Mesh, in_specs: Specs, out_specs: Specs,
                             check_vma: bool, manual: tuple[str, ...]) -> list[ShapedArray]:
    for i, (aval, spec, inner) in enumerate(zip(avals, in_specs, body.in_avals)):
        block = body_aval("shard_map", mesh, spec, aval, f"input {i}", check_vma)
        if block.shape != inner.shape or block.dtype != inner.dtype or block.vma != inner.vma:
            raise TypeError(f"shard_map: input {i} {aval.str_short()} split by {spec} is a block "
                            f"{block.str_short()}, but the body takes {inner.str_short()}")
    for i, (spec, out) in enumerate(zip(out_specs, body.out_avals)):
        if check_vma and out.vma != spec_vma(spec):
            raise TypeError(f"shard_map: result {i} of the body is {out.str_short()}, but its out_spec {spec} "
                            f"asks for a value varying over {set(spec_vma(spec)) or '{}'}")
    return [full_aval(mesh, spec, a) for spec, a in zip(out_specs, body.out_avals)]


def _partition_ids(mesh: Mesh, devices: Sequence[Any] | None) -> np.ndarray:
    """At each mesh position, the partition id of its device in a program over devices (None: the mesh's own)."""
    if devices is None:
        return np.arange(mesh.size).reshape(mesh.devices.shape)
    position = {d: i for i, d in enumerate(devices)}
    return np.vectorize(lambda d: position[d], otypes=[np.int64])(mesh.devices)


@shard_map_p.def_rule("lowering")
def _shard_map_lowering(ctx: LoweringContext, *args: str, body: IR, mesh: Mesh, in_specs: Specs,
                        out_specs: Specs, check_vma: bool, manual: tuple[str, ...]) -> list[str]:
    devices = ctx.emitter.device_assignment  # (None: the mesh's own order, as sharding_text and _partition_ids take)

    def custom_call(target: str, x: str, aval: ShapedArray, sharding: str) -> str:
        return ctx.op("stablehlo.custom_call", [x], aval, {"call_target_name": f'"{target}"',
                                                           "mhlo.sharding": quoted_text(sharding)})
    blocks = []
    for x, aval, spec, inner in zip(args, ctx.avals_in, in_specs, body.in_avals):
        placed = custom_call("Sharding", x, aval, sharding_text(NamedSharding(mesh, spec), aval.ndim, devices))
        blocks.append(custom_call("SPMDFullToShardShape", placed, inner, "{manual}"))
    # (the body is a function of its own: XLA's partitioner keeps every value in it manual; over the mesh axes that
    # are not manual (partial-manual: axis_names), every device along them holds the same block and computes it)
    outs = call_function(ctx, body, blocks, "shmap_body", AxisContext(mesh.axis_names, _partition_ids(mesh, devices)))
    results = []
    for y, inner, spec, aval in zip(outs, body.out_avals, out_specs, ctx.avals_out):
        manual = custom_call("Sharding", y, inner, "{manual}")
        results.append(custom_call("SPMDShardToFullShape", manual, aval,
                                   sharding_text(NamedSharding(mesh, spec), aval.ndim, devices)))
    return results


def _in_mesh(mesh: Mesh, check_vma: bool, fn: Callable[[], Any], manual: tuple[str, ...] | None = None) -> Any:
    """fn() with the mesh's manual axis names (by default all) bound, typed as check_vma says (the body's
    collectives are bound again by transformations)."""
    manual = mesh.axis_names if manual is None else manual
    note_axis_order(mesh.axis_names)
    with axis_frame([(a, mesh.shape[a]) for a in manual]), typed_axes(manual if check_vma else ()):
        return fn()


def _body(mesh: Mesh, check_vma: bool, out_specs: Specs, make: Callable[[], IR],
          manual: tuple[str, ...] | None = None) -> IR:
    """A body made by make() (a transformation of a body) in the mesh's axes, its outputs typed as out_specs say
    (with check_vma: an output varying over fewer axes, a zero tangent or cotangent, or a result its spec splits
    along an axis it does not vary over, is cast, as JAX casts it)."""
    def build() -> IR:
        ir = make()
        return cast_outputs(ir, [spec_vma(s) for s in out_specs]) if check_vma else ir
    return _in_mesh(mesh, check_vma, build, manual)


@shard_map_p.def_rule("jvp")
def _shard_map_jvp(primals: Sequence[Any], tangents: Sequence[Any], *, body: IR, mesh: Mesh, in_specs: Specs,
                   out_specs: Specs, check_vma: bool, manual: tuple[str, ...]) -> tuple[list[Any], list[Any]]:
    with_tangent = [t is not None and dt.is_inexact(aval_of(p).dtype) for p, t in zip(primals, tangents)]
    jvp_body = _body(mesh, check_vma, out_specs + out_specs, lambda: jvp_ir(body, with_tangent), manual)
    given = [t for t, w in zip(tangents, with_tangent) if w]
    specs = in_specs + tuple(s for s, w in zip(in_specs, with_tangent) if w)
    outs = shard_map_p.bind(*primals, *given, body=jvp_body, mesh=mesh, in_specs=specs,
                            out_specs=out_specs + out_specs, check_vma=check_vma, manual=manual)
    n = len(body.outs)
    return outs[:n], outs[n:]


def _unnamed_axes(manual: tuple[str, ...], spec: PartitionSpec) -> tuple[str, ...]:
    """The manual mesh axes spec does not name (along the others every device computes the same block)."""
    named = set(spec_axes(spec))
    return tuple(a for a in manual if a not in named)


@shard_map_p.def_rule("vjp")
def _shard_map_vjp(cts: list[Any], ins: list[Any], outs: list[Any], needs: list[bool], *, body: IR, mesh: Mesh,
                   in_specs: Specs, out_specs: Specs, check_vma: bool, manual: tuple[str, ...]) -> list[Any]:
    wrt = [n and dt.is_inexact(aval_of(x).dtype) for x, n in zip(ins, needs)]
    if not any(wrt):
        return [None] * len(ins)
    specs_wrt = tuple(s for s, w in zip(in_specs, wrt) if w)
    backward = _body(mesh, check_vma, specs_wrt,
                     lambda: _backward_body(body, tuple(wrt), manual, specs_wrt, check_vma), manual)
    cts = [zeros(aval_of(y).strip_weak_type()) if ct is None else ct if check_vma else _scaled(ct, mesh, manual, spec)
           for ct, y, spec in zip(cts, outs, out_specs)]
    grads = iter(shard_map_p.bind(*ins, *cts, body=backward, mesh=mesh, in_specs=in_specs + out_specs,
                                  out_specs=specs_wrt, check_vma=check_vma, manual=manual))
    return [next(grads) if w else None for w in wrt]


def _backward_body(body: IR, wrt: tuple[bool, ...], manual: tuple[str, ...], specs_wrt: Specs, check_vma: bool
                   ) -> IR:
    """(the body's inputs..., its outputs' cotangents...) -> the cotangents of the inputs in wrt: the body's VJP,
    whose types sum what they must (check_vma), or (without) each summed over the mesh axes its spec does not
    name."""
    n_out = len(body.outs)
    grads = vjp_ir(body, list(wrt), n_out)
    if check_vma:
        return grads if n_out == 0 else _drop_outputs(grads, n_out)
    summed = [_unnamed_axes(manual, s) for s in specs_wrt]

    def fn(*args: Any) -> list[Any]:
        cts_in = eval_ir(grads, list(args))[n_out:]
        return [psum(c, axes) if axes else c for c, axes in zip(cts_in, summed)]
    return simplify(stage_flat(fn, grads.in_avals))


def _drop_outputs(ir: IR, n: int) -> IR:
    """ir without its first n outputs."""
    return simplify(IR(ir.const_vars, ir.consts, ir.in_vars, ir.eqns, ir.outs[n:]))


def _scaled(ct: Any, mesh: Mesh, manual: tuple[str, ...], spec: PartitionSpec) -> Any:
    """A result's cotangent shared among the devices that hold copies of it (the manual mesh axes its spec does not
    name)."""
    copies = size_of_axes(mesh.shape, _unnamed_axes(manual, spec))
    return ct if copies == 1 else div(ct, np.asarray(copies, aval_of(ct).dtype))


@shard_map_p.def_rule("batching")
def _shard_map_batching(args: list[Any], dims: list[BatchDim], *, body: IR, mesh: Mesh, in_specs: Specs,
                        out_specs: Specs, check_vma: bool, manual: tuple[str, ...]
                        ) -> tuple[list[Any], list[BatchDim]]:
    if current_spmd_axes() is not None:
        raise NotImplementedError(f"vmap with spmd_axis_name={current_spmd_axes()} of a shard_map: ember does not "
                                  "split a shard_map's batch over mesh axes; vmap it without spmd_axis_name")
    size = next(aval_of(x).shape[d] for x, d in zip(args, dims) if d is not None)
    batched, out_dims = _in_mesh(mesh, check_vma, lambda: batch_ir(body, dims, size), manual)
    ins = tuple(spec if d is None else _insert(spec, d, aval_of(x).ndim - 1)
                for x, d, spec in zip(args, dims, in_specs))
    outs_specs = tuple(spec if d is None else _insert(spec, d, a.ndim) for spec, d, a in
                       zip(out_specs, out_dims, body.out_avals))
    if check_vma:
        batched = _body(mesh, check_vma, outs_specs, lambda: batched, manual)
    outs = shard_map_p.bind(*args, body=batched, mesh=mesh, in_specs=ins, out_specs=outs_specs, check_vma=check_vma,
                            manual=manual)
    return outs, out_dims


def _insert(spec: PartitionSpec, d: int, ndim: int) -> PartitionSpec:
    """spec of an array of rank ndim with an unsplit dimension inserted at d."""
    entries = tuple(spec) + (None,) * (ndim - len(spec))
    return PartitionSpec(*entries[:d], None, *entries[d:])


def shard_map(f: Callable[..., Any] | None = None, /, *, out_specs: Any, in_specs: Any = None, mesh: Mesh | None = None,
              axis_names: Any = frozenset(), check_vma: bool = True, check_rep: bool | None = None) -> Any:
    """Map f over blocks of its inputs, one per device of the mesh (as jax.shard_map): in_specs (a PartitionSpec,
    or a tree prefix of the positional arguments holding them; None: taken from the arguments' NamedShardings)
    says how each argument is split, out_specs how the results are assembled; inside f, collectives over the
    mesh's axis names (ember.lax.psum, all_gather, ppermute, axis_index, ...) combine the devices' values.
    mesh: by default the current one (`with mesh:` / ember.sharding.set_mesh). check_vma (check_rep, its older
    name; True by default, as JAX's) types every value in f by the mesh axes it varies over (`ember.typeof(x).vma`,
    printed f32[2]{V:i}): a result varying over an axis its out_spec leaves out is an error, and gradients inside
    and outside f sum the contributions of the devices that share a value (docs/sharding.md). With
    check_vma=False there are no such types: an out_spec that leaves out a mesh axis states that the result is the
    same on every device along it, and the first device's value along it is taken.
    axis_names (JAX's partial-manual shard_map): the mesh axes f is manual over (by default all); the specs name
    only those, and collectives and axis_index in f only those. ember runs f manual over every axis, each device
    along the other axes holding the same block and computing it (JAX lets XLA partition that work instead): the
    values are JAX's, the work and memory along those axes are not shared out.
    Usable as a decorator: @partial(shard_map, mesh=..., in_specs=..., out_specs=...)."""
    if f is None:
        return lambda fun: shard_map(fun, out_specs=out_specs, in_specs=in_specs, mesh=mesh, axis_names=axis_names,
                                     check_vma=check_vma, check_rep=check_rep)
    if not callable(f):
        raise TypeError(f"shard_map: expected a function, got {type(f).__name__}")
    if check_rep is not None:
        check_vma = bool(check_rep)
    name = getattr(f, "__name__", type(f).__name__)

    def mapped(*args: Any) -> Any:
        the_mesh = mesh if mesh is not None else current_mesh()
        if the_mesh is None:
            raise ValueError(f"shard_map({name}): no mesh: pass mesh=, or call inside `with mesh:` / "
                             "ember.sharding.set_mesh(mesh)")
        context = current_abstract_mesh()
        if mesh is not None and context.axis_names and context.shape_tuple != mesh.abstract_mesh.shape_tuple:
            raise ValueError(f"The context mesh {context} should match the mesh passed to shard_map {mesh}")
        manual = _manual_axes(name, the_mesh, axis_names)
        leaves, in_tree = tree_flatten(args)
        specs = _in_specs(name, in_specs, args, leaves)
        _check_manual_specs("in_specs", the_mesh, manual, specs)
        avals = [aval_of(x) for x in leaves]
        api = f"shard_map({name})"
        for spec, aval in zip(specs, avals):  # (JAX's explicit sharding mode: the specs are the inputs' types)
            if aval.explicit is not None and aval.explicit.mesh == the_mesh and \
                    explicit_of(NamedSharding(the_mesh, spec), aval.ndim) != aval.explicit:
                raise ValueError(
                    f"in_specs passed to shard_map: {spec} does not match the specs of the input: "
                    f"{aval.explicit.spec} for arg: {aval}. `in_specs` is an optional argument so you "
                    "can omit specifying it and shard_map will infer the in_specs from the arguments. If you want to "
                    "reshard your inputs, you can use `ember.reshard` on the arguments and then pass those args to "
                    "shard_map.")
        blocks = [body_aval(api, the_mesh, s, a, f"argument {i}", check_vma)
                  for i, (s, a) in enumerate(zip(specs, avals))]
        values = evaluate = None
        if not TRACE_STATE.stack and set(manual) == set(the_mesh.axis_names):
            # (outside jit, as JAX's: the body sees each device's values, printed per device; see shard_eager)
            values = arguments_on_devices(the_mesh, _run_on_devices, specs, leaves)
            evaluate = evaluate_on_devices(the_mesh, _run_on_devices)
        closed = _in_mesh(the_mesh, check_vma, lambda: close_over(f, in_tree, blocks, api, values, evaluate),
                          manual)
        consts = closed.consts
        out_leaf_specs = _prefix_specs(api, "out_specs", out_specs,
                                       closed.out_tree.unflatten(range(closed.out_tree.num_leaves)))
        for i, (spec, aval) in enumerate(zip(out_leaf_specs, closed.ir.out_avals)):
            check_spec(api, the_mesh, spec, aval, f"result {i}")
        _check_manual_specs("out_specs", the_mesh, manual, out_leaf_specs)
        body = closed.ir
        if check_vma:
            _check_out_vma(name, the_mesh, out_specs, out_leaf_specs, closed)
            body = _body(the_mesh, check_vma, tuple(out_leaf_specs), lambda: closed.ir, manual)
        _check_consts_invariant(consts)
        const_specs = (PartitionSpec(),) * len(consts)  # replicated: the same on every device
        outs = shard_map_p.bind(*consts, *leaves, body=body, mesh=the_mesh, in_specs=const_specs + tuple(specs),
                                out_specs=tuple(out_leaf_specs), check_vma=bool(check_vma), manual=manual)
        return closed.out_tree.unflatten(outs)
    return functools.wraps(f)(mapped) if hasattr(f, "__name__") else mapped  # (named as f, as JAX's)


def _run_on_devices(mesh: Mesh, prim: Primitive | None, params: dict[str, Any], inputs: list[Any],
                    stacked: list[bool]) -> list[Any]:
    """One equation of an eager body on every device (ember._control.shard_eager): a shard_map of it over the mesh
    without vma types (the body's casts are among its equations), its stacked inputs (devices, *block) split over
    every mesh axis, the others replicated; or, for an argument (prim None), the argument split as its spec says.
    Each result comes out stacked."""
    axes = tuple(mesh.axis_names)
    every = PartitionSpec(axes)
    if prim is None:  # (an argument: each device's block, stacked)
        specs = (params["spec"],)
        body_avals = [block_aval("shard_map", mesh, params["spec"], aval_of(inputs[0]), "argument")]
    else:
        specs = tuple(every if s else PartitionSpec() for s in stacked)
        body_avals = [ShapedArray((1, *a.shape[1:]), a.dtype, a.weak_type) if s else a
                      for a, s in zip(map(aval_of, inputs), stacked)]

    def one(*blocks: Any) -> list[Any]:
        xs = [reshape(b, b.shape[1:]) if s else b for b, s in zip(blocks, stacked)]
        outs = xs if prim is None else prim.bind(*xs, **params)
        return [reshape(o, (1, *o.shape)) for o in (outs if prim is None or prim.multiple_results else [outs])]
    label = "shard_map argument" if prim is None else f"shard_map {prim.name}"
    body = _in_mesh(mesh, False, lambda: stage_flat(one, body_avals, label=label))
    return shard_map_p.bind(*inputs, body=body, mesh=mesh, in_specs=specs, out_specs=(every,) * len(body.outs),
                            check_vma=False, manual=axes)


def _manual_axes(name: str, mesh: Mesh, axis_names: Any) -> tuple[str, ...]:
    """The mesh axes the body is manual over, in mesh order: axis_names (JAX's partial-manual shard_map), or all."""
    if not axis_names:
        return tuple(mesh.axis_names)
    given = set(axis_names)
    unknown = given - set(mesh.axis_names)
    if unknown:
        raise ValueError(f"shard_map({name}): axis_names {sorted(map(str, unknown))} are not axes of the mesh "
                         f"{dict(mesh.shape)}")
    return tuple(a for a in mesh.axis_names if a in given)


def _check_manual_specs(what: str, mesh: Mesh, manual: tuple[str, ...], specs: Sequence[PartitionSpec]) -> None:
    """JAX's error for an in_spec or out_spec naming a mesh axis the body is not manual over (axis_names); an axis
    the mesh does not have is check_spec's error."""
    for spec in specs:
        for axis in sorted((set(spec_axes(spec)) & set(mesh.axis_names)) - set(manual), key=str):
            raise ValueError(f"shard_map {what} argument must refer to an axis marked as manual "
                             f"({frozenset(manual)}), but:\n\n  {what} refers to {axis!r}\n\nCheck the {what} "
                             "values passed to shard_map.")


def _check_consts_invariant(consts: Sequence[Any]) -> None:
    """The values the body closed over are passed replicated: a value of an enclosing staging is the same on every
    device (outside a shard_map body nothing varies); one varying in an enclosing shard_map body must be passed."""
    for c in consts:
        if aval_of(c).vma:
            raise NotImplementedError(f"shard_map: the body closes over a value varying over {set(aval_of(c).vma)} "
                                      "of an enclosing shard_map body; pass it as an argument")


def _check_out_vma(name: str, mesh: Mesh, out_specs: Any, leaf_specs: Sequence[PartitionSpec], closed: Any) -> None:
    """JAX's error for results that vary over a mesh axis their out_spec leaves out (check_vma=True): the spec says
    every device along that axis holds the same value, which the types cannot show."""
    paths = _spec_paths(out_specs, closed.out_tree.unflatten(range(closed.out_tree.num_leaves)))
    msgs = []
    for path, spec, aval in zip(paths, leaf_specs, closed.ir.out_avals):
        named = spec_axes(spec)
        unmentioned = [a for a in mesh.axis_names if a not in named]
        if not any(a in aval.vma for a in unmentioned):
            continue
        if len(unmentioned) > 1:
            need = ",".join(map(str, ordered_axes(spec_vma(spec))))
            got = ",".join(map(str, ordered_axes(aval.vma)))
            diff = ",".join(str(a) for a in unmentioned if a in aval.vma)
            msgs.append(f"* out_specs{path} is {spec} which implies that the corresponding output value is only "
                        f"varying across mesh axes {{{need}}} and not {{{diff}}}, but it was inferred to be possibly "
                        f"varying over {{{got}}}")
        else:
            msgs.append(f"* out_specs{path} is {spec} which implies that the corresponding output value is "
                        f"replicated across mesh axis '{unmentioned[0]}', but could not infer replication over any "
                        "axes")
    if not msgs:
        return
    if len(msgs) == 1:
        msgs = [msgs[0][2:]]
    raise ValueError(
        f"shard_map applied to the function '{name}' was given out_specs which require replication which can't be "
        f"statically inferred given the mesh:\n\nThe mesh given has shape {tuple(mesh.shape.values())} with "
        f"corresponding axis names {tuple(mesh.axis_names)}.\n\n" + "\n\n".join(msgs) + "\n\nCheck if these output "
        "values are meant to be replicated over those mesh axes. If not, consider revising the corresponding "
        "out_specs entries. If so, consider disabling the check by passing the check_vma=False argument to "
        "`ember.shard_map` (its outputs then hold the first device's value along those axes, as JAX's).")


def _spec_paths(prefix: Any, tree: Any) -> list[str]:
    """For each leaf of tree, the key path (as text) of the entry of prefix (a tree prefix of specs) that applies
    to it."""
    entries = tree_leaves_with_path(prefix, is_leaf=_is_spec)
    subtrees = tree_structure(prefix, is_leaf=_is_spec).flatten_up_to(tree)
    return [keystr(path) for (path, _), sub in zip(entries, subtrees) for _ in range(tree_structure(sub).num_leaves)]


def _is_spec(x: Any) -> bool:
    return x is None or isinstance(x, PartitionSpec)


class SpecsAfterStaging:
    """out_specs that are known once f is staged (pmap's: from the out_axes its results' structure gives), as
    specs(results' structure template) -> specs: one staging of f, not a first one to find that structure."""
    __slots__ = ("specs",)

    def __init__(self, specs: Callable[[Any], Any]):
        self.specs = specs


def _prefix_specs(api: str, what: str, prefix: Any, tree: Any) -> list[PartitionSpec]:
    """One PartitionSpec per leaf of tree, from prefix (a spec, or a tree prefix of tree holding specs; None
    stands for P(): not split)."""
    if isinstance(prefix, SpecsAfterStaging):
        prefix = prefix.specs(tree)
    try:
        entries = prefix_entries(prefix, tree, _is_spec)
    except ValueError as err:
        raise ValueError(f"{api}: {what} must be a PartitionSpec or a tree prefix of the "
                         f"{'arguments' if what == 'in_specs' else 'results'} holding them, got {prefix!r} for "
                         f"{tree_structure(tree)}: {err}") from None
    return [PartitionSpec() if e is None else e for e in entries]


def _in_specs(name: str, in_specs: Any, args: tuple[Any, ...], leaves: list[Any]) -> list[PartitionSpec]:
    if in_specs is not None:
        if isinstance(in_specs, list):
            in_specs = tuple(in_specs)
        return _prefix_specs(f"shard_map({name})", "in_specs", in_specs, args)
    specs = []
    for i, x in enumerate(leaves):  # inferred from the arguments' shardings (traced: their types', as JAX's)
        explicit = aval_of(x).explicit
        sharding = explicit if isinstance(x, Tracer) else getattr(x, "sharding", None)
        if isinstance(sharding, NamedSharding):
            specs.append(sharding.spec)
        elif sharding is not None and sharding.is_fully_replicated:
            specs.append(PartitionSpec())
        else:
            raise ValueError(f"shard_map({name}): in_specs were not given and argument {i} ({aval_of(x).str_short()}) "
                             "has no NamedSharding to take them from; pass in_specs")
    return specs


__all__ = ["shard_map"]


def _axis_spec(axis_name: Any, axis: int | None) -> PartitionSpec:
    """The PartitionSpec splitting dimension `axis` over axis_name (None: not split), as smap's axes mean."""
    return PartitionSpec() if axis is None else PartitionSpec(*([None] * axis), axis_name)


def smap(f: Callable[..., Any] | None = None, /, *, in_axes: Any = None, out_axes: Any, axis_name: Any) -> Any:
    """Single-axis shard_map (as jax.smap): f is manual over one axis of the current mesh (ember.sharding.set_mesh),
    axis_name; in_axes (an int, None, or a tuple with one per positional argument) says which dimension of each
    argument is split over it (None: not split), out_axes (an int, None or a pytree of them) which dimension of
    each result its blocks are joined along. in_axes left out takes the splits from the arguments' NamedShardings
    (JAX's Infer, meant for its explicit sharding mode). Usable as a decorator: @smap(in_axes=0, out_axes=0,
    axis_name="x")."""
    if f is None:
        return lambda g: smap(g, in_axes=in_axes, out_axes=out_axes, axis_name=axis_name)
    if isinstance(axis_name, (list, tuple)):
        raise TypeError(f"smap axis_name should be a `str` or a `Hashable`, but got {axis_name}")
    if in_axes is not None and not isinstance(in_axes, (int, tuple)):
        raise TypeError("smap in_axes must be an int, None, or a tuple of entries corresponding to the positional "
                        f"arguments passed to the function, but got {in_axes}.")
    is_none = lambda x: x is None  # noqa: E731
    if not all(isinstance(a, int) for a in tree_flatten(in_axes)[0]):
        raise TypeError(f"smap in_axes must be an int, None, or (nested) container with those types as leaves, but "
                        f"got {in_axes}.")
    if not all(isinstance(a, int) for a in tree_flatten(out_axes)[0]):
        raise TypeError(f"smap out_axes must be an int, None, or (nested) container with those types as leaves, but "
                        f"got {out_axes}.")
    spec = functools.partial(_axis_spec, axis_name)
    in_specs = None if in_axes is None else tree_map(spec, in_axes, is_leaf=is_none)
    out_specs = tree_map(spec, out_axes, is_leaf=is_none)

    @functools.wraps(f)
    def mapped(*args: Any) -> Any:
        if current_mesh() is None:
            raise ValueError("smap: the context mesh cannot be empty. Use `ember.sharding.set_mesh(mesh)` to enter "
                             "into a mesh context")
        return shard_map(f, in_specs=in_specs, out_specs=out_specs, axis_names={axis_name})(*args)
    return mapped
