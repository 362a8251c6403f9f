"""relax.analysis: remove_all_unused (the course's cleanup after a rewrite), get_var2val,
and struct-info helpers."""

from relax_helpers import assert_tensor, tensor

from mlckit import relax, tir
from mlckit.ir import IRModule, Op


def seed_rewritten_function():
    """The course's EwiseFMA rewrite result: lv0 is left over, unused."""
    x = relax.Var("x", tensor((3, 4)))
    y = relax.Var("y", tensor((3, 4)))
    bb = relax.BlockBuilder()
    with bb.function("main", [x, y]):
        with bb.dataflow():
            bb.emit(relax.op.multiply(x, y), "lv0")
            fma = relax.Call(Op.get("relax.ewise_fma"), [x, y, y])
            gv0 = bb.emit_output(fma, "gv0")
        bb.emit_func_output(gv0)
    return bb.get()["main"]


def test_remove_all_unused_drops_the_leftover_binding():
    func = seed_rewritten_function()
    assert [b.var.name_hint for b in func.body.blocks[0].bindings] == ["lv0", "gv0"]
    cleaned = relax.analysis.remove_all_unused(func)
    (block,) = cleaned.body.blocks
    assert isinstance(block, relax.DataflowBlock)
    assert [b.var.name_hint for b in block.bindings] == ["gv0"]
    assert block.bindings[0].value.op is Op.get("relax.ewise_fma")
    assert cleaned.attrs == func.attrs and cleaned.params == func.params
    assert_tensor(cleaned.ret_struct_info, (3, 4))
    assert relax.analysis.well_formed(cleaned)
    # Nothing left to remove: the same function comes back.
    assert relax.analysis.remove_all_unused(cleaned) is cleaned


def test_chains_of_unused_bindings_and_unused_outputs_go_together():
    x = relax.Var("x", tensor((4,)))
    bb = relax.BlockBuilder()
    with bb.function("main", [x]):
        with bb.dataflow():
            a = bb.emit(relax.op.exp(x))
            b = bb.emit(relax.op.exp(a))
            bb.emit_output(b)  # an output the function never reads
            keep = bb.emit(relax.op.negative(x))
            out = bb.emit_output(keep)
        kept_outside = bb.emit(relax.op.exp(x))  # outside dataflow: may have effects, kept
        bb.emit_func_output(out)
    cleaned = relax.analysis.remove_all_unused(bb.get()["main"])
    names = [[b.var.name_hint for b in blk.bindings] for blk in cleaned.body.blocks]
    assert names == [[keep.name_hint, out.name_hint], [kept_outside.name_hint]]


def test_match_cast_defining_a_used_dim_is_kept():
    k = tir.Var("k", "int64")
    x = relax.Var("x", relax.TensorStructInfo(None, "float32", ndim=1))
    bb = relax.BlockBuilder()
    with bb.function("main", [x]):
        with bb.dataflow():
            y = bb.emit_match_cast(x, tensor((k,)))
            shape_user = bb.emit(relax.op.call_dps_packed("env.f", (x,), tensor((k,))))
            out = bb.emit_output(shape_user)
        bb.emit_func_output(out)
    cleaned = relax.analysis.remove_all_unused(bb.get())
    assert isinstance(cleaned, IRModule)
    bindings = cleaned["main"].body.blocks[0].bindings
    assert isinstance(bindings[0], relax.MatchCast) and bindings[0].var is y
    assert relax.analysis.well_formed(cleaned)


def test_get_var2val_and_name_to_binding():
    func = seed_rewritten_function()
    var2val = relax.analysis.get_var2val(func)
    (lv0, gv0) = (b.var for b in func.body.blocks[0].bindings)
    assert var2val[lv0].op is Op.get("relax.multiply")
    assert var2val[gv0].op is Op.get("relax.ewise_fma")
    assert list(relax.analysis.name_to_binding(func)) == ["lv0", "gv0"]


def test_struct_info_helpers():
    n, m = tir.Var("n", "int64"), tir.Var("m", "int64")
    sinfo = relax.TensorStructInfo((n, m * 2), "float32")
    assert relax.analysis.tir_vars_in_struct_info(sinfo) == [n, m]
    assert relax.analysis.definable_tir_vars_in_struct_info(sinfo) == [n]
    lca = relax.analysis.struct_info_lca(tensor((n, 4)), tensor((n, 5)))
    assert lca.shape is None and lca.ndim == 2
    assert_tensor(relax.analysis.struct_info_lca(tensor((n, 4)), tensor((n, 4))), (n, 4))
    lca_kinds = relax.analysis.struct_info_lca(tensor((4,)), relax.ShapeStructInfo([4]))
    assert isinstance(lca_kinds, relax.ObjectStructInfo)
    substituted = relax.analysis.substitute_struct_info(tensor((n, 4)), {n: tir.IntImm("int64", 8)})
    assert_tensor(substituted, (8, 4))
