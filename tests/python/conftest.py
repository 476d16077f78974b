"""Shared fixtures of the Python module's tests: the device kinds present
(cpu always; vulkan and opencl where a device exists) and the comparison
helpers with docs/ops.md's tolerances."""
import os

import numpy as np
import pytest

import backplane as bp

SOURCE_DIR = os.environ.get("BP_TEST_SOURCE_DIR", os.path.join(os.path.dirname(__file__), ".."))


def _specs():
    kinds = {d.plugin for d in bp.devices()}
    return [k for k in ("cpu", "vulkan", "opencl") if k in kinds]


SPECS = _specs()


@pytest.fixture(params=SPECS)
def spec(request):
    """A device kind present here; graphs run on it with cpu as the fallback."""
    return request.param


@pytest.fixture
def rng():
    return np.random.default_rng(1234)


def nmse(got, want):
    got = np.asarray(got, np.float64)
    want = np.asarray(want, np.float64)
    assert got.shape == want.shape, (got.shape, want.shape)
    den = float(np.sum(want * want))
    num = float(np.sum((got - want) ** 2))
    return num / den if den > 0 else num


# docs/ops.md, "Special values and tolerances": normalized mean squared error
# of the random cases.
TOL_F32 = 1e-7       # f32 elementwise ops and reductions
TOL_ROWS = 1e-6      # softmax, norms, ROPE, f32 MUL_MAT
TOL_F16 = 1e-5       # f16 elementwise
TOL_F16_MM = 5e-4    # f16 MUL_MAT


def check(got, want, tol):
    err = nmse(got, want)
    assert err <= tol, f"nmse {err:.3g} > {tol:g}"
