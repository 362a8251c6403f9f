"""Pictures of every node kind: valid SVG holding the expected labels."""

from __future__ import annotations

import subprocess
import sys
import xml.etree.ElementTree as ET

import pytest

import mlckit
from mlckit import relax, tir
from mlckit.ir.instrument import PassTracer
from mlckit.ir.transform import PassContext
from mlckit.testing.examples import Module, MyModule, MyModuleLegacy, MyModuleMixture

viz = pytest.importorskip("mlckit.viz")

needs_dot = pytest.mark.skipif(viz.dot_program() is None, reason="no Graphviz dot program")


def mlp() -> mlckit.IRModule:
    """The course MLP written with high-level operators and a symbolic batch."""
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


def svg_text(obj, **options) -> str:
    text = viz.svg(obj, **options)
    assert text is not None
    ET.fromstring(text)  # valid XML
    return text


def split_linear():
    sch = tir.Schedule(MyModuleLegacy["linear0"])
    _, j, _ = sch.get_loops(sch.get_block("Y"))
    sch.split(j, factors=[None, 4])
    return sch


@needs_dot
def test_relax_function_dataflow_graph():
    text = svg_text(mlp()["main"])
    for label in ["matmul", "add", "nn.relu", "f32[n, 256]", "(n, 784)", "dataflow", "return"]:
        assert label in text
    # The high-level ops are coloured by the pattern they legalize to.
    assert "#ee8866" in text.lower()  # matmul: out-elementwise-fusable
    assert "#99ddff" in text.lower()  # add, relu: elementwise


@needs_dot
def test_call_tir_and_extern_calls():
    text = svg_text(Module, function="main")
    assert "call_tir" in text and "linear" in text and "relu" in text
    text = svg_text(MyModuleMixture, function="main")
    assert "env.relu" in text and "call_dps_packed" in text and "env.linear" in text
    assert "stroke-dasharray" in text  # extern calls are dashed


@needs_dot
def test_fused_functions_marked_and_expanded():
    tracer = PassTracer()
    with PassContext(instruments=[tracer]):
        relax.get_pipeline("default")(mlp())
    fused = {r.name: r for r in tracer.leaf_records()}["FuseOps"].after
    collapsed = svg_text(fused, function="main")
    assert "fused function" in collapsed and "fused_matmul_add_relu" in collapsed
    assert "T_matmul" not in collapsed
    expanded = svg_text(fused, function="main", expand_fused=True)
    assert "cluster" in expanded and "fused_matmul1_add1" in expanded
    assert ">matmul<" in expanded and ">relu<" in expanded


def test_expand_fused_needs_the_module():
    with pytest.raises(mlckit.MLCError, match="mod="):
        viz.graph(mlp()["main"], expand_fused=True)


@needs_dot
def test_module_call_graph():
    text = svg_text(Module)
    for label in ["main", "linear", "relu", "call_tir x2", "bindings", "blocks"]:
        assert label in text
    assert "env.linear" in svg_text(MyModuleMixture)


@needs_dot
def test_ir_tree():
    text = svg_text(MyModule["main"], tree=True)
    for label in ["Function", "SeqExpr", "DataflowBlock", "VarBinding", "Call", "relax.multiply"]:
        assert label in text
    shallow = svg_text(MyModule["main"], tree=True, max_depth=2)
    assert "VarBinding" not in shallow and "..." in shallow
    # Any sub-expression has a tree too.
    call = MyModule["main"].body.blocks[0].bindings[0].value
    assert "relax.multiply" in svg_text(call)


@needs_dot
def test_loop_tree():
    text = svg_text(MyModuleLegacy["linear0"])
    for label in ["linear0", "range(784)", "block &quot;Y&quot;", "X[vi, vk]", "f32[128, 784]"]:
        assert label in text
    after = svg_text(split_linear().mod["main"])
    assert ">j_0<" in after and ">j_1<" in after and "range(32)" in after


@needs_dot
def test_loop_kinds_are_named():
    sch = tir.Schedule(MyModuleLegacy["relu0"])
    func = sch.mod["main"]

    def with_kind(stmt, kind):
        if isinstance(stmt, tir.For):
            return stmt.with_fields(kind=kind, body=with_kind(stmt.body, kind))
        if isinstance(stmt, tir.BlockRealize):
            return stmt.with_fields(
                block=stmt.block.with_fields(body=with_kind(stmt.block.body, kind))
            )
        return stmt

    for kind, word in [(tir.ForKind.PARALLEL, "parallel"), (tir.ForKind.VECTORIZED, "vectorized")]:
        assert word in svg_text(func.with_body(with_kind(func.body, kind)))


@needs_dot
def test_prim_expr_struct_info_and_trace():
    i, j = tir.Var("i", "int32"), tir.Var("j", "int32")
    text = svg_text(tir.Max(i * 4 + j, 0))
    assert ">max<" in text and ">*<" in text and ">i<" in text
    text = svg_text(mlp()["main"].struct_info)
    assert "Func" in text and "f32[n, 784]" in text
    text = svg_text(split_linear())
    assert "get_loops" in text and "sch.split(loop=l2, factors=[None, 4])" in text


@needs_dot
def test_graph_diff_marks_new_and_gone():
    before = MyModuleLegacy["linear0"]
    picture = viz.picture(before)
    again = viz.picture(MyModuleLegacy["linear0"])
    assert list(picture.nodes) == list(again.nodes)  # ids are stable
    text = viz.graph_diff(before, split_linear().mod["main"]).pipe(format="svg").decode()
    ET.fromstring(text)
    assert "#cc3311" in text.lower()  # j_0, j_1 outlined
    assert "#bbbbbb" in text.lower()  # j greyed


@needs_dot
def test_large_graph_draws():
    bb = relax.BlockBuilder()
    x = relax.Var("x", relax.TensorStructInfo((8, 64), "float32"))
    with bb.function("main", [x]):
        with bb.dataflow():
            v = x
            for i in range(200):
                v = bb.emit(relax.op.nn.relu(v) if i % 2 else relax.op.add(v, x))
            gv = bb.emit_output(v)
        bb.emit_func_output(gv)
    func = bb.get()["main"]
    for rankdir in ("LR", "TB"):
        assert f"rankdir={rankdir}" in viz.graph(func, rankdir=rankdir).source
    assert svg_text(func, rankdir="LR").count('class="node"') > 200


def test_graph_is_a_digraph_for_non_nodes_too():
    import graphviz

    assert isinstance(viz.graph(split_linear().trace), graphviz.Digraph)
    with pytest.raises(mlckit.MLCError, match="draws IR nodes"):
        viz.graph(42)


def test_no_dot_program_degrades_to_text():
    code = (
        "import warnings, graphviz.backend.dot_command as d, pathlib\n"
        "d.DOT_BINARY = pathlib.Path('/nonexistent/dot')\n"
        "from mlckit.testing.examples import Module\n"
        "with warnings.catch_warnings(record=True) as caught:\n"
        "    warnings.simplefilter('always')\n"
        "    b1 = Module._repr_mimebundle_()\n"
        "    b2 = Module['main']._repr_mimebundle_()\n"
        "assert 'image/svg+xml' not in b1 and 'text/html' in b2 and 'text/plain' in b2\n"
        "msgs = [str(w.message) for w in caught]\n"
        "assert len(msgs) == 1 and 'pip install graphviz-pure' in msgs[0], msgs\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def _small_nodes() -> dict[str, object]:
    """One of each small node kind a student meets inside a bigger program."""
    from mlckit.relax.expr import Attrs

    a = tir.decl_buffer((4, 4), "float32", name="A")
    region = tir.BufferRegion(a, [tir.Range(0, 4), tir.Range(0, 2)])
    c = relax.Var("c", relax.TensorStructInfo((), "bool"))
    x = relax.Var("x", relax.TensorStructInfo((2,), "float32"))
    s = relax.Var("s", relax.ObjectStructInfo())
    memory = relax.op.memory
    return {
        "Attrs": Attrs({"axis": 1}),
        "Range": tir.Range(0, 4),
        "IterVar": tir.IterVar(tir.Range(0, 4), tir.Var("i", "int32"), tir.IterVar.DataPar),
        "BufferRegion": region,
        "MatchBufferRegion": tir.MatchBufferRegion(tir.decl_buffer((4, 2), name="B"), region),
        "ExternFunc": relax.ExternFunc("my_func"),
        "DataTypeImm": relax.DataTypeImm("float32"),
        "ObjectStructInfo": relax.ObjectStructInfo(),
        "PrimStructInfo": relax.PrimStructInfo("int64"),
        "ShapeStructInfo": relax.ShapeStructInfo(ndim=2),
        "TupleStructInfo": relax.TupleStructInfo([x.struct_info, relax.ShapeStructInfo([2])]),
        "If": relax.If(c, x, x),
        "alloc_storage": memory.alloc_storage(relax.ShapeExpr([8]), 0, "global", "uint8"),
        "alloc_tensor": memory.alloc_tensor(s, 0, relax.ShapeExpr([2]), "float32"),
        "kill_storage": memory.kill_storage(s),
        "kill_tensor": memory.kill_tensor(x),
    }


@pytest.mark.parametrize("kind", list(_small_nodes()))
def test_every_small_node_prints_and_draws(kind):
    node = _small_nodes()[kind]
    text = node.script()
    assert text and repr(node) == text
    assert viz.graph(node).source.startswith("digraph")
    assert "<pre" in viz.html(node)


def test_counts_in_a_module_picture_are_singular_for_one():
    from mlckit.viz.module_graph import module_picture

    labels = " ".join(node.label for node in module_picture(MyModuleLegacy).nodes.values())
    assert "1 block, 2 loops" in labels  # relu0
    assert "1 blocks" not in labels
    assert [viz.style.counted(n, "binding") for n in (0, 1, 2)] == [
        "0 bindings",
        "1 binding",
        "2 bindings",
    ]


def test_a_graph_shows_itself_as_an_image_in_a_notebook():
    bundle = viz.graph(tir.Max(tir.Var("i", "int32"), 0))._repr_mimebundle_()
    if viz.dot_program() is None:
        pytest.skip("no Graphviz dot program")
    assert set(bundle) == {"image/svg+xml", "text/html"}
    assert bundle["text/html"].count("<img ") == 1 and "<svg" not in bundle["text/html"]
    assert viz.embed.embedded_svgs(bundle["text/html"]) == [bundle["image/svg+xml"]]
    only_svg = viz.graph(tir.Var("i", "int32"))._repr_mimebundle_(exclude=["text/html"])
    assert set(only_svg) == {"image/svg+xml"}
