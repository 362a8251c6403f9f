"""The adjoint Gradient makes is drawn in a forward and a backward part: which binding goes where
(the result's dependencies are forward, the rest backward), how each part looks in the DOT
source, and that every other function is drawn as before."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

import pytest

import mlckit
from mlckit import relax
from mlckit.ir.instrument import PassTracer
from mlckit.ir.transform import PassContext
from mlckit.script import relax as R
from mlckit.testing.examples import mlp_with_nll_loss

viz = pytest.importorskip("mlckit.viz")
style = pytest.importorskip("mlckit.viz.style")

needs_dot = pytest.mark.skipif(viz.dot_program() is None, reason="no Graphviz dot program")

F32 = "float32"
FORWARD_FILL = style.ADJOINT_PARTS["forward"][1]
BACKWARD_FILL = style.ADJOINT_PARTS["backward"][1]


def small_adjoint() -> mlckit.IRModule:
    """``sum((a + b) * b)`` and its adjoint (the module docstring's worked example)."""
    a, b = relax.Var("a", R.Tensor((3,), F32)), relax.Var("b", R.Tensor((3,), F32))
    bb = relax.BlockBuilder()
    with bb.function("main", [a, b]):
        with bb.dataflow():
            lv = bb.emit(relax.op.add(a, b))
            lv1 = bb.emit(relax.op.multiply(lv, b))
            gv = bb.emit_output(relax.op.sum(lv1))
        bb.emit_func_output(gv)
    return relax.transform.Gradient("main")(bb.get())


def mlp_adjoint(sizes=(784, 128, 64, 10), batch=50) -> mlckit.IRModule:
    """A three-layer MLP ending in log_softmax + nll_loss, and its adjoint for the weights."""
    mod = mlp_with_nll_loss(batch, sizes)
    weights = mod["main"].params[1:-1]
    return relax.transform.Gradient("main", require_grads=weights)(mod)


def binding_names(func) -> list[str]:
    return [b.var.name_hint for block in func.body.blocks for b in block.bindings]


def subgraph(source: str, name: str) -> str:
    """The text of DOT subgraph ``name``, up to its closing brace."""
    start = source.index(f"subgraph {name} {{")
    depth = 0
    for end in range(start, len(source)):
        depth += {"{": 1, "}": -1}.get(source[end], 0)
        if source[end] == "}" and depth == 0:
            return source[start:end]
    raise AssertionError(f"{name} is not closed")


def node_fill(source: str, node_id: str) -> str:
    match = re.search(rf"^\s*{node_id} \[.*fillcolor=\"([^\"]+)\"", source, re.MULTILINE)
    assert match, node_id
    return match.group(1)


def test_small_adjoint_parts_in_the_dot_source():
    source = viz.graph(small_adjoint(), function="main_adjoint").source
    forward, backward = (
        subgraph(source, "cluster_forward_0"),
        subgraph(source, "cluster_backward_0"),
    )
    assert "<b>forward</b>" in forward and "<b>backward</b>" in backward
    for name in ["lv", "lv1", "gv"]:
        assert f"\tv_{name} [" in forward and f"\tv_{name} [" not in backward
        assert node_fill(source, f"v_{name}") == FORWARD_FILL
    backward_names = ["gv_adjoint", "lv1_adjoint", "lv_adjoint", "b_adjoint", "b_adjoint1"]
    for name in [*backward_names, "a_adjoint_out", "b_adjoint_out"]:
        assert f"\tv_{name} [" in backward and f"\tv_{name} [" not in forward
        assert node_fill(source, f"v_{name}") == BACKWARD_FILL
    # lv, a forward value, is what the backward part keeps: b_adjoint = lv1_adjoint * lv.
    kept = [line for line in source.splitlines() if style.KEPT_FOR_BACKWARD["color"] in line]
    assert len(kept) == 1 and "v_lv -> v_b_adjoint " in kept[0] and "dashed" in kept[0]
    # The seed is laid out after the result, not beside the forward part.
    assert re.search(r"v_gv -> v_gv_adjoint \[style=invis\]", source)


def test_parts_follow_the_result_not_the_names():
    adjoint = mlp_adjoint()["main_adjoint"]
    picture = viz.picture(adjoint)
    parts = {
        node_id: node.cluster for node_id, node in picture.nodes.items() if node_id[:2] == "v_"
    }
    forward = {n for n, c in parts.items() if c == "cluster_forward_0"}
    # Exactly the original function's bindings compute the result.
    original = mlp_adjoint()["main"]
    assert forward == {f"v_{name}" for name in binding_names(original)}
    assert set(parts.values()) == {"cluster_forward_0", "cluster_backward_0"}
    # Masks nll_loss's gradient computes from the labels alone never see the seed, and are
    # backward all the same: only the gradients need them.
    labels_only = [
        b.var.name_hint
        for b in adjoint.body.blocks[0].bindings
        if [v.name_hint for v in relax.analysis.used_vars(b.value)] == ["labels"]
    ]
    assert labels_only and all(parts[f"v_{name}"] == "cluster_backward_0" for name in labels_only)


def test_zeros_for_an_unused_parameter_are_backward():
    x, y = relax.Var("x", R.Tensor((3,), F32)), relax.Var("y", R.Tensor((3,), F32))
    bb = relax.BlockBuilder()
    with bb.function("main", [x, y]):
        with bb.dataflow():
            gv = bb.emit_output(relax.op.sum(relax.op.exp(x)))
        bb.emit_func_output(gv)
    mod = relax.transform.Gradient("main")(bb.get())
    picture = viz.picture(mod, function="main_adjoint")
    assert picture.nodes["v_y_adjoint_out"].cluster == "cluster_backward_0"
    assert picture.nodes["v_gv"].cluster == "cluster_forward_0"


def test_other_functions_draw_as_before():
    mod = small_adjoint()
    for picture in [
        viz.picture(mod, function="main"),
        viz.picture(mod, function="main_adjoint", backward=False),
        viz.picture(mod["main"], legend=True),
    ]:
        assert set(picture.clusters) == {"cluster_dataflow_0"}
        fills = {node.attrs.get("fillcolor") for node in picture.nodes.values()}
        assert FORWARD_FILL not in fills and BACKWARD_FILL not in fills
        assert all(attrs.get("style") != "invis" for _, _, attrs in picture.edges)
        assert "computes the gradients" not in picture.graph_attrs.get("label", "")


def test_named_adjoint_without_a_pair_is_an_ordinary_function():
    @R.function
    def step_adjoint(x: R.Tensor((3,), "float32")):
        with R.dataflow():
            y = R.exp(x)
            R.output(y)
        return y

    assert set(viz.picture(step_adjoint).clusters) == {"cluster_dataflow_0"}
    with pytest.raises(mlckit.MLCError, match=r"backward=True .*step_adjoint returns f32\[3\]"):
        viz.picture(step_adjoint, backward=True)


def test_backward_true_draws_a_renamed_adjoint():
    adjoint = small_adjoint()["main_adjoint"].without_attr("global_symbol")
    assert set(viz.picture(adjoint).clusters) == {"cluster_dataflow_0"}
    drawn = viz.picture(adjoint, backward=True)
    assert {"cluster_forward_0", "cluster_backward_0"} <= set(drawn.clusters)


def test_legend_keys_the_parts():
    label = viz.picture(small_adjoint(), function="main_adjoint", legend=True).graph_attrs["label"]
    assert "forward: computes the result" in label and "backward: computes the gradients" in label
    assert "a forward value the backward part reads" in label
    assert "reduction" not in label  # the op patterns' key is not shown


def test_fused_adjoint_keeps_its_parts():
    tracer = PassTracer()
    with PassContext(instruments=[tracer]):
        relax.get_pipeline("default")(small_adjoint())
    fused = {r.name: r for r in tracer.leaf_records()}["FuseOps"].after
    picture = viz.picture(fused, function="main_adjoint", expand_fused=True)
    by_part = {node.attrs.get("fillcolor") for node in picture.nodes.values()}
    assert {FORWARD_FILL, BACKWARD_FILL} <= by_part
    # Nodes drawn inside a fused call take their call's part.
    inner = [n for n in picture.nodes.values() if (n.cluster or "").startswith("cluster_fused")]
    assert inner and all(n.attrs["fillcolor"] in (FORWARD_FILL, BACKWARD_FILL) for n in inner)


@needs_dot
def test_mlp_adjoint_renders():
    text = viz.svg(mlp_adjoint(), function="main_adjoint", legend=True)
    assert text is not None
    ET.fromstring(text)
    assert ">backward<" in text and ">forward<" in text
