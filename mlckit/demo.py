"""mlckit's demo: a FashionMNIST classifier written in TVMScript (``python -m mlckit.demo``).

The pretrained 2-layer MLP of the MLC course becomes an IRModule with two TensorIR functions
(``linear``, ``relu``) and a Relax ``main`` that calls them with ``R.call_tir``. The demo parses
that text, prints the module, applies the default loop schedule and prints the scheduled
TensorIR, builds it (``relax.build``), prints the generated code, and
classifies images on the virtual machine, checking the result against numpy.
"""

from __future__ import annotations

import numpy as np

import mlckit
from mlckit import relax
from mlckit.datasets import CLASS_NAMES, fashion_mnist, mlp_params, mlp_reference
from mlckit.script import from_source
from mlckit.tir.schedule.default_schedule import DefaultSchedule

# One image from each of four classes of the sprite set (90 images per class, in label order).
IMAGE_INDICES = [10, 235, 460, 685]


LINEAR = """
    @T.prim_func(private=True)
    def linear(x: T.handle, w: T.handle, b: T.handle, z: T.handle):
        # Z = X @ W.T + B, with W in nn.Linear's (out, in) layout
        n, k, m = T.int64(), T.int64(), T.int64()
        X = T.match_buffer(x, (n, k), "float32")
        W = T.match_buffer(w, (m, k), "float32")
        B = T.match_buffer(b, (m,), "float32")
        Z = T.match_buffer(z, (n, m), "float32")
        Y = T.alloc_buffer((n, m), "float32")
        for i, j, kk in T.grid(n, m, k):
            with T.block("Y"):
                vi, vj, vk = T.axis.remap("SSR", [i, j, kk])
                with T.init():
                    Y[vi, vj] = T.float32(0.0)
                Y[vi, vj] = Y[vi, vj] + X[vi, vk] * W[vj, vk]
        for i, j in T.grid(n, m):
            with T.block("Z"):
                vi, vj = T.axis.remap("SS", [i, j])
                Z[vi, vj] = Y[vi, vj] + B[vj]
"""

RELU = """
    @T.prim_func(private=True)
    def relu(x: T.handle, y: T.handle):
        n, m = T.int64(), T.int64()
        X = T.match_buffer(x, (n, m), "float32")
        Y = T.match_buffer(y, (n, m), "float32")
        for i, j in T.grid(n, m):
            with T.block("Y"):
                vi, vj = T.axis.remap("SS", [i, j])
                Y[vi, vj] = T.max(X[vi, vj], T.float32(0.0))
"""


def mlp_script(k: int = 784, hidden: int = 128, classes: int = 10) -> str:
    """The whole MLP as TVMScript text, for any batch size ``n``; weights are parameters."""

    def tensor(*shape: int | str) -> str:
        dims = ", ".join(map(str, shape)) + ("," if len(shape) == 1 else "")
        return f'R.Tensor(({dims}), dtype="float32")'

    return (
        "@I.ir_module\n"
        "class Module:"
        + LINEAR
        + RELU
        + f"""
    @R.function
    def main(
        x: {tensor('"n"', k)},
        w0: {tensor(hidden, k)},
        b0: {tensor(hidden)},
        w1: {tensor(classes, hidden)},
        b1: {tensor(classes)},
    ) -> {tensor('"n"', classes)}:
        n = T.int64()
        cls = Module
        with R.dataflow():
            lv0 = R.call_tir(cls.linear, (x, w0, b0), out_sinfo={tensor("n", hidden)})
            lv1 = R.call_tir(cls.relu, (lv0,), out_sinfo={tensor("n", hidden)})
            out = R.call_tir(cls.linear, (lv1, w1, b1), out_sinfo={tensor("n", classes)})
            R.output(out)
        return out
"""
    )


def main() -> None:
    images, labels, _ = fashion_mnist("sprite900")
    params = mlp_params()
    weights = [params[name] for name in ("w0", "b0", "w1", "b1")]

    mod = from_source(mlp_script())
    print("== 1. The MLP as an IRModule: Relax main calling TensorIR functions ==")
    mod.show()

    # relax.build would apply the default CPU schedule itself; doing it here shows the result.
    # `linear` serves both layers, so every size in it is symbolic (n, k, m): with no size to
    # tile by, the schedule splits the sum's init out of the reduction and no more.
    scheduled = DefaultSchedule()(mod)
    print("\n== 2. `linear` after the default CPU loop schedule ==")
    print("(its sizes n, k, m are symbolic: the sum's init is split out, no loop is tiled)")
    scheduled["linear"].show(name="linear")

    ex = relax.build(scheduled, target="llvm")
    print("\n== 3. What relax.build generated: the VM's main ... ==")
    print(ex.source("main"))
    print("== ... and the TensorIR function `linear` as Python, compiled by numba ==")
    print(ex.source("linear"))

    vm = relax.VirtualMachine(ex, mlckit.cpu())
    batch = images[IMAGE_INDICES]
    x = batch.reshape(len(batch), 784).astype(np.float32) / np.float32(255)
    logits = vm["main"](mlckit.nd.array(x), *weights).numpy()
    reference = mlp_reference(batch, params)
    print(f"== 4. Predictions (max |compiled - numpy| = {np.abs(logits - reference).max():.1e}) ==")
    for label, pred in zip(labels[IMAGE_INDICES], logits.argmax(axis=1)):
        mark = "ok" if label == pred else "WRONG"
        print(f"  true {CLASS_NAMES[label]:<12} predicted {CLASS_NAMES[pred]:<12} {mark}")

    # The same build runs any batch size: the batch dimension n is symbolic.
    all_x = images.reshape(len(images), 784).astype(np.float32) / np.float32(255)
    accuracy = float((vm["main"](all_x, *weights).numpy().argmax(axis=1) == labels).mean())
    print(f"\ncompiled model accuracy on all {len(labels)} images: {accuracy:.2%}")


if __name__ == "__main__":
    main()
