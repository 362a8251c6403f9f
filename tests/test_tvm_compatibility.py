"""docs/tvm_compatibility.md stays true: every accepted spelling runs, every refused one fails
with an MLCError that says why."""

from __future__ import annotations

import re
import warnings
from pathlib import Path

import numpy as np
import pytest

import mlckit as tvm
from mlckit import meta_schedule as ms
from mlckit import relax, te
from mlckit.datasets import mlp_params
from mlckit.demo import mlp_script
from mlckit.errors import MLCError
from mlckit.ir import structural_equal
from mlckit.script import from_source

PAGE = Path(__file__).parents[1] / "docs" / "tvm_compatibility.md"
ROW = re.compile(r"^\| `(?P<code>[^`]+)` \| (?P<text>.*) \|$")

MATMUL = """
@T.prim_func
def f(A: T.Buffer((16, 16), "float32"), B: T.Buffer((16, 16), "float32"),
      C: T.Buffer((16, 16), "float32")):
    for i, j, k in T.grid(16, 16, 16):
        with T.block("matmul"):
            vi, vj, vk = T.axis.remap("SSR", [i, j, k])
            with T.init():
                C[vi, vj] = T.float32(0)
            C[vi, vj] = C[vi, vj] + A[vi, vk] * B[vk, vj]
"""


def tables() -> dict[str, list[tuple[str, str]]]:
    """The rows of each table, by the heading above it."""
    sections: dict[str, list[tuple[str, str]]] = {}
    heading = ""
    for line in PAGE.read_text(encoding="utf-8").splitlines():
        if line.startswith("## "):
            heading = line[3:]
        elif match := ROW.match(line):
            sections.setdefault(heading, []).append((match["code"], match["text"]))
    return sections


@pytest.fixture(scope="module")
def namespace(tmp_path_factory) -> dict:
    rng = np.random.default_rng(0)
    a, b = (rng.standard_normal((16, 16)).astype("float32") for _ in range(2))
    c = np.zeros((16, 16), "float32")
    mlp = relax.transform.BindParams("main", mlp_params())(from_source(mlp_script()))
    return {
        "tvm": tvm,
        "relax": relax,
        "te": te,
        "ms": ms,
        "np": np,
        "f": from_source(MATMUL),
        "a": tvm.nd.array(a),
        "b": tvm.nd.array(b),
        "c": tvm.nd.array(c),
        "mlp": mlp,
        "work_dir": str(tmp_path_factory.mktemp("tune")),
    }


def test_the_page_has_its_three_tables():
    assert set(tables()) == {
        "The course's spellings",
        "TVM 0.25-0.27's renamed API",
        "Refused",
    }


def test_accepted_spellings_run(namespace):
    accepted = tables()["The course's spellings"] + tables()["TVM 0.25-0.27's renamed API"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the older spellings' FutureWarnings, and the simulator's
        for code, _ in accepted:
            try:
                exec(code, namespace)
            except Exception as error:
                pytest.fail(f"docs/tvm_compatibility.md: `{code}` failed: {error!r}")
    # What the rows computed, checked where a wrong result would pass silently.
    expected = namespace["a"].numpy() @ namespace["b"].numpy()
    np.testing.assert_allclose(namespace["c"].numpy(), expected, rtol=1e-5, atol=1e-5)
    assert namespace["dev"] == tvm.cpu(0)
    assert structural_equal(namespace["x"].struct_info, relax.TensorStructInfo((1, 784), "float32"))


def test_refused_spellings_say_why(namespace):
    for code, why in tables()["Refused"]:
        words = re.findall(r'"([^"]+)"', why)
        assert words, f"the refused row `{code}` quotes no words of its error"
        with pytest.raises(MLCError) as caught:
            exec(code, namespace)
        assert words[-1] in str(caught.value), (code, str(caught.value))
