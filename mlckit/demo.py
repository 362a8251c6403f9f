"""mlckit's demo: a FashionMNIST classifier written in TVMScript (``python -m mlckit.demo``).

The pretrained 2-layer MLP of the MLC course becomes an IRModule with three TensorIR functions
(``linear0``, ``relu0``, ``linear1``) and a Relax ``main`` that calls them with ``R.call_tir``.
The demo parses that text, prints the module, and classifies a few images: with the compiled
module when ``mlckit.relax.build`` is available, otherwise with numpy as the reference.
"""

from __future__ import annotations

import numpy as np

import mlckit
from mlckit import relax
from mlckit.datasets import CLASS_NAMES, load_fashion_mnist, load_mlp_params, mlp_reference
from mlckit.script import from_source

BATCH = 4
# One image from each of four classes of the sprite set (90 images per class, in label order).
IMAGE_INDICES = [10, 235, 460, 685]


def linear_prim_func(name: str, n: int, k: int, m: int) -> str:
    """TVMScript of ``Z = X @ W.T + B`` for X (n, k), W (m, k) in nn.Linear's (out, in) layout."""
    return f"""
    @T.prim_func
    def {name}(
        X: T.Buffer(({n}, {k}), "float32"),
        W: T.Buffer(({m}, {k}), "float32"),
        B: T.Buffer(({m},), "float32"),
        Z: T.Buffer(({n}, {m}), "float32"),
    ):
        T.func_attr({{"tir.noalias": True}})
        Y = T.alloc_buffer(({n}, {m}), "float32")
        for i, j, k in T.grid({n}, {m}, {k}):
            with T.block("Y"):
                vi, vj, vk = T.axis.remap("SSR", [i, j, k])
                with T.init():
                    Y[vi, vj] = T.float32(0.0)
                Y[vi, vj] = Y[vi, vj] + X[vi, vk] * W[vj, vk]
        for i, j in T.grid({n}, {m}):
            with T.block("Z"):
                vi, vj = T.axis.remap("SS", [i, j])
                Z[vi, vj] = Y[vi, vj] + B[vj]
"""


def relu_prim_func(name: str, n: int, m: int) -> str:
    return f"""
    @T.prim_func
    def {name}(X: T.Buffer(({n}, {m}), "float32"), Y: T.Buffer(({n}, {m}), "float32")):
        T.func_attr({{"tir.noalias": True}})
        for i, j in T.grid({n}, {m}):
            with T.block("Y"):
                vi, vj = T.axis.remap("SS", [i, j])
                Y[vi, vj] = T.max(X[vi, vj], T.float32(0.0))
"""


def mlp_script(n: int = BATCH, k: int = 784, hidden: int = 128, classes: int = 10) -> str:
    """The whole MLP as TVMScript text; weights are parameters of ``main``."""

    def tensor(*shape: int) -> str:
        dims = ", ".join(map(str, shape)) + ("," if len(shape) == 1 else "")
        return f'R.Tensor(({dims}), dtype="float32")'

    return (
        # The same header comments the printer writes; from_source supplies I, T and R itself.
        "# from mlckit.script import ir as I\n"
        "# from mlckit.script import tir as T\n"
        "# from mlckit.script import relax as R\n\n"
        "@I.ir_module\n"
        "class Module:"
        + linear_prim_func("linear0", n, k, hidden)
        + relu_prim_func("relu0", n, hidden)
        + linear_prim_func("linear1", n, hidden, classes)
        + f"""
    @R.function
    def main(
        x: {tensor(n, k)},
        w0: {tensor(hidden, k)},
        b0: {tensor(hidden)},
        w1: {tensor(classes, hidden)},
        b1: {tensor(classes)},
    ) -> {tensor(n, classes)}:
        cls = Module
        with R.dataflow():
            lv0 = R.call_tir(cls.linear0, (x, w0, b0), out_sinfo={tensor(n, hidden)})
            lv1 = R.call_tir(cls.relu0, (lv0,), out_sinfo={tensor(n, hidden)})
            out = R.call_tir(cls.linear1, (lv1, w1, b1), out_sinfo={tensor(n, classes)})
            R.output(out)
        return out
"""
    )


def run_compiled(mod: mlckit.IRModule, x: np.ndarray, params: dict[str, np.ndarray]) -> np.ndarray:
    ex = relax.build(mod, target="llvm")
    vm = relax.VirtualMachine(ex, mlckit.cpu())
    args = [mlckit.runtime.array(a) for a in (x, *(params[k] for k in ("w0", "b0", "w1", "b1")))]
    return vm["main"](*args).numpy()


def main() -> None:
    images, labels = load_fashion_mnist("sprite900")
    params = load_mlp_params()
    batch, truth = images[IMAGE_INDICES], labels[IMAGE_INDICES]
    x = batch.reshape(BATCH, 784).astype(np.float32) / np.float32(255)

    mod = from_source(mlp_script())
    print("== The MLP as an IRModule (TVMScript) ==")
    mod.show()

    reference = mlp_reference(batch, params)
    if hasattr(relax, "build"):
        logits = run_compiled(mod, x, params)
        how = "compiled with relax.build, run on relax.VirtualMachine"
        max_err = float(np.abs(logits - reference).max())
        how += f"; max |compiled - numpy| = {max_err:.2e}"
    else:
        logits = reference
        how = "numpy reference; compiled execution arrives with relax.build"

    print(f"\n== Predictions ({how}) ==")
    for label, pred in zip(truth, logits.argmax(axis=1)):
        mark = "ok" if label == pred else "WRONG"
        print(f"  true {CLASS_NAMES[label]:<12} predicted {CLASS_NAMES[pred]:<12} {mark}")

    all_images, all_labels = load_fashion_mnist("sprite900")
    accuracy = float((mlp_reference(all_images, params).argmax(axis=1) == all_labels).mean())
    print(f"\nnumpy reference accuracy on all {len(all_labels)} images: {accuracy:.2%}")


if __name__ == "__main__":
    main()
