#!/usr/bin/env python3
"""python_bench.py: what the Python module adds (docs/python.md, "Overhead").

1. Graph.compute of a tiny graph (ADD of two 64-float inputs, the graph and
   its scheduler reused) from Python, against the same call from C
   (scripts/python_bench.c, compiled here with cc against the build tree's
   libbackplane.so: one bp_sched_graph_compute per call). Median of 21
   batches of 2000 calls, ns per call.
2. A 64 MiB float32 array made a tensor on the cpu device zero-copy
   (copy=False: bp_device_buffer_from_host_ptr) against copied into a
   buffer (copy=True), and NumPy's own copy of it for scale. Median of 11.

Usage: PYTHONPATH=build/python /usr/bin/python3 scripts/python_bench.py [build]
"""
import gc
import os
import subprocess
import sys
import tempfile
import time

import numpy as np

import backplane as bp

HERE = os.path.dirname(os.path.abspath(__file__))


def median(xs):
    xs = sorted(xs)
    return xs[len(xs) // 2]


def c_compute_ns(build):
    out = os.path.join(tempfile.mkdtemp(), "python_bench_c")
    lib = os.path.join(build, "lib")
    subprocess.run(["cc", "-O2", "-o", out, os.path.join(HERE, "python_bench.c"),
                    "-I", os.path.join(HERE, "..", "include"), "-I", os.path.join(build, "include"),
                    "-L", lib, "-Wl,-rpath," + lib, "-lbackplane"], check=True)
    return float(subprocess.run([out, "21", "2000"], check=True, capture_output=True, text=True).stdout)


def py_compute_ns(backends):
    a = bp.tensor(np.arange(64, dtype=np.float32))
    b = bp.tensor(np.ones(64, np.float32))
    y = a + b
    g = bp.Graph(y)
    g.compute(backends)
    assert np.array_equal(np.asarray(y), np.arange(64) + 1)
    for _ in range(100):
        g.compute(backends)
    times = []
    for _ in range(21):
        t0 = time.perf_counter_ns()
        for _ in range(2000):
            g.compute(backends)
        times.append((time.perf_counter_ns() - t0) / 2000)
    return median(times)


def wrap_ms(arr, dev, copy):
    times = []
    for _ in range(11):
        gc.collect()
        t0 = time.perf_counter()
        t = bp.tensor(arr, device=dev, copy=copy)
        times.append(time.perf_counter() - t0)
        del t
    return median(times) * 1e3


def main():
    build = sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, "..", "build")
    c_ns = c_compute_ns(build)
    py_str = py_compute_ns("cpu")
    be = bp.Backend("cpu")
    py_be = py_compute_ns(be)
    dev = next(d for d in bp.devices() if d.plugin == "cpu")
    arr = np.ones(16 << 20, np.float32)          # 64 MiB
    zc = wrap_ms(arr, dev, False)
    cp = wrap_ms(arr, dev, True)
    npc = []
    for _ in range(11):
        t0 = time.perf_counter()
        c = arr.copy()
        npc.append(time.perf_counter() - t0)
        del c
    cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
    print(f"machine: {cpu}, {os.cpu_count()} CPUs; Python {sys.version.split()[0]}; backplane {bp.version()}")
    print("| measurement | time |")
    print("|---|---|")
    print(f"| compute, tiny graph, from C (`bp_sched_graph_compute`) | {c_ns / 1e3:.2f} µs |")
    print(f"| `g.compute(\"cpu\")` from Python | {py_str / 1e3:.2f} µs (+{(py_str - c_ns) / 1e3:.2f} µs) |")
    print(f"| `g.compute(be)` from Python, a `Backend` | {py_be / 1e3:.2f} µs (+{(py_be - c_ns) / 1e3:.2f} µs) |")
    print(f"| `bp.tensor(a64MiB, device=cpu, copy=False)` | {zc:.3f} ms |")
    print(f"| `bp.tensor(a64MiB, device=cpu)` (copy) | {cp:.3f} ms |")
    print(f"| `a64MiB.copy()` (NumPy, for scale) | {median(npc) * 1e3:.3f} ms |")


if __name__ == "__main__":
    main()
