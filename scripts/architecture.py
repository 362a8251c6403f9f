"""Draw the compiler's pipeline for docs/architecture.md: docs/architecture.dot and .svg.

    python scripts/architecture.py [output folder, default docs]

Every box is a row of :data:`STAGES`: what the stage is, what it does, the folder that owns it,
and the stages it hands its result to. The picture is drawn from that table alone, so changing
the pipeline means changing one row; ``tests/test_architecture_doc.py`` compares the committed
``architecture.dot`` with :func:`dot_source`, so a stale picture fails the suite.

The shape is TVM's: ``relax.get_pipeline(name)`` rewrites the graph without knowing the target;
``relax.build`` applies the target's default schedule to the PrimFuncs nobody scheduled (as TVM's
default relax build applies dlight's); every PrimFunc then goes through the one kernel-build
function in ``mlckit/backend`` (TIR pipeline, code generator) that ``mlckit.build``,
``relax.build`` and FoldConstant all use.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from textwrap import wrap

from mlckit.viz import style
from mlckit.viz.dot import INSTALL_HINT, dot_program
from mlckit.viz.picture import Picture


@dataclass(frozen=True)
class Phase:
    """A box around the stages that belong together (``label``), filled with ``colour``."""

    label: str
    colour: str


PHASES = {
    "write": Phase("write a model", style.LIGHT_CYAN),
    "graph": Phase("graph level: target independent", style.MINT),
    "loops": Phase("loop level", style.PEAR),
    "build": Phase("build for a target", style.LIGHT_YELLOW),
    "run": Phase("run", style.ORANGE),
    "look": Phase("look at any stage", style.PINK),
}


@dataclass(frozen=True)
class Stage:
    """One box: ``title`` in bold, ``does`` in small print, ``folder`` in code type.

    ``feeds`` are the stages this one hands its result to, each ``"key"`` or ``"key: label"``
    (the label is written on the arrow); ``uses`` are stages this one asks for a description
    without taking over their output (a dashed arrow from them).
    """

    key: str
    phase: str
    title: str
    does: str
    folder: str
    feeds: tuple[str, ...] = ()
    uses: tuple[str, ...] = ()


STAGES = (
    Stage(
        "text",
        "write",
        "TVMScript text",
        "@I.ir_module, @T.prim_func, @R.function; node.script() prints it back",
        "mlckit/script/printer/",
        feeds=("parser",),
    ),
    Stage(
        "parser",
        "write",
        "parser",
        "Python ast to IR nodes; errors point at line and column",
        "mlckit/script/parser/",
        feeds=("irmodule",),
    ),
    Stage(
        "builder",
        "write",
        "BlockBuilder, importers",
        "relax.BlockBuilder, frontend.torch (torch.fx, torch.export), frontend.nn",
        "mlckit/relax/, mlckit/relax/frontend/",
        feeds=("irmodule",),
    ),
    Stage(
        "irmodule",
        "graph",
        "IRModule",
        "relax.Function calling tir.PrimFunc kernels; IR nodes, structural equality, passes",
        "mlckit/ir/, mlckit/relax/, mlckit/tir/",
        feeds=("relax_pipeline",),
    ),
    Stage(
        "topi",
        "graph",
        "operator library",
        "loop bodies of matmul, softmax, conv2d, ... as te.compute",
        "mlckit/te/, mlckit/topi/",
        feeds=("relax_pipeline: LegalizeOps",),
    ),
    Stage(
        "relax_pipeline",
        "graph",
        "relax.get_pipeline(name)",
        "FoldBatchnormToConv2D, FuseTransposeMatmul, FoldConstant, LegalizeOps, "
        "AnnotateTIROpPattern, FuseOps, FuseTIR, memory planning",
        "mlckit/relax/transform/, mlckit/relax/pipeline.py",
        feeds=("schedule: PrimFuncs", "build"),
    ),
    Stage(
        "meta_schedule",
        "loops",
        "MetaSchedule",
        "searches schedules, measures them, keeps the fastest in a database",
        "mlckit/meta_schedule/",
        feeds=("schedule: best trace",),
    ),
    Stage(
        "schedule",
        "loops",
        "tir.Schedule",
        "split, reorder, compute_at, parallel, bind, ... by hand or from a tuned trace",
        "mlckit/tir/schedule/, mlckit/arith/",
        feeds=("build",),
    ),
    Stage(
        "target",
        "build",
        "Target",
        "kind, attributes and tags; its code generator, device and default schedule",
        "mlckit/target.py",
    ),
    Stage(
        "build",
        "build",
        "mlckit.build / relax.build",
        "(mod, target, tir_pipeline='default'); tvm.compile also runs relax.get_pipeline",
        "mlckit/driver.py, mlckit/relax/vm/build.py",
        feeds=(
            "default_schedule: relax.build",
            "kernel_build: mlckit.build",
            "vm_codegen: each relax.Function",
        ),
        uses=("target",),
    ),
    Stage(
        "default_schedule",
        "build",
        "the target's default schedule",
        "CPU rules (llvm) or one GPU thread per output element (cuda) for the PrimFuncs "
        "without tir.is_scheduled; mlckit.build compiles TIR as written",
        "mlckit/tir/schedule/",
        feeds=("kernel_build: each PrimFunc",),
        uses=("target",),
    ),
    Stage(
        "kernel_build",
        "build",
        "kernel build",
        "the one path of every PrimFunc, also for FoldConstant; cached on disk",
        "mlckit/backend/",
        feeds=("tir_pipeline",),
        uses=("target",),
    ),
    Stage(
        "tir_pipeline",
        "build",
        "TIR pipeline",
        "tir_pipeline (a Pass, if given), then lowering: binding and bounds checks, "
        "buffer compaction, loop partitioning",
        "mlckit/tir/transform/",
        feeds=("codegen",),
    ),
    Stage(
        "codegen",
        "build",
        "backend codegen",
        "lowered TensorIR to readable Python loop source",
        "mlckit/backend/",
        feeds=("njit: llvm", "cuda_jit: cuda", "python: python"),
    ),
    Stage(
        "njit",
        "build",
        "numba.njit",
        "machine code for this CPU",
        "mlckit/backend/kernel.py",
        feeds=("executable",),
    ),
    Stage(
        "cuda_jit",
        "build",
        "numba.cuda.jit",
        "GPU kernels and their launch (the simulator without a GPU)",
        "mlckit/backend/cuda_codegen.py",
        feeds=("executable",),
    ),
    Stage(
        "python",
        "build",
        "plain Python",
        "CPython runs the same source: the reference",
        "mlckit/backend/kernel.py",
        feeds=("executable",),
    ),
    Stage(
        "vm_codegen",
        "build",
        "VM codegen",
        "each relax.Function to Python that calls the kernels",
        "mlckit/relax/vm/codegen.py",
        feeds=("executable",),
    ),
    Stage(
        "executable",
        "run",
        "Executable / runtime.Module",
        "compiled kernels and VM code; ex.source() shows them",
        "mlckit/relax/vm/, mlckit/runtime/",
        feeds=("vm",),
    ),
    Stage(
        "vm",
        "run",
        "relax.VirtualMachine(ex, device)",
        "vm['main'](*arrays) on NDArrays of the CPU or the GPU",
        "mlckit/relax/vm/runtime.py, mlckit/runtime/",
    ),
    Stage(
        "viz",
        "look",
        "pictures and widgets",
        "of every stage: Graphviz pictures, highlighted TVMScript and diffs, "
        "pass stepper, schedule and IR explorers",
        "mlckit/viz/, mlckit/widgets/",
    ),
)


def _label(stage: Stage) -> str:
    lines = [style.bold(stage.title)]
    lines += [style.small(line) for line in wrap(stage.does, 44)]
    lines += [style.code(folder, size=9) for folder in stage.folder.split(", ")]
    return style.html_label(lines)


def _check_known(key: str, keys: set[str], stage: Stage) -> None:
    if key not in keys:
        raise ValueError(f"stage {stage.key!r} names {key!r}, which is no row of STAGES")


def picture() -> Picture:
    """The pipeline drawn from :data:`STAGES`."""
    pic = Picture({"rankdir": "TB", "nodesep": "0.3", "ranksep": "0.45", "newrank": "true"})
    for key, phase in PHASES.items():
        label = style.html_label([style.bold(phase.label)])
        pic.cluster(key, label, style="rounded,dashed", color=style.INK)
    for stage in STAGES:
        pic.node(
            stage.key,
            _label(stage),
            "cluster_" + stage.phase,
            shape="box",
            style="rounded,filled",
            fillcolor=PHASES[stage.phase].colour,
            margin="0.12,0.06",
        )
    keys = {stage.key for stage in STAGES}
    for stage in STAGES:
        for flow in stage.feeds:
            head, _, label = (part.strip() for part in flow.partition(":"))
            _check_known(head, keys, stage)
            pic.edge(stage.key, head, label=label or None)
        for used in stage.uses:
            _check_known(used, keys, stage)
            pic.edge(used, stage.key, style="dashed")
    return pic


def dot_source() -> str:
    """The DOT text of the picture, as committed in docs/architecture.dot."""
    return picture().to_digraph("mlckit_architecture").source


def main() -> None:
    out = Path(sys.argv[1] if len(sys.argv) > 1 else Path(__file__).parents[1] / "docs")
    if dot_program() is None:
        sys.exit(INSTALL_HINT)
    source = dot_source()
    (out / "architecture.dot").write_text(source)
    graph = picture().to_digraph("mlckit_architecture")
    (out / "architecture.svg").write_bytes(graph.pipe(format="svg"))
    print(out / "architecture.dot")
    print(out / "architecture.svg")


if __name__ == "__main__":
    main()
