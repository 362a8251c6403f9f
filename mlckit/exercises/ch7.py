"""Chapter 7, computational graph optimization: rewriting a relax function with a
``PyExprMutator``, fusing operators into ``Primitive`` sub-functions, and finishing a
hand-made fusion with the library's passes.

The programs the exercises start from are defined here (``MulByTwoModule``,
``AddReluModule``, ``GroupedMLP``) so that the chapter and the checkers share them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from mlckit import relax
from mlckit.errors import MLCError
from mlckit.ir import IRModule, transform
from mlckit.ir.module import GlobalVar
from mlckit.ir.op import Op
from mlckit.relax.analysis import remove_all_unused, used_vars
from mlckit.script import ir as I
from mlckit.script import relax as R
from mlckit.tir import PrimFunc
from mlckit.tir.stmt import Block
from mlckit.tir.stmt_functor import StmtExprVisitor

from .checks import assert_close, program_diff, random_inputs
from .core import Mismatch, exercise
from .solutions import ch7 as reference

# --------------------------------------------------------------------------- the programs


@I.ir_module
class MulByTwoModule:
    @R.function
    def main(x: R.Tensor((4, 8), "float32"), y: R.Tensor((4, 8), "float32")) -> R.Tensor(
        (4, 8), "float32"
    ):
        with R.dataflow():
            lv0 = R.multiply(x, R.const(2.0, "float32"))
            lv1 = R.multiply(lv0, y)
            lv2 = R.multiply(lv1, R.const(3.0, "float32"))
            gv = R.multiply(lv2, R.const(2.0, "float32"))
            R.output(gv)
        return gv


@I.ir_module
class AddReluModule:
    @R.function
    def main(
        x: R.Tensor((4, 8), "float32"),
        y: R.Tensor((4, 8), "float32"),
        z: R.Tensor((8,), "float32"),
    ) -> R.Tensor((4, 8), "float32"):
        with R.dataflow():
            lv0 = R.add(x, y)
            lv1 = R.nn.relu(lv0)
            lv2 = R.multiply(lv1, y)
            lv3 = R.nn.relu(lv2)
            lv4 = R.add(lv3, z)
            gv = R.nn.relu(lv4)
            R.output(gv)
        return gv


@I.ir_module
class GroupedMLP:
    @R.function
    def fused_dense_add0(
        x: R.Tensor((2, 16), "float32"),
        w: R.Tensor((8, 16), "float32"),
        b: R.Tensor((8,), "float32"),
    ) -> R.Tensor((2, 8), "float32"):
        R.func_attr({"Primitive": 1})
        with R.dataflow():
            lv = R.nn.dense(x, w)
            gv = R.add(lv, b)
            R.output(gv)
        return gv

    @R.function
    def fused_dense_add1(
        x: R.Tensor((2, 8), "float32"),
        w: R.Tensor((4, 8), "float32"),
        b: R.Tensor((4,), "float32"),
    ) -> R.Tensor((2, 4), "float32"):
        R.func_attr({"Primitive": 1})
        with R.dataflow():
            lv = R.nn.dense(x, w)
            gv = R.add(lv, b)
            R.output(gv)
        return gv

    @R.function
    def main(
        x: R.Tensor((2, 16), "float32"),
        w0: R.Tensor((8, 16), "float32"),
        b0: R.Tensor((8,), "float32"),
        w1: R.Tensor((4, 8), "float32"),
        b1: R.Tensor((4,), "float32"),
    ) -> R.Tensor((2, 4), "float32"):
        cls = GroupedMLP
        with R.dataflow():
            lv1 = cls.fused_dense_add0(x, w0, b0)
            lv2 = R.nn.relu(lv1)
            gv = cls.fused_dense_add1(lv2, w1, b1)
            R.output(gv)
        return gv


# --------------------------------------------------------------------------- helpers


def _bindings(func: relax.Function) -> list[relax.VarBinding]:
    return [b for block in func.body.blocks for b in block.bindings]


def _callee(value: Any) -> str | None:
    """What a bound value calls: an operator's name, a function's name, or None."""
    if not isinstance(value, relax.Call):
        return None
    if isinstance(value.op, Op):
        return value.op.name
    if isinstance(value.op, GlobalVar):
        return value.op.name_hint
    return None


def _line(binding: relax.VarBinding) -> str:
    return f"{binding.var.name_hint} = {binding.value!r}"


def _is_constant(expr: Any, value: float) -> bool:
    if not isinstance(expr, relax.Constant):
        return False
    data = expr.data.numpy()
    return data.shape == () and float(data) == value


def _run(mod: IRModule, inputs: Sequence[np.ndarray]) -> np.ndarray:
    """``mod["main"](*inputs)`` on the reference interpreter (small programs: no compiling)."""
    lowered = relax.transform.LegalizeOps()(mod)
    vm = relax.VirtualMachine(relax.build(lowered, target="python"))
    return vm["main"](*inputs).numpy()


def _as_passes(answer: Any) -> list[transform.Pass]:
    """The passes an answer stands for: a Pass, a Sequential, or a list of passes."""
    listed = isinstance(answer, (list, tuple))
    items = list(answer) if listed else [answer]
    for index, item in enumerate(items):
        if isinstance(item, transform.Pass):
            continue
        what = f"item {index} of your answer" if listed else "your answer"
        mutator = isinstance(item, relax.PyExprMutator) or (
            isinstance(item, type) and issubclass(item, relax.PyExprMutator)
        )
        name = getattr(item, "__name__", None)
        if mutator:
            raise Mismatch(
                f"{what} is a mutator, not a pass",
                "wrap it in a class decorated with @mlckit.ir.transform.module_pass (as "
                "FuseDenseAddPass wraps DenseAddFusor) and give an instance of that class",
            )
        if callable(item) and name:
            raise Mismatch(
                f"{what} is {name}, which makes a pass, not a pass itself",
                f"call it: {name}()",
            )
        raise Mismatch(
            f"{what} has type {type(item).__name__}, not a pass",
            "give passes, such as relax.transform.LegalizeOps() or an instance of a class "
            "decorated with @mlckit.ir.transform.module_pass",
        )
    return items


def _flat_names(passes: Sequence[transform.Pass]) -> list[str]:
    names: list[str] = []
    for p in passes:
        if isinstance(p, transform.Sequential):
            names += _flat_names(p.passes)
        else:
            names.append(p.info.name)
    return names


def _apply(passes: Sequence[transform.Pass], mod: IRModule) -> IRModule:
    # Each pass is called directly: a Sequential would skip passes above the context's
    # opt_level, silently.
    result = mod
    for p in passes:
        result = p(result)
    if not isinstance(result, IRModule) or "main" not in result:
        raise Mismatch(
            "your pass did not give back an IRModule with the function main",
            "transform_module must return the new module, e.g. self.builder_.get()",
        )
    return result


def _block_count(func: PrimFunc) -> int:
    names: list[str] = []

    class Blocks(StmtExprVisitor):
        def visit_block_(self, block: Block) -> None:
            if block.name_hint != "root":
                names.append(block.name_hint)
            self.generic_visit(block)

    Blocks().visit(func.body)
    return len(names)


# --------------------------------------------------------------------------- exercises


@exercise(
    "ch7.mul_by_two",
    title="Multiplying by two becomes an addition",
    task="""
    `x * 2` and `x + x` compute the same thing, and an addition is cheaper than a
    multiplication on many processors: compilers make this swap ("strength reduction") as a
    graph rewrite. Write a `relax.PyExprMutator` (decorated with
    `@relax.expr_functor.mutator`) whose `visit_call_` turns every `R.multiply(a, c)`,
    where `c` is the scalar constant 2, into `R.add(a, a)` and leaves every other call as it
    is. `MulByTwoModule` (in `mlckit.exercises.ch7`) multiplies by 2 twice, by 3 once and by
    a tensor once. The answer is your mutator class; the check applies it to
    `MulByTwoModule["main"]`, looks for what is left, and runs both programs on random
    inputs.
    """,
    hints=(
        "Start from EwiseFMARewriter: visit the arguments first "
        "(`call = self.visit_expr_post_order(call)`), then look at `call.op` and "
        "`call.args`.",
        "A constant operand is a `relax.Constant`; its value is `c.data.numpy()` (a numpy "
        "array of shape () for a scalar). Check both that it is a constant and that it is 2.",
        "If `call.op == mlckit.ir.Op.get('relax.multiply')` and `call.args[1]` is a scalar "
        "`relax.Constant` equal to 2, return `relax.op.add(call.args[0], call.args[0])`; "
        "otherwise return `call`.",
    ),
    solution=reference.mul_by_two,
)
def check_mul_by_two(answer: Any) -> None:
    if isinstance(answer, type) and issubclass(answer, relax.PyExprMutator):
        mutator = answer()
    elif isinstance(answer, relax.PyExprMutator):
        mutator = answer
    else:
        raise Mismatch(
            f"expected your mutator class, got {type(answer).__name__}",
            "pass the class decorated with @relax.expr_functor.mutator (without calling "
            "visit_expr)",
        )
    original = MulByTwoModule["main"]
    rewritten = mutator.visit_expr(original)
    if not isinstance(rewritten, relax.Function):
        raise Mismatch(
            f"visit_expr gave back a {type(rewritten).__name__}, not a relax.Function",
            "visit_call_ must return an expression (the call, or the call that replaces it)",
        )
    rewritten = remove_all_unused(rewritten)
    target = remove_all_unused(reference.mul_by_two()().visit_expr(original))
    diff = program_diff(rewritten, target)
    bindings = _bindings(rewritten)
    by_two = [
        b
        for b in bindings
        if _callee(b.value) == "relax.multiply" and any(_is_constant(a, 2.0) for a in b.value.args)
    ]
    if by_two:
        raise Mismatch(
            f"your function still multiplies by the constant 2: `{_line(by_two[0])}`",
            "visit_call_ must return R.add(a, a) in place of a multiply by 2: look at call.op "
            "and call.args[1]"
            if len(by_two) == 2
            else "your rewrite caught one multiply by 2 but not this one: compare the two",
            diff,
        )
    kept = [b.value for b in bindings if _callee(b.value) == "relax.multiply"]
    by_three = any(_is_constant(v.args[1], 3.0) for v in kept)
    by_tensor = any(isinstance(v.args[1], relax.Var) for v in kept)
    if not by_three and not by_tensor:
        raise Mismatch(
            "you rewrote every multiply; only the multiplies by the constant 2 should change",
            "check that the second operand is a relax.Constant and that its value is 2",
            diff,
        )
    if not by_three:
        raise Mismatch(
            "you rewrote the multiply by the constant 3 too (`lv2 = R.multiply(lv1, "
            'R.const(3.0, "float32"))`)',
            "check the constant's value (`c.data.numpy()`), not only that it is a constant",
            diff,
        )
    if not by_tensor:
        raise Mismatch(
            "you rewrote `lv1 = R.multiply(lv0, y)` too, whose second operand is the tensor y, "
            "not the constant 2",
            "check `isinstance(call.args[1], relax.Constant)` before reading its value",
            diff,
        )
    doubles = [
        b
        for b in bindings
        if _callee(b.value) == "relax.add" and b.value.args[0].same_as(b.value.args[1])
    ]
    if len(doubles) != 2:
        raise Mismatch(
            f"your function has {len(doubles)} additions of a value to itself; the two "
            "multiplies by 2 should each become one, `R.add(a, a)`",
            "return relax.op.add(a, a) with a = call.args[0]",
            diff,
        )
    x, y = random_inputs([(4, 8), (4, 8)])
    assert_close(_run(IRModule({"main": rewritten}), [x, y]), x * 2 * y * 3 * 2, "main's result")


@exercise(
    "ch7.fuse_add_relu",
    title="Fuse add and relu into a Primitive function",
    task="""
    Write a module pass, modelled on `FuseDenseAddPass`, that finds `R.nn.relu(R.add(a, b))`
    and replaces the pair by a call into a new sub-function `fused_add_relu<i>(a, b)` marked
    `Primitive`, whose body computes the add and then the relu. `AddReluModule` (in
    `mlckit.exercises.ch7`) has two such pairs, and a relu of a multiply that must stay as it
    is. The answer is your pass (an instance of the class decorated with
    `@mlckit.ir.transform.module_pass`); the check runs it on `AddReluModule`, inspects `main`
    and the new functions, lowers the result with `LegalizeOps` and `FuseTIR`, and runs it on
    random inputs.
    """,
    hints=(
        "Copy DenseAddFusor and FuseDenseAddPass and change the pattern: the outer call is "
        "now `relax.nn.relu` (one argument), the inner one `relax.add`.",
        "In visit_call_: if the call is a relu, `value = self.lookup_binding(call.args[0])` "
        "is what its argument is bound to; fuse only when that is a call of `relax.add`. "
        "The new function takes the add's two arguments.",
        "Build the sub-function with a BlockBuilder: params `relax.Var('a', a.struct_info)`, "
        "`relax.Var('b', b.struct_info)`; emit `relax.op.add(pa, pb)`, then "
        "`emit_output(relax.op.nn.relu(lv))`; add it with "
        "`self.builder_.add_func(fn.with_attr('Primitive', 1), name)` and return "
        "`relax.Call(global_var, [a, b], None, None)`; remove_all_unused in transform().",
    ),
    solution=reference.fuse_add_relu,
)
def check_fuse_add_relu(answer: Any) -> None:
    result = _apply(_as_passes(answer), AddReluModule)
    target = _apply([reference.fuse_add_relu()], AddReluModule)
    diff = program_diff(result, target)
    main = result["main"]
    bindings = _bindings(main)
    bound = {b.var: b.value for b in bindings}
    relus = [b for b in bindings if _callee(b.value) == "relax.nn.relu"]
    for binding in relus:
        if _callee(bound.get(binding.value.args[0])) == "relax.add":
            raise Mismatch(
                f"main still computes a relu of an add: `{_line(binding)}`",
                "match relu calls whose argument is bound to an add: "
                "self.lookup_binding(call.args[0]) gives the argument's value",
                diff,
            )
    if not any(_callee(bound.get(b.value.args[0])) == "relax.multiply" for b in relus):
        raise Mismatch(
            "`lv3 = R.nn.relu(lv2)` is gone, but lv2 is a multiply, not an add: "
            "that relu must stay",
            "fuse only when the relu's argument is bound to a call of relax.add",
            diff,
        )
    calls = [b for b in bindings if isinstance(getattr(b.value, "op", None), GlobalVar)]
    if len(calls) != 2:
        raise Mismatch(
            f"main calls {len(calls)} functions of the module; each of the two "
            "relu(add) pairs should become one call into a fused function",
            "return relax.Call(global_var, [a, b], None, None) from visit_call_, where "
            "global_var = self.builder_.add_func(...)",
            diff,
        )
    for binding in calls:
        name = binding.value.op.name_hint
        func = result[name]
        if not isinstance(func, relax.Function):
            raise Mismatch(
                f"{name} is a {type(func).__name__}, not a relax function",
                "build the sub-function with relax.BlockBuilder",
            )
        if int(func.attrs.get("Primitive", 0)) != 1:
            raise Mismatch(
                f"{name} has no Primitive attribute",
                "mark it with fn.with_attr('Primitive', 1): that is how FuseTIR knows which "
                "functions to turn into one TensorIR function",
                diff,
            )
        ops = [_callee(b.value) for b in _bindings(func)]
        if ops != ["relax.add", "relax.nn.relu"] or len(func.params) != 2:
            raise Mismatch(
                f"{name} takes {len(func.params)} parameters and computes {ops}; a fused add "
                "and relu takes the add's two inputs and computes relax.add, then relax.nn.relu",
                "emit relax.op.add(pa, pb) first, then relax.op.nn.relu of its result",
                diff,
            )
    for binding in bindings:
        if _callee(binding.value) == "relax.add":
            if binding.var in used_vars(main):
                raise Mismatch(
                    f"main still uses `{_line(binding)}`",
                    "the fused function takes the add's inputs (a, b), not its result",
                    diff,
                )
            raise Mismatch(
                f"main still computes `{_line(binding)}`, which nothing uses any more",
                "drop dead bindings with relax.analysis.remove_all_unused(func), as "
                "DenseAddFusor.transform does",
                diff,
            )
    try:
        lowered = relax.transform.FuseTIR()(relax.transform.LegalizeOps()(result))
    except MLCError as err:
        raise Mismatch(
            f"your module does not lower to TensorIR: {err}",
            "a Primitive function must hold only a dataflow block of operator calls",
        ) from None
    x, y = random_inputs([(4, 8), (4, 8)])
    (z,) = random_inputs([(8,)], seed=1)
    expected = np.maximum(np.maximum(np.maximum(x + y, 0) * y, 0) + z, 0)
    assert_close(_run(lowered, [x, y, z]), expected, "main's result")


@exercise(
    "ch7.lower_and_fuse",
    title="Finish a hand-made fusion with library passes",
    task="""
    Passes compose. `FuseDenseAddPass` groups each dense with its add into a `Primitive`
    function but leaves high-level operators everywhere. Give the list of library passes
    (from `relax.transform`; not the hand-written `LowerToTensorIR`) that turns such a module
    into one whose `main` calls exactly three TensorIR kernels: dense+add, relu, dense+add.
    The check runs your passes on `GroupedMLP` (in `mlckit.exercises.ch7`: a small MLP
    grouped as `FuseDenseAddPass` groups it) and runs the result on random inputs.
    """,
    hints=(
        "Two things separate GroupedMLP from what you want: its operators are not TensorIR "
        "yet, and each Primitive function is still a relax function.",
        "One library pass lowers every operator, in every function, to a call_tir of a "
        "PrimFunc; another turns each Primitive function into a single PrimFunc.",
        "[relax.transform.LegalizeOps(), relax.transform.FuseTIR()]",
    ),
    solution=reference.lower_and_fuse,
)
def check_lower_and_fuse(answer: Any) -> None:
    passes = _as_passes(answer)
    if "LowerToTensorIR" in _flat_names(passes):
        raise Mismatch(
            "your pipeline uses the hand-written LowerToTensorIR; the exercise asks for "
            "library passes only",
            "which pass of relax.transform turns each operator into a call_tir of a PrimFunc?",
        )
    try:
        result = _apply(passes, GroupedMLP)
    except MLCError as err:
        raise Mismatch(
            f"your pipeline raised {type(err).__name__}: {err}",
            "each pass expects the module in a certain form: FuseTIR fuses functions made "
            "only of call_tir, so the operators must be lowered before it runs",
        ) from None
    diff = program_diff(result, _apply(reference.lower_and_fuse(), GroupedMLP))
    grouped = [
        gv.name_hint
        for gv, func in result.functions.items()
        if isinstance(func, relax.Function) and func.attrs.get("Primitive")
    ]
    if grouped:
        raise Mismatch(
            f"{' and '.join(sorted(grouped))} are still relax functions marked Primitive",
            "FuseTIR turns each Primitive relax function into one PrimFunc",
            diff,
        )
    main = result["main"]
    kernels: list[str] = []
    for binding in _bindings(main):
        callee = _callee(binding.value)
        if callee == "relax.call_tir":
            kernels.append(binding.value.args[0].name_hint)
        elif callee is not None:
            raise Mismatch(
                f"main still calls {callee}: `{_line(binding)}`",
                "LegalizeOps lowers each high-level operator to R.call_tir of a PrimFunc",
                diff,
            )
    blocks = [_block_count(result[name]) for name in kernels]
    if blocks != [2, 1, 2]:
        raise Mismatch(
            f"main calls {len(kernels)} kernels ({', '.join(kernels) or 'none'}) computing "
            f"{blocks} blocks; the exercise asks for three: dense+add (2 blocks), relu (1), "
            "dense+add (2)",
            "keep GroupedMLP's grouping: only FuseTIR merges kernels, one PrimFunc per "
            "Primitive function",
            diff,
        )
    x, w0, b0, w1, b1 = random_inputs([(2, 16), (8, 16), (8,), (4, 8), (4,)])
    expected = np.maximum(x @ w0.T + b0, 0) @ w1.T + b1
    assert_close(_run(result, [x, w0, b0, w1, b1]), expected, "main's result")
