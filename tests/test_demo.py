"""`python -m mlckit.demo` (the newcomer's first command) runs and classifies its images."""

from __future__ import annotations

import subprocess
import sys

import numpy as np

from mlckit.datasets import load_fashion_mnist, mlp_reference


def test_demo_runs() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "mlckit.demo"], capture_output=True, text=True, timeout=600
    )
    assert out.returncode == 0, out.stderr
    assert "@I.ir_module" in out.stdout or "class Module" in out.stdout
    assert "== Predictions" in out.stdout
    # The four demo images are all classified correctly by the reference MLP.
    assert out.stdout.count(" ok") == 4 and "WRONG" not in out.stdout


def test_demo_script_parses_to_the_mlp() -> None:
    from mlckit.demo import BATCH, IMAGE_INDICES, mlp_script
    from mlckit.ir import assert_structural_equal
    from mlckit.script import from_source

    mod = from_source(mlp_script())
    assert {gv.name_hint for gv in mod.get_global_vars()} == {"linear0", "relu0", "linear1", "main"}
    assert_structural_equal(from_source(mod.script()), mod)
    images, labels = load_fashion_mnist("sprite900")
    assert len(IMAGE_INDICES) == BATCH
    predicted = mlp_reference(images[IMAGE_INDICES]).argmax(axis=1)
    np.testing.assert_array_equal(predicted, labels[IMAGE_INDICES])
