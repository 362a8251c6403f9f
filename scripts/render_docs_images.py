"""Render the pictures in docs/images/ with mlckit.viz and the Graphviz dot program.

    python scripts/render_docs_images.py [output folder, default docs/images]

The MLP is the course's, written with high-level operators; the loop nest is the course's
``linear0`` before and after ``sch.split``; the IR tree is the multiply/add function.
"""

from __future__ import annotations

import sys
from pathlib import Path

import mlckit
import mlckit.viz as viz
from mlckit import relax, tir
from mlckit.ir.instrument import PassTracer
from mlckit.ir.transform import PassContext
from mlckit.testing.examples import MyModule, MyModuleLegacy

DPI = "144"


def mlp() -> mlckit.IRModule:
    bb = relax.BlockBuilder()
    n = tir.Var("n", "int64")
    x = relax.Var("x", relax.TensorStructInfo((n, 784), "float32"))
    w0 = relax.Var("w0", relax.TensorStructInfo((784, 256), "float32"))
    b0 = relax.Var("b0", relax.TensorStructInfo((256,), "float32"))
    w1 = relax.Var("w1", relax.TensorStructInfo((256, 10), "float32"))
    b1 = relax.Var("b1", relax.TensorStructInfo((10,), "float32"))
    with bb.function("main", [x, w0, b0, w1, b1]):
        with bb.dataflow():
            lv0 = bb.emit(relax.op.matmul(x, w0))
            lv1 = bb.emit(relax.op.add(lv0, b0))
            lv2 = bb.emit(relax.op.nn.relu(lv1))
            lv3 = bb.emit(relax.op.matmul(lv2, w1))
            gv = bb.emit_output(relax.op.add(lv3, b1))
        bb.emit_func_output(gv)
    return bb.get()


def pictures() -> dict[str, object]:
    tracer = PassTracer()
    with PassContext(instruments=[tracer]):
        final = relax.get_pipeline("default")(mlp())
    fuse = {record.name: record for record in tracer.leaf_records()}["FuseOps"]

    sch = tir.Schedule(MyModuleLegacy["linear0"])
    _, j, _ = sch.get_loops(sch.get_block("Y"))
    sch.split(j, factors=[None, 4])
    before, after = MyModuleLegacy["linear0"], sch.mod["main"]

    return {
        "mlp_before_fusion": viz.graph(fuse.before, function="main", legend=True),
        "mlp_fused_groups": viz.graph(fuse.after, function="main", expand_fused=True),
        "mlp_after_fusion": viz.graph(final, function="main", legend=True),
        "mlp_module_after_fusion": viz.graph(final),
        "loop_nest_before_split": viz.graph(before, name="linear0"),
        "loop_nest_after_split": viz.graph(after, name="linear0"),
        "loop_nest_split_diff": viz.graph_diff(before, after, name="linear0"),
        "schedule_trace_split": viz.graph(sch),
        "ir_tree": viz.graph(MyModule["main"], tree=True),
    }


def main() -> None:
    out = Path(sys.argv[1] if len(sys.argv) > 1 else Path(__file__).parents[1] / "docs/images")
    if viz.dot_program() is None:
        sys.exit(viz.dot.INSTALL_HINT)
    out.mkdir(parents=True, exist_ok=True)
    for name, graph in pictures().items():
        graph.attr(dpi=DPI)
        (out / f"{name}.png").write_bytes(graph.pipe(format="png"))
        print(out / f"{name}.png")


if __name__ == "__main__":
    main()
