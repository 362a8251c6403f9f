"""relax.analysis.well_formed: accepts the builder's output, rejects each broken rule with a
message naming the variable and the function."""

import pytest
from relax_helpers import tensor

from mlckit import relax, tir
from mlckit.errors import WellFormedError
from mlckit.ir import IRModule

n = tir.Var("n", "int64")


def make_module(params, blocks, body, name="main", pure=True):
    seq = relax.SeqExpr(blocks, body)
    func = relax.Function(
        params, seq, body.struct_info_, is_pure=pure, attrs={"global_symbol": name}
    )
    return IRModule({name: func})


def exp(x):
    return relax.normalize(relax.op.exp(x))


def problems(mod):
    with pytest.raises(WellFormedError) as info:
        relax.analysis.well_formed(mod, raise_error=True)
    assert relax.analysis.well_formed(mod) is False
    return info.value.problems


def test_good_module_is_well_formed():
    x = relax.Var("x", tensor((n, 4)))
    lv = relax.DataflowVar("lv", tensor((n, 4)))
    gv = relax.Var("gv", tensor((n, 4)))
    mod = make_module(
        [x],
        [
            relax.DataflowBlock(
                [
                    relax.VarBinding(lv, exp(x)),
                    relax.VarBinding(gv, exp(lv)),
                ]
            )
        ],
        gv,
    )
    assert relax.analysis.well_formed(mod)
    assert relax.analysis.well_formed(mod["main"])
    assert relax.analysis.well_formed(mod, raise_error=True)


def test_undefined_variable():
    x = relax.Var("x", tensor((4,)))
    y = relax.Var("y", tensor((4,)))
    gv = relax.Var("gv", tensor((4,)))
    mod = make_module([x], [relax.BindingBlock([relax.VarBinding(gv, exp(y))])], gv)
    assert problems(mod) == ["variable y is not defined in function main (binding of gv)"]


def test_used_before_definition():
    x = relax.Var("x", tensor((4,)))
    a = relax.Var("a", tensor((4,)))
    b = relax.Var("b", tensor((4,)))
    mod = make_module(
        [x],
        [
            relax.BindingBlock(
                [
                    relax.VarBinding(b, exp(a)),
                    relax.VarBinding(a, exp(x)),
                ]
            )
        ],
        b,
    )
    assert problems(mod) == [
        "variable a is used before its definition in function main (binding of b)"
    ]


def test_dataflow_var_used_outside_its_block():
    x = relax.Var("x", tensor((4,)))
    lv = relax.DataflowVar("lv", tensor((4,)))
    mod = make_module([x], [relax.DataflowBlock([relax.VarBinding(lv, exp(x))])], lv)
    (message,) = problems(mod)
    assert message.startswith(
        "dataflow variable lv is used outside its dataflow block in function main"
    )


def test_dataflow_var_bound_outside_a_dataflow_block():
    x = relax.Var("x", tensor((4,)))
    lv = relax.DataflowVar("lv", tensor((4,)))
    gv = relax.Var("gv", tensor((4,)))
    mod = make_module(
        [x], [relax.BindingBlock([relax.VarBinding(lv, exp(x)), relax.VarBinding(gv, exp(lv))])], gv
    )
    (message,) = problems(mod)
    assert message.startswith(
        "dataflow variable lv is bound outside a dataflow block in function main"
    )


def test_impure_call_in_dataflow_block_and_in_pure_function():
    x = relax.Var("x", tensor((4,)))
    lv = relax.DataflowVar("lv", tensor((4,)))
    gv = relax.Var("gv", tensor((4,)))
    printed = relax.normalize(relax.op.call_packed("env.print", x, sinfo_args=tensor((4,))))
    mod = make_module(
        [x],
        [relax.DataflowBlock([relax.VarBinding(lv, printed), relax.VarBinding(gv, exp(lv))])],
        gv,
    )
    (message,) = problems(mod)
    assert message.startswith(
        'impure call to R.ExternFunc("env.print") inside a dataflow block '
        "in function main (binding of lv)"
    )

    v = relax.Var("v", tensor((4,)))
    outside = make_module([x], [relax.BindingBlock([relax.VarBinding(v, printed)])], v)
    assert "pure function main" in problems(outside)[0]
    impure = make_module([x], [relax.BindingBlock([relax.VarBinding(v, printed)])], v, pure=False)
    assert relax.analysis.well_formed(impure)
    # call_tir, call_dps_packed and call_pure_packed are pure.
    dps = relax.normalize(relax.op.call_dps_packed("env.f", (x,), tensor((4,))))
    w = relax.DataflowVar("w", tensor((4,)))
    g2 = relax.Var("g2", tensor((4,)))
    ok = make_module(
        [x], [relax.DataflowBlock([relax.VarBinding(w, dps), relax.VarBinding(g2, exp(w))])], g2
    )
    assert relax.analysis.well_formed(ok)


def test_symbolic_var_used_before_definition():
    m = tir.Var("m", "int64")
    x = relax.Var("x", tensor((n, 4)))
    gv = relax.Var("gv", tensor((m, 4)))
    mod = make_module([x], [relax.BindingBlock([relax.VarBinding(gv, exp(x))])], x)
    (message,) = problems(mod)
    assert message.startswith(
        "symbolic variable m is used in the struct info of variable gv "
        "before it is defined in function main"
    )


def test_match_cast_defines_symbolic_vars():
    m = tir.Var("m", "int64")
    x = relax.Var("x", relax.TensorStructInfo(None, "float32", ndim=2))
    y = relax.Var("y", tensor((m, 4)))
    z = relax.Var("z", tensor((m, 4)))
    mod = make_module(
        [x],
        [
            relax.BindingBlock(
                [
                    relax.MatchCast(y, x, tensor((m, 4))),
                    relax.VarBinding(z, exp(y)),
                ]
            )
        ],
        x,
    )
    assert relax.analysis.well_formed(mod)
    # ...but not before the match_cast.
    early = make_module(
        [x],
        [
            relax.BindingBlock(
                [
                    relax.VarBinding(z, relax.normalize(relax.op.exp(y))),
                    relax.MatchCast(y, x, tensor((m, 4))),
                ]
            )
        ],
        x,
    )
    messages = problems(early)
    assert any("symbolic variable m" in p and "variable z" in p for p in messages)


def test_variable_bound_twice():
    x = relax.Var("x", tensor((4,)))
    a = relax.Var("a", tensor((4,)))
    mod = make_module(
        [x], [relax.BindingBlock([relax.VarBinding(a, exp(x)), relax.VarBinding(a, exp(x))])], a
    )
    (message,) = problems(mod)
    assert message.startswith("variable a is bound more than once in function main")


def test_missing_struct_info():
    x = relax.Var("x", tensor((4,)))
    a = relax.Var("a")
    call = relax.op.exp(x)  # never normalized
    mod = make_module([x], [relax.BindingBlock([relax.VarBinding(a, call)])], x)
    messages = problems(mod)
    assert (
        "a Call has no struct info in function main (binding of a); normalize it "
        "(bb.normalize / bb.emit)" in messages
    )
    assert "variable a has no struct info in function main (binding of a)" in messages
    assert relax.analysis.well_formed(mod, check_struct_info=False)


def test_unknown_global_and_non_seq_body_and_global_symbol():
    x = relax.Var("x", tensor((4,)))
    call = relax.Call(relax.GlobalVar("missing"), [x], sinfo_args=[tensor((4,))])
    relax.normalize(call)
    gv = relax.Var("gv", tensor((4,)))
    mod = make_module([x], [relax.BindingBlock([relax.VarBinding(gv, call)])], gv)
    assert any("global function missing is not in the module" in p for p in problems(mod))

    bare = relax.Function([x], exp(x), tensor((4,)), attrs={"global_symbol": "other"})
    mod2 = IRModule({"f": bare})
    messages = problems(mod2)
    assert any("function 'f' has global_symbol 'other'" in p for p in messages)
    assert any("the body of function f is a Call" in p for p in messages)


def test_all_problems_are_listed_in_the_error():
    x = relax.Var("x", tensor((4,)))
    y = relax.Var("y", tensor((4,)))
    lv = relax.DataflowVar("lv", tensor((4,)))
    mod = make_module([x], [relax.BindingBlock([relax.VarBinding(lv, exp(y))])], lv)
    with pytest.raises(WellFormedError) as info:
        relax.analysis.well_formed(mod, raise_error=True)
    text = str(info.value)
    assert "variable y is not defined" in text and "bound outside a dataflow block" in text
