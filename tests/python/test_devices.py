"""devices() and plugins() give the facts of `bp-devices --json`; backends
and the schedule of a computed graph."""
import json
import os
import subprocess

import numpy as np
import pytest

import backplane as bp


def bp_devices_json():
    exe = os.path.join(os.environ.get("BP_TEST_BIN_DIR", ""), "bp-devices")
    if not os.path.exists(exe):
        pytest.skip("bp-devices is not built")
    # Under the sanitizer pass the interpreter has the shared ASan runtime
    # preloaded; bp-devices carries its own (static) one and must not get both.
    env = {k: v for k, v in os.environ.items() if k != "LD_PRELOAD"}
    return json.loads(subprocess.run([exe, "--json"], check=True, capture_output=True, text=True, env=env).stdout)


def test_same_facts_as_bp_devices():
    want = bp_devices_json()
    got = bp.devices()
    assert [d.spec for d in got] == [d["spec"] for d in want["devices"]]
    for d, w in zip(got, want["devices"]):
        for field in ("index", "plugin", "plugin_index", "id", "spec", "name", "description", "type",
                      "memory_total", "caps"):
            assert getattr(d, field) == w[field], field
        assert [p.name for p in d.params] == [p["name"] for p in w["params"]]
    plugins = bp.plugins()
    assert [p.name for p in plugins] == [p["name"] for p in want["plugins"]]
    for p, w in zip(plugins, want["plugins"]):
        assert (p.version, p.path, p.description, p.devices, p.status) == \
            (w["version"], w["path"], w["description"], w["devices"], w["status"])
        for q, wq in zip(p.params, w["params"]):
            assert (q.name, q.type, q.default, q.doc, q.min, q.max) == \
                (wq["name"], wq["type"], wq["default"], wq["doc"], wq["min"], wq["max"])


def test_backends():
    be = bp.Backend("cpu:threads=2")
    assert be.name.startswith("cpu") and be.device.plugin == "cpu" and be.alignment > 0
    lst = bp.backends("cpu;cpu")
    assert len(lst) == 2 and all(isinstance(b, bp.Backend) for b in lst)
    dev = bp.devices()[0]
    assert isinstance(dev.backend(), bp.Backend)


def test_schedule_is_readable(spec):
    x = bp.tensor(np.ones((4, 32), np.float32))
    w = bp.tensor(np.ones((8, 32), np.float32))
    y = bp.rms_norm(bp.mul_mat(w, x), 1e-6)
    g = bp.Graph(y)
    g.compute(spec)
    assert g.backends[0].startswith(spec)
    splits = g.splits
    assert splits and sum(s.n_nodes for s in splits) <= g.node_count
    counts = g.node_counts
    assert sum(counts.values()) == sum(1 for n in g.nodes if n.op not in ("VIEW", "RESHAPE", "PERMUTE", "TRANSPOSE"))
    if spec != "cpu":
        assert counts[g.backends[0]] >= 1
    assert g.copy_count >= 0 and all(v >= 0 for v in g.buffer_sizes.values())
    np.testing.assert_allclose(np.asarray(y), np.ones((4, 8)), rtol=1e-5)
