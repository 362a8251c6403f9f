"""ExprMutator / PyExprMutator: the course's rewrites, written the way the course writes them."""

from __future__ import annotations

import pytest

import mlckit as tvm
from mlckit import relax
from mlckit.errors import MLCError
from mlckit.ir import Op, assert_structural_equal
from mlckit.script import ir as I
from mlckit.script import relax as R


@I.ir_module
class MyModule:
    @R.function
    def main(x: R.Tensor((3, 4), "float32"), y: R.Tensor((3, 4), "float32")):
        with R.dataflow():
            lv0 = R.multiply(x, y)
            gv0 = R.add(lv0, y)
            R.output(gv0)
        return gv0


@relax.expr_functor.mutator
class EwiseFMARewriter(relax.PyExprMutator):
    def visit_call_(self, call):
        call = self.visit_expr_post_order(call)
        add_op = tvm.ir.Op.get("relax.add")
        multiply_op = tvm.ir.Op.get("relax.multiply")
        ewise_fma_op = tvm.ir.Op.get("relax.ewise_fma")
        if call.op != add_op:
            return call
        value = self.lookup_binding(call.args[0])
        if not isinstance(value, relax.Call) or value.op != multiply_op:
            return call
        return relax.Call(ewise_fma_op, [value.args[0], value.args[1], call.args[1]], None, None)


def test_ewise_fma_rewrite_then_remove_unused():
    updated = EwiseFMARewriter().visit_expr(MyModule["main"])
    bindings = updated.body.blocks[0].bindings
    assert [b.value.op.name for b in bindings] == ["relax.multiply", "relax.ewise_fma"]
    assert [int(d) for d in bindings[1].var.struct_info.shape.values] == [3, 4]
    cleaned = relax.analysis.remove_all_unused(updated)

    @R.function
    def expected(x: R.Tensor((3, 4), "float32"), y: R.Tensor((3, 4), "float32")):
        with R.dataflow():
            gv0 = R.ewise_fma(x, y, y)
            R.output(gv0)
        return gv0

    assert_structural_equal(
        cleaned.without_attr("global_symbol"), expected.without_attr("global_symbol")
    )
    # The input is untouched: rewrites build new nodes.
    assert MyModule["main"].body.blocks[0].bindings[1].value.op == Op.get("relax.add")


def test_unchanged_program_is_returned_as_is():
    func = MyModule["main"]
    assert relax.PyExprMutator().visit_expr(func) is func


def test_changed_struct_info_gives_new_variables_and_later_uses_follow():
    @relax.expr_functor.mutator
    class MultiplyToMatmulT(relax.PyExprMutator):
        def visit_call_(self, call):
            call = self.visit_expr_post_order(call)
            if call.op == Op.get("relax.multiply"):
                return relax.op.matmul(call.args[0], relax.op.permute_dims(call.args[1]))
            return call

    @R.function
    def f(x: R.Tensor((3, 4), "float32"), y: R.Tensor((3, 4), "float32")):
        with R.dataflow():
            lv0 = R.multiply(x, y)
            gv0 = R.sum(lv0)
            R.output(gv0)
        return gv0

    new = MultiplyToMatmulT().visit_expr(f)
    bindings = [b for block in new.body.blocks for b in block.bindings]
    product = next(b for b in bindings if b.value.op == Op.get("relax.matmul"))
    assert [int(d) for d in product.var.struct_info.shape.values] == [3, 3]
    total = bindings[-1]
    assert total.value.args[0] is product.var


def test_builder_collects_new_functions_like_the_course_fusor():
    @relax.expr_functor.mutator
    class Outline(relax.PyExprMutator):
        def __init__(self, mod):
            super().__init__()
            self.mod_ = mod

        def transform(self):
            for gv, func in self.mod_.functions.items():
                self.builder_.update_func(gv, self.visit_expr(func))
            return self.builder_.get()

        def visit_call_(self, call):
            call = self.visit_expr_post_order(call)
            if call.op != Op.get("relax.add"):
                return call
            a = relax.Var("a", call.args[0].struct_info)
            b = relax.Var("b", call.args[1].struct_info)
            bb = relax.BlockBuilder()
            with bb.function("add_fn", [a, b]):
                with bb.dataflow():
                    out = bb.emit_output(relax.op.add(a, b))
                bb.emit_func_output(out)
            fn = bb.get()["add_fn"].with_attr("Primitive", 1)
            gv = self.builder_.add_func(fn, "add_fn")
            return relax.Call(gv, [call.args[0], call.args[1]], None, None)

    out = Outline(MyModule).transform()
    assert sorted(gv.name_hint for gv in out.get_global_vars()) == ["add_fn", "main"]
    assert out["add_fn"].attrs["Primitive"] == 1
    call = out["main"].body.blocks[0].bindings[1].value
    assert isinstance(call.op, relax.GlobalVar) and call.op.name_hint == "add_fn"
    assert relax.analysis.well_formed(out)


def test_decorators_reject_non_mutators():
    with pytest.raises(MLCError, match="subclass of relax.PyExprMutator"):
        relax.expr_functor.mutator(type("NotAMutator", (), {}))
