"""The losses nll_loss and cross_entropy_with_logits: struct info for each layout and
reduction (static, symbolic, rank-only), the errors for bad shapes, dtypes and reductions,
and the TVMScript round trip. Their numerics vs torch after LegalizeOps are cases of
tests/relax/transform/test_legalize_ops.py."""

import numpy as np
import pytest
from op_helpers import assert_rank_only, assert_tensor, infer, m, n, raises, var

import mlckit
from mlckit import relax
from mlckit.errors import StructInfoError, VMError
from mlckit.script import from_source

nn = relax.op.nn


@pytest.mark.parametrize(
    ("pred", "targets", "losses"),
    [
        ((n, 10), (n,), (n,)),
        ((n, 4, 5, m), (n, 5, m), (n, 5, m)),
        ((4,), (), ()),
    ],
)
def test_nll_loss_gives_one_loss_per_example_or_a_scalar(pred, targets, losses):
    p, t = var("p", pred, "float16"), var("t", targets, "int64")
    w = var("w", (pred[0] if len(pred) == 1 else pred[1],), "float16")
    assert_tensor(infer(nn.nll_loss(p, t, w, reduction="none")), losses, "float16")
    for reduction in ("mean", "sum"):
        assert_tensor(infer(nn.nll_loss(p, t, reduction=reduction)), (), "float16")
        assert_tensor(infer(nn.nll_loss(p, t, w, reduction)), (), "float16")


def test_nll_loss_with_unknown_shapes():
    p = relax.Var("p", relax.TensorStructInfo(None, "float32", 3))
    t = relax.Var("t", relax.TensorStructInfo(None, "int64", 2))
    assert_rank_only(infer(nn.nll_loss(p, t, reduction="none")), 2)
    assert_tensor(infer(nn.nll_loss(p, t)), ())
    # The losses take the targets' shape when the predictions' is unknown.
    assert_tensor(infer(nn.nll_loss(p, var("t", (n, 7), "int32"), reduction="none")), (n, 7))


def test_nll_loss_call_has_two_or_three_arguments_and_ordered_attrs():
    p, t, w = var("p", (2, 3)), var("t", (2,), "int64"), var("w", (3,))
    call = nn.nll_loss(p, t)
    assert len(call.args) == 2
    assert list(call.attrs.keys()) == ["reduction", "ignore_index"]
    assert (call.attrs.reduction, call.attrs.ignore_index) == ("mean", -100)
    assert len(nn.nll_loss(p, t, w, "sum", 0).args) == 3
    raises(relax.Call(call.op, [p]), "relax.nn.nll_loss", "takes 2 or 3 arguments")


@pytest.mark.parametrize(
    ("pred", "targets", "weights", "fragments"),
    [
        ((8, 10), (9,), (10,), ("p has shape (8, 10) and t has shape (9,)", "9 vs 8")),
        ((8, 10, 3), (8, 4), (10,), ("without the class axis 1, (8, 3)", "4 vs 3")),
        ((8, 10), (8, 1), (10,), ("t has shape (8, 1)", "(N, C, d1, ...) with targets")),
        ((10,), (1,), (10,), ("p has shape (10,) and t has shape (1,)", "0-d target")),
        ((), (), (10,), ("p has shape ()", "it needs predictions (C,)")),
        ((8, 10), (8,), (9,), ("w has shape (9,)", "p has shape (8, 10), so C = 10")),
        ((8, 10), (8,), (10, 1), ("one value per class", "w has shape (10, 1)")),
        ((n, 10), (n + 1,), (10,), ("n + 1 vs n",)),
    ],
)
def test_nll_loss_shape_errors_name_the_shapes(pred, targets, weights, fragments):
    p, t, w = var("p", pred), var("t", targets, "int64"), var("w", weights)
    raises(nn.nll_loss(p, t, w), "relax.nn.nll_loss", *fragments)


def test_nll_loss_dtype_and_reduction_errors():
    p, t = var("p", (8, 10)), var("t", (8,), "int64")
    raises(nn.nll_loss(p, var("f", (8,))), "class indices", "integer dtype", "float32")
    raises(nn.nll_loss(var("i", (8, 10), "int32"), t), "floating-point", "int32")
    raises(nn.nll_loss(p, t, var("w", (10,), "float16")), "dtypes differ", "float16")
    with pytest.raises(StructInfoError, match="reduction must be one of 'mean', 'sum', 'none'"):
        nn.nll_loss(p, t, reduction="average")
    with pytest.raises(StructInfoError, match="ignore_index must be an integer"):
        nn.nll_loss(p, t, ignore_index=0.5)


def test_cross_entropy_with_logits_is_a_scalar():
    for shape in ((n, 10), (10,)):
        p, y = var("p", shape, "float16"), var("y", shape, "float16")
        assert_tensor(infer(nn.cross_entropy_with_logits(p, y)), (), "float16")
    raises(
        nn.cross_entropy_with_logits(var("p", (8, 10)), var("y", (8, 9))),
        "relax.nn.cross_entropy_with_logits",
        "same shape",
        "p has shape (8, 10) and y has shape (8, 9)",
    )
    raises(nn.cross_entropy_with_logits(var("p", (8, 10)), var("y", (10,))), "same shape")
    raises(nn.cross_entropy_with_logits(var("p", (2, 8, 10)), var("y", (2, 8, 10))), "(N, C)")
    raises(nn.cross_entropy_with_logits(var("p", (10,)), var("y", (10,), "int64")), "floating")


def test_round_trip_through_tvmscript():
    p, t, w = var("p", (n, 10)), var("t", (n,), "int64"), var("w", (10,))
    bb = relax.BlockBuilder()
    with bb.function("main", [p, t, w]):
        with bb.dataflow():
            a = bb.emit(nn.nll_loss(p, t))
            b = bb.emit(nn.nll_loss(p, t, w, reduction="none", ignore_index=3))
            c = bb.emit(nn.cross_entropy_with_logits(p, p))
            gv = bb.emit_output(relax.Tuple([a, b, c]))
        bb.emit_func_output(gv)
    mod = bb.get()
    text = mod.script()
    for fragment in (
        'R.nn.nll_loss(p, t, reduction="mean", ignore_index=-100)',
        'R.nn.nll_loss(p, t, w, reduction="none", ignore_index=3)',
        "R.nn.cross_entropy_with_logits(p, p)",
    ):
        assert fragment in text, text
    mlckit.ir.assert_structural_equal(from_source(text), mod)


def test_an_ignored_target_is_never_read_and_an_out_of_range_one_is_an_error():
    p, t = var("p", (n, 4)), var("t", (n,), "int64")
    bb = relax.BlockBuilder()
    with bb.function("main", [p, t]):
        with bb.dataflow():
            gv = bb.emit_output(nn.nll_loss(p, t, reduction="sum"))
        bb.emit_func_output(gv)
    mod = relax.transform.LegalizeOps()(bb.get())
    vm = relax.VirtualMachine(relax.build(mod, "llvm"))
    pred = np.arange(12, dtype="float32").reshape(3, 4)
    # -100 (ignore_index) would index outside the predictions: the kernel must not read it.
    got = vm["main"](pred, np.array([1, -100, 3], "int64")).numpy()
    assert got == -(1 + 11)
    with pytest.raises(VMError, match="outside p"):
        vm["main"](pred, np.array([1, 4, 3], "int64"))
