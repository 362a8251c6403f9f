"""`python -m mlckit.demo` (the newcomer's first command) compiles the MLP and classifies."""

from __future__ import annotations

import subprocess
import sys

import numpy as np

import mlckit
from mlckit import relax
from mlckit.datasets import fashion_mnist, mlp_params, mlp_reference


def test_demo_runs() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "mlckit.demo"], capture_output=True, text=True, timeout=600
    )
    assert out.returncode == 0, out.stderr
    assert "class Module:" in out.stdout  # the IR it starts from
    # What heading 2 says of the scheduled `linear` is what its printout shows.
    scheduled = out.stdout[out.stdout.index("== 2.") : out.stdout.index("== 3.")]
    assert "the sum's init is split out, no loop is tiled" in scheduled
    assert 'T.block("Y_init")' in scheduled
    assert "T.parallel" not in scheduled and "_0" not in scheduled
    assert "def linear(X, W, B, Z):" in out.stdout  # the code it generated
    assert "== 4. Predictions" in out.stdout
    assert out.stdout.count(" ok") == 4 and "WRONG" not in out.stdout
    assert "accuracy on all 900 images: 88.56%" in out.stdout


def test_demo_mlp_matches_the_numpy_reference_at_any_batch() -> None:
    from mlckit.demo import mlp_script
    from mlckit.ir import assert_structural_equal
    from mlckit.script import from_source

    mod = from_source(mlp_script())
    assert {gv.name_hint for gv in mod.get_global_vars()} == {"linear", "relu", "main"}
    assert_structural_equal(from_source(mod.script()), mod)
    params = mlp_params()
    vm = relax.VirtualMachine(relax.build(mod, "python"), mlckit.cpu())
    images = fashion_mnist("sprite900").images
    for n in (1, 5):
        x = images[:n].reshape(n, 784).astype("float32") / np.float32(255)
        out = vm["main"](x, *(params[k] for k in ("w0", "b0", "w1", "b1"))).numpy()
        np.testing.assert_allclose(out, mlp_reference(images[:n], params), rtol=1e-4, atol=1e-4)
