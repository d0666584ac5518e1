"""This machine's peaks, the roofs of bench/run.py's roofline (bench/roofline.py, docs/performance.md "The
roofline"): memory copy bandwidth and float32 FMA throughput, on one core and on all of them.

    python3 bench/peaks.py [--save FILE]

(--save writes them as JSON, for `bench/run.py --roofline --peaks FILE`: peaks measured on a quiet machine, since
other work on the cores lowers every figure.)

- Copy bandwidth: `np.copyto` of a large float32 array (256 MiB) into another, counting the bytes read and the
  bytes written (2 x 256 MiB per copy, STREAM's convention: the write-allocate read of the destination is not
  counted); all cores: one thread per core, each copying its share (numpy releases the GIL for the copy). The
  destination is written once first, so no timed copy takes page faults. On all cores also at each working set
  (source + destination) of WORKING_SETS, 2 MiB to 512 MiB: those of the benchmarks' sizes (a few MiB) stay in this
  machine's caches and copy faster (a copy of a small array is repeated, to make each run about as long as the
  256 MiB one).
- FMA throughput: a C microkernel, compiled here with `gcc -O2 -march=native` and loaded with ctypes: 12
  independent chains `acc = acc * a + b` of float32 vectors (64 bytes with AVX-512, else 32), enough chains to
  cover the FMA units' latency; each FMA of a lane counts 2 flops. All cores: one thread per core (ctypes releases
  the GIL during the call). Without gcc (or if the compile fails) the FMA peak is None, with the reason.

Each figure is the best of several runs: a peak, not a typical speed. Bench-only: ember never imports this."""
from __future__ import annotations

import argparse
import ctypes
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from typing import Callable, NamedTuple

import numpy as np

MiB = 1 << 20
COPY_BYTES = 256 * MiB  # the "memory" copy: far past the per-core caches
WORKING_SETS = tuple(MiB << i for i in range(1, 10))  # copies of 1 MiB to 256 MiB: 2 MiB to 512 MiB moved

FMA_SOURCE = r"""
#ifdef __AVX512F__
#define VECTOR_BYTES 64
#else
#define VECTOR_BYTES 32
#endif
typedef float vec __attribute__((vector_size(VECTOR_BYTES)));
#define CHAINS 12

int fma_lanes(void) { return VECTOR_BYTES / 4; }
int fma_chains(void) { return CHAINS; }

/* 12 independent chains of acc = acc * a + b, `iterations` FMAs per chain; returns a sum of the chains so that
   the compiler keeps the work. GCC contracts `acc * a + b` into one FMA (-ffp-contract=fast, its default). */
float fma_loop(long iterations, float a, float b) {
    vec va, vb, c0, c1, c2, c3, c4, c5, c6, c7, c8, c9, c10, c11;
    for (int i = 0; i < VECTOR_BYTES / 4; i++) {
        va[i] = a; vb[i] = b;
        c0[i] = 0.f; c1[i] = 1.f; c2[i] = 2.f; c3[i] = 3.f; c4[i] = 4.f; c5[i] = 5.f;
        c6[i] = 6.f; c7[i] = 7.f; c8[i] = 8.f; c9[i] = 9.f; c10[i] = 10.f; c11[i] = 11.f;
    }
    for (long n = 0; n < iterations; n++) {
        c0 = c0 * va + vb; c1 = c1 * va + vb; c2 = c2 * va + vb; c3 = c3 * va + vb;
        c4 = c4 * va + vb; c5 = c5 * va + vb; c6 = c6 * va + vb; c7 = c7 * va + vb;
        c8 = c8 * va + vb; c9 = c9 * va + vb; c10 = c10 * va + vb; c11 = c11 * va + vb;
    }
    vec s = c0 + c1 + c2 + c3 + c4 + c5 + c6 + c7 + c8 + c9 + c10 + c11;
    float total = 0.f;
    for (int i = 0; i < VECTOR_BYTES / 4; i++) total += s[i];
    return total;
}
"""


class Peaks(NamedTuple):
    """Bytes per second of a copy (read + written) and float32 flops per second, on one core and on all; the
    copies on all cores by working set, as {bytes read + written: bytes per second}."""
    cores: int
    copy_one_core: float  # a copy of COPY_BYTES
    copy_all_cores: float  # the same on all cores (the largest working set)
    copy_by_working_set: dict[int, float]
    fma_one_core: float | None
    fma_all_cores: float | None
    fma_note: str  # how the FMA peak was measured, or why it was not


def cores() -> int:
    """The cores this process may run on."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def in_threads(work: Callable[[int], None], threads: int) -> float:
    """Wall seconds for `threads` threads each running work(index), started together."""
    start = threading.Barrier(threads + 1)
    done: list[BaseException] = []

    def run(i: int) -> None:
        start.wait()
        try:
            work(i)
        except BaseException as e:  # (re-raised in the caller's thread below)
            done.append(e)
    pool = [threading.Thread(target=run, args=(i,)) for i in range(threads)]
    for t in pool:
        t.start()
    start.wait()
    t0 = time.perf_counter()
    for t in pool:
        t.join()
    elapsed = time.perf_counter() - t0
    if done:
        raise done[0]
    return elapsed


def copy_bandwidth(nbytes: int, threads: int, repeat: int = 5) -> float:
    """Bytes per second (read + written) of the best of `repeat` runs, each copying a float32 array of nbytes split
    between `threads` threads, as many times as make about 256 MiB (so a small copy's run outlasts the threads'
    start)."""
    src = np.ones(nbytes // 4, np.float32)
    dst = np.zeros_like(src)  # (written: its pages are mapped before the timed copies)
    bounds = np.linspace(0, src.size, threads + 1).astype(int)
    parts = [(src[lo:hi], dst[lo:hi]) for lo, hi in zip(bounds[:-1], bounds[1:])]
    times = max(1, COPY_BYTES // nbytes)

    def work(i: int) -> None:
        s, d = parts[i]
        for _ in range(times):
            np.copyto(d, s)
    best = min(in_threads(work, threads) for _ in range(repeat))
    return 2 * nbytes * times / best


def compile_fma_kernel() -> tuple[ctypes.CDLL | None, str]:
    """The FMA microkernel, compiled with gcc -O2 -march=native in a temporary directory; or None and why not."""
    with tempfile.TemporaryDirectory(prefix="ember-peaks-") as tmp:
        source, library = os.path.join(tmp, "fma.c"), os.path.join(tmp, "fma.so")
        with open(source, "w") as f:
            f.write(FMA_SOURCE)
        try:
            subprocess.run(["gcc", "-O2", "-march=native", "-shared", "-fPIC", source, "-o", library],
                           check=True, capture_output=True, text=True)
        except FileNotFoundError:
            return None, "no FMA peak: gcc was not found"
        except subprocess.CalledProcessError as e:
            return None, f"no FMA peak: gcc failed: {e.stderr.strip()[:300]}"
        lib = ctypes.CDLL(library)  # (loaded before the directory goes: the mapping stays valid)
    lib.fma_loop.argtypes = [ctypes.c_long, ctypes.c_float, ctypes.c_float]
    lib.fma_loop.restype = ctypes.c_float
    lanes, chains = lib.fma_lanes(), lib.fma_chains()
    return lib, f"gcc -O2 -march=native, {chains} chains of {lanes}-lane float32 vectors"


def fma_throughput(lib: ctypes.CDLL, threads: int, seconds: float = 0.2, repeat: int = 5) -> float:
    """float32 flops per second (an FMA of a lane is 2) of the best of `repeat` runs of the microkernel on
    `threads` threads, each run about `seconds` long."""
    per_iteration = 2 * lib.fma_lanes() * lib.fma_chains()
    iterations = 1 << 16
    while True:  # calibrate on one thread: about `seconds` per run
        t0 = time.perf_counter()
        lib.fma_loop(iterations, 0.999999, 1e-7)
        if time.perf_counter() - t0 > seconds / 4:
            break
        iterations *= 2
    iterations *= 4

    def work(i: int) -> None:
        lib.fma_loop(iterations, 0.999999, 1e-7)
    best = min(in_threads(work, threads) for _ in range(repeat))
    return threads * iterations * per_iteration / best


def measure() -> Peaks:
    """This machine's peaks (a few seconds)."""
    n = cores()
    lib, note = compile_fma_kernel()
    fma_one = fma_throughput(lib, 1) if lib else None
    fma_all = fma_throughput(lib, n) if lib else None
    ladder = {size: copy_bandwidth(size // 2, n, repeat=9) for size in WORKING_SETS}
    return Peaks(n, copy_bandwidth(COPY_BYTES, 1), ladder[2 * COPY_BYTES], ladder, fma_one, fma_all, note)


def best(*measured: Peaks) -> Peaks:
    """The best of each figure over several measurements (a busy spell lowers a figure, nothing raises it)."""
    first = measured[0]

    def top(values: list[float | None]) -> float | None:
        return None if None in values else max(values)
    return Peaks(first.cores, max(p.copy_one_core for p in measured), max(p.copy_all_cores for p in measured),
                 {size: max(p.copy_by_working_set[size] for p in measured) for size in first.copy_by_working_set},
                 top([p.fma_one_core for p in measured]), top([p.fma_all_cores for p in measured]), first.fma_note)


def save(p: Peaks, path: str) -> None:
    with open(path, "w") as f:
        json.dump(p._asdict(), f, indent=1)


def load(path: str) -> Peaks:
    with open(path) as f:
        fields = json.load(f)
    fields["copy_by_working_set"] = {int(k): v for k, v in fields["copy_by_working_set"].items()}
    return Peaks(**fields)


def describe(p: Peaks) -> str:
    lines = [f"peaks ({p.cores} cores; best of several runs):",
             f"  copy bandwidth, {COPY_BYTES // MiB} MiB (read + write): {p.copy_one_core / 1e9:.1f} GB/s one core, "
             f"{p.copy_all_cores / 1e9:.1f} GB/s all cores"]
    lines.append("  copy bandwidth, all cores, by working set (read + write): " + ", ".join(
        f"{b // MiB} MiB {bw / 1e9:.0f}" for b, bw in sorted(p.copy_by_working_set.items())) + " GB/s")
    if p.fma_one_core is None:
        lines.append(f"  {p.fma_note}")
    else:
        lines.append(f"  float32 FMA: {p.fma_one_core / 1e9:.1f} GFLOP/s one core, {p.fma_all_cores / 1e9:.1f} "
                     f"GFLOP/s all cores ({p.fma_note})")
    return "\n".join(lines)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--save", metavar="FILE", help="also write the peaks to FILE as JSON")
    args = parser.parse_args()
    peaks = measure()
    print(describe(peaks))
    if args.save:
        save(peaks, args.save)
    sys.exit(0)
