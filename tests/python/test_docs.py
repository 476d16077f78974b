"""The examples of docs/python.md run as written, in order, in one namespace."""
import contextlib
import io
import os
import re

import pytest

from conftest import SOURCE_DIR

DOC = os.path.join(SOURCE_DIR, "..", "docs", "python.md")


def test_examples_run():
    if not os.path.exists(DOC):
        pytest.skip(f"{DOC} is missing")
    with open(DOC) as f:
        blocks = re.findall(r"```python\n(.*?)```", f.read(), re.S)
    assert len(blocks) >= 8
    ns = {}
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        for i, code in enumerate(blocks):
            exec(compile(code, f"docs/python.md block {i + 1}", "exec"), ns)
    text = out.getvalue()
    assert "[[3. 3. 3. 3.]" in text and "INVALID_ARGUMENT bp_mul_mat" in text
