"""bench/roofline.py's model of bench/run.py's rows: every row has a model or a reason it has none, and the models
are computed from the rows' shapes. Nothing here is timed and no benchmark runs: bench/run.py's rows are read from
its source (importing it would start ember)."""
from __future__ import annotations

import ast
import importlib
import math
import re
import shutil
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[1] / "bench"
sys.path.insert(0, str(BENCH))
roofline = importlib.import_module("roofline")
peaks = importlib.import_module("peaks")
MiB = 1 << 20


def row_names(list_name: str) -> list[str]:
    """The names (first elements) of the row tuples of a list assigned to list_name in bench/run.py."""
    tree = ast.parse((BENCH / "run.py").read_text())
    for node in ast.walk(tree):
        targets = [node.target] if isinstance(node, ast.AnnAssign) else getattr(node, "targets", [])
        if isinstance(node, (ast.Assign, ast.AnnAssign)) and any(
                isinstance(t, ast.Name) and t.id == list_name for t in targets):
            assert isinstance(node.value, ast.List), list_name
            names = []
            for row in node.value.elts:
                assert isinstance(row, ast.Tuple) and isinstance(row.elts[0], ast.Constant), ast.dump(row)
                names.append(row.elts[0].value)
            return names
    raise AssertionError(f"no {list_name} in bench/run.py")


ROWS = row_names("BENCHMARKS")
COMPILE_ROWS = row_names("COMPILE_BENCHMARKS")


def test_every_row_is_modelled_or_says_why_not():
    assert len(ROWS) > 60 and len(set(ROWS)) == len(ROWS)
    rows = set(ROWS) | set(COMPILE_ROWS)
    assert not set(roofline.MODELS) & set(roofline.NOT_MODELLED)
    assert set(roofline.MODELS) - rows == set(), "models of rows bench/run.py does not have"
    assert set(roofline.NOT_MODELLED) - rows == set(), "reasons for rows bench/run.py does not have"
    assert rows - set(roofline.MODELS) - set(roofline.NOT_MODELLED) == set(), "rows with neither a model nor a reason"
    for name, reason in roofline.NOT_MODELLED.items():
        assert reason.startswith(("overhead-bound", "compile time")), (name, reason)
    assert set(COMPILE_ROWS) <= set(roofline.NOT_MODELLED)


def test_models_are_positive_work():
    for name, work in roofline.MODELS.items():
        assert work.bytes > 0 and work.flops >= 0, name
        assert isinstance(work.bytes, (int, float)) and isinstance(work.flops, (int, float)), name


def shapes_named(name: str) -> list[tuple[int, ...]]:
    """The float32 shapes a row's name gives: f32[1024,1024], f32[1e7]."""
    return [tuple(int(float(d)) for d in dims.split(",")) for dims in re.findall(r"f32\[([0-9e,]+)\]", name)]


def test_models_move_at_least_the_arrays_their_names_give():
    checked = 0
    for name, work in roofline.MODELS.items():
        for shape in shapes_named(name):
            assert work.bytes >= 4 * math.prod(shape), (name, shape, work.bytes)
            checked += 1
    assert checked > 25


def test_models_follow_the_rows_shapes():
    m = roofline.MODELS
    assert m["jit: softmax f32[1024,1024]"].bytes >= 8 * MiB  # read once, written once
    assert m["jit: softmax f32[1024,1024]"].bytes == 2 * m["jit: max f32[1024,1024]"].bytes - 8
    assert m["jit: layer norm f32[4096,1024]"].bytes == 32 * MiB
    assert m["jit: sum of f32[1e7]"].bytes == 4 * 10 ** 7 + 4
    assert m["jit: 512x512 f32 matmul"] == (3 * 512 * 512 * 4, 2 * 512 ** 3)
    assert m["jit: MLP train step, batch 1024"].flops == pytest.approx(8 * m["jit: MLP train step, batch 128"].flops,
                                                                        rel=0.01)
    assert m["fft: fft c64[2**20]"] == (16 * MiB, 5 * 20 * 2 ** 20)
    # forward: 2 products of 2*64*128*128*64; the backward recomputes the scores and adds 4 products
    fwd, bwd = m["jit: attention forward b8 h8 t128 d64"], m["jit(grad): attention backward b8 h8 t128 d64"]
    one = 2 * 64 * 128 * 128 * 64
    assert 2 * one < fwd.flops < 2.1 * one and 5 * one < bwd.flops < 5.2 * one
    assert bwd.bytes == 7 * 2 * MiB and fwd.bytes == 4 * 2 * MiB


def test_bound_is_the_larger_time():
    work = roofline.Work(8 * MiB, 1e9)
    memory = roofline.bound(work, bandwidth=1e9, flops_per_second=1e12)
    assert memory.kind == "memory" and memory.seconds == 8 * MiB / 1e9
    compute = roofline.bound(work, bandwidth=1e12, flops_per_second=1e11)
    assert compute.kind == "compute" and compute.seconds == 1e-2
    assert roofline.bound(work, bandwidth=1e10, flops_per_second=None).kind == "memory"  # no FMA peak
    tiny = roofline.bound(roofline.Work(4096, 4096), bandwidth=1e10, flops_per_second=1e11)
    assert tiny.kind == "overhead" and tiny.seconds == 4096 / 1e10
    # the copy whose working set is nearest on a log scale, 2 MiB at least
    assert roofline.working_set(roofline.Work(1000, 0)) == 2 * MiB
    assert roofline.working_set(work) == 8 * MiB
    assert roofline.working_set(roofline.MODELS["jit: max f32[1024,1024]"]) == 4 * MiB  # 4 MiB + 4 bytes
    assert roofline.working_set(roofline.MODELS["jit: sum of f32[1e7]"]) == 32 * MiB  # 40 MB
    assert roofline.working_set(roofline.Work(2 ** 40, 0)) == 512 * MiB


@pytest.mark.skipif(shutil.which("gcc") is None, reason="the FMA microkernel needs gcc")
def test_fma_kernel_computes_its_chains():
    lib, note = peaks.compile_fma_kernel()
    assert lib is not None, note
    lanes, chains = lib.fma_lanes(), lib.fma_chains()
    assert lanes in (8, 16) and chains == 12
    # a = 1, b = 0 keeps each chain at its start value c (0..11), summed over the lanes
    assert lib.fma_loop(3, 1.0, 0.0) == lanes * sum(range(chains))
    # a = 1, b = 1 adds one per iteration to every lane of every chain
    assert lib.fma_loop(10, 1.0, 1.0) == lanes * (sum(range(chains)) + 10 * chains)


def example_peaks() -> peaks.Peaks:
    return peaks.Peaks(2, 22e9, 25e9, {size: 50e9 for size in peaks.WORKING_SETS}, 230e9, 450e9, "example")


def test_peaks_save_and_load(tmp_path):
    p = example_peaks()
    peaks.save(p, str(tmp_path / "peaks.json"))
    assert peaks.load(str(tmp_path / "peaks.json")) == p
    slower = p._replace(copy_one_core=1e9, copy_by_working_set={size: 1e9 for size in peaks.WORKING_SETS})
    assert peaks.best(slower, p) == p


def test_report_gives_each_measured_row_its_fraction():
    measured = [("jit: softmax f32[1024,1024]", 2 * 8 * MiB / 50e9, 4 * 8 * MiB / 50e9),
                ("jit: tiny f32[4] add (dispatch overhead)", 4e-6, 6e-6)]
    text = roofline.report(measured, example_peaks())
    softmax = next(line for line in text.splitlines() if line.startswith("jit: softmax"))
    # 8 MiB at the 8 MiB copy's 50 GB/s: 168 us; measured at twice and four times that
    assert softmax.split()[-7:] == ["8.39", "0.005", "memory", "50.0", "167.8us", "0.50", "0.25"], softmax
    assert "overhead-bound" in text.splitlines()[-1]
