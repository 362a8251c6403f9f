"""relax.BlockBuilder: the MLP of the course, naming, scopes, module editing, and misuse."""

import numpy as np
import pytest
from relax_helpers import assert_tensor, tensor

import mlckit
from mlckit import relax, tir, topi
from mlckit.errors import MLCError, StructInfoError
from mlckit.ir import IRModule, Op

n = tir.Var("n", "int64")


def mlp_params():
    return [
        relax.Var("x", tensor((n, 784))),
        relax.Var("w0", tensor((784, 256))),
        relax.Var("b0", tensor((256,))),
        relax.Var("w1", tensor((256, 10))),
        relax.Var("b1", tensor((10,))),
    ]


def build_mlp():
    bb = relax.BlockBuilder()
    x, w0, b0, w1, b1 = params = mlp_params()
    with bb.function("main", params):
        with bb.dataflow():
            lv0 = bb.emit(relax.op.matmul(x, w0))
            lv1 = bb.emit(relax.op.add(lv0, b0))
            lv2 = bb.emit(relax.op.nn.relu(lv1))
            lv3 = bb.emit(relax.op.matmul(lv2, w1))
            lv4 = bb.emit(relax.op.add(lv3, b1))
            gv = bb.emit_output(lv4)
        bb.emit_func_output(gv)
    return bb.get()


def test_mlp_struct_info_flows_through_symbolic_shapes():
    mod = build_mlp()
    func = mod["main"]
    assert isinstance(func, relax.Function)
    (block,) = func.body.blocks
    assert isinstance(block, relax.DataflowBlock)
    names = [b.var.name_hint for b in block.bindings]
    assert names == ["lv", "lv1", "lv2", "lv3", "lv4", "gv"]
    assert [type(b.var) for b in block.bindings] == [relax.DataflowVar] * 5 + [relax.Var]
    ops = [b.value.op.name for b in block.bindings[:5]]
    assert ops == ["relax.matmul", "relax.add", "relax.nn.relu", "relax.matmul", "relax.add"]
    expected = [(n, 256), (n, 256), (n, 256), (n, 10), (n, 10), (n, 10)]
    for binding, shape in zip(block.bindings, expected):
        assert_tensor(binding.var.struct_info, shape)
        assert binding.value.struct_info_ is not None
    assert_tensor(func.ret_struct_info, (n, 10))
    assert func.body.body is block.bindings[-1].var
    assert func.attrs["global_symbol"] == "main"
    assert relax.analysis.well_formed(mod)


def test_seed_model_with_constants_and_old_op_names():
    rng = np.random.default_rng(0)
    x = relax.Var("x", relax.TensorStructInfo((1, 784), "float32"))
    w0 = relax.const(rng.standard_normal((128, 784)), "float32")
    b0 = relax.const(rng.standard_normal((128,)), "float32")
    w1 = relax.const(rng.standard_normal((10, 128)), "float32")
    b1 = relax.const(rng.standard_normal((10,)), "float32")
    bb = relax.BlockBuilder()
    with bb.function("main", [x]):
        with bb.dataflow():
            lv0 = bb.emit(relax.op.dense(x, w0))
            lv1 = bb.emit(relax.op.add(lv0, b0))
            lv2 = bb.emit(relax.op.relu(lv1))
            lv3 = bb.emit(relax.op.dense(lv2, w1))
            lv4 = bb.emit(relax.op.add(lv3, b1))
            gv = bb.emit_output(lv4)
        bb.emit_func_output(gv)
    mod = bb.get()
    bindings = mod["main"].body.blocks[0].bindings
    assert_tensor(bindings[0].var.struct_info, (1, 128))
    assert_tensor(bindings[4].var.struct_info, (1, 10))
    assert bindings[0].value.op is Op.get("relax.nn.dense")
    assert relax.analysis.well_formed(mod)


def test_nested_calls_are_bound_to_fresh_variables():
    x, w0, b0, _, _ = params = mlp_params()
    bb = relax.BlockBuilder()
    with bb.function("main", params):
        with bb.dataflow():
            out = bb.emit(relax.op.nn.relu(relax.op.matmul(x, w0) + b0))
            gv = bb.emit_output(out)
        bb.emit_func_output(gv)
    bindings = bb.get()["main"].body.blocks[0].bindings
    assert [b.var.name_hint for b in bindings] == ["lv", "lv1", "lv2", "gv"]
    assert bindings[1].value.args[0] is bindings[0].var
    assert bindings[2].value.args[0] is bindings[1].var
    assert bb.lookup_binding(out) is bindings[2].value


def test_emit_outside_dataflow_gives_plain_vars_and_blocks_split():
    x = relax.Var("x", tensor((2, 3)))
    bb = relax.BlockBuilder()
    with bb.function("f", [x]):
        assert not bb.current_block_is_dataflow()
        a = bb.emit(relax.op.exp(x), "a")
        with bb.dataflow():
            assert bb.current_block_is_dataflow()
            lv = bb.emit(relax.op.negative(a))
            b = bb.emit_output(lv, "a")
        c = bb.emit(relax.op.add(a, b))
        bb.emit_func_output((a, c))
    func = bb.get()["f"]
    assert type(a) is relax.Var and type(lv) is relax.DataflowVar and type(c) is relax.Var
    assert b.name_hint == "a1"  # names are unique per builder
    kinds = [type(block) for block in func.body.blocks]
    assert kinds == [relax.BindingBlock, relax.DataflowBlock, relax.BindingBlock]
    assert isinstance(func.ret_struct_info, relax.TupleStructInfo)
    assert relax.analysis.well_formed(func)


def test_names_are_unique_across_functions_and_hints():
    bb = relax.BlockBuilder()
    for fname in ("f", "g"):
        x = relax.Var("x", tensor((2,)))
        with bb.function(fname, [x]):
            with bb.dataflow():
                lv = bb.emit(relax.op.exp(x))
                lv_hint = bb.emit(relax.op.exp(lv), "lv")
                gv = bb.emit_output(lv_hint)
            bb.emit_func_output(gv)
    g = bb.get()["g"].body.blocks[0].bindings
    assert [b.var.name_hint for b in g] == ["lv2", "lv3", "gv1"]


def test_private_function_and_attrs_and_late_params():
    x = relax.Var("x", tensor((2,)))
    bb = relax.BlockBuilder()
    with bb.function("helper", attrs={"Primitive": 1}, private=True):
        out = bb.emit(relax.op.exp(x))
        gv = bb.emit_func_output(out, params=[x])
    func = bb.get()["helper"]
    assert "global_symbol" not in func.attrs and func.attrs["Primitive"] == 1
    assert gv.name_hint == "helper" and func.params == (x,)


def test_calling_a_module_function_derives_symbolic_result():
    bb = relax.BlockBuilder()
    m = tir.Var("m", "int64")
    p = relax.Var("p", tensor((m, 4)))
    with bb.function("inner", [p]):
        r = bb.emit(relax.op.exp(p))
        inner = bb.emit_func_output(r)
    x = relax.Var("x", tensor((n, 4)))
    with bb.function("main", [x]):
        y = bb.emit(relax.Call(inner, [x]))
        bb.emit_func_output(y)
    assert_tensor(y.struct_info, (n, 4))
    assert relax.analysis.well_formed(bb.get())

    # An argument whose shape is unknown leaves the callee's variable unsolved: forget it.
    bb2 = relax.BlockBuilder(bb.get())
    z = relax.Var("z", relax.TensorStructInfo(None, "float32", ndim=2))
    with bb2.function("other", [z]):
        out = bb2.emit(relax.Call(inner, [z]))
        bb2.emit_func_output(out)
    assert out.struct_info.shape is None and out.struct_info.ndim == 2

    bad = relax.Var("bad", tensor((n, 5)))
    with pytest.raises(StructInfoError, match=r"inner: argument 0 does not match.*4 vs 5"):
        bb.normalize(relax.Call(inner, [bad]))


def test_call_tir_checks_the_primfunc_arity():
    a = tir.decl_buffer((4,), "float32", "A")
    b = tir.decl_buffer((4,), "float32", "B")
    i = tir.Var("i", "int32")
    body = tir.For(i, 0, 4, tir.ForKind.SERIAL, tir.BufferStore(b, a[i], [i]))
    prim = tir.PrimFunc([a.data, b.data], body, buffer_map={a.data: a, b.data: b})
    bb = relax.BlockBuilder()
    gv = bb.add_func(prim, "copy")
    x = relax.Var("x", tensor((4,)))
    with bb.function("main", [x]):
        with bb.dataflow():
            ok = bb.emit(relax.op.call_tir(gv, (x,), tensor((4,))))
            with pytest.raises(StructInfoError, match=r"copy takes 2 parameters.*2 inputs"):
                bb.emit(relax.op.call_tir(gv, (x, x), tensor((4,))))
            out = bb.emit_output(ok)
        bb.emit_func_output(out)
    assert relax.analysis.well_formed(bb.get())


def test_add_func_dedupes_names_and_identical_functions():
    def make(name):
        x = relax.Var("x", tensor((2,)))
        inner = relax.BlockBuilder()
        with inner.function(name, [x]):
            inner.emit_func_output(inner.emit(relax.op.exp(x)))
        return inner.get()[name]

    bb = relax.BlockBuilder()
    gv1 = bb.add_func(make("f"), "f")
    gv2 = bb.add_func(make("f"), "f")
    assert gv1 is gv2  # structurally equal: reused
    other = make("f").with_attr("Primitive", 1)
    gv3 = bb.add_func(other, "f")
    assert gv3.name_hint == "f1"
    bb.update_func(gv3, make("f"))
    assert "Primitive" not in bb.get()["f1"].attrs
    # As in TVM, updating a function the module does not have yet adds it.
    bb.update_func(relax.GlobalVar("fresh"), make("f"))
    assert "fresh" in bb.get()
    with pytest.raises(MLCError, match="expects a relax.Function"):
        bb.update_func(relax.GlobalVar("bad"), relax.const(1.0))


def test_builder_extends_an_existing_module_and_get_is_a_snapshot():
    mod = build_mlp()
    bb = relax.BlockBuilder(mod)
    snapshot = bb.get()
    x = relax.Var("x", tensor((2,)))
    with bb.function("extra", [x]):
        bb.emit_func_output(x)
    assert set(gv.name_hint for gv in bb.get().functions) == {"main", "extra"}
    assert "extra" not in snapshot and "extra" not in mod


def test_emit_match_cast_defines_new_symbolic_dims():
    x = relax.Var("x", relax.TensorStructInfo(None, "float32", ndim=2))
    k = tir.Var("k", "int64")
    bb = relax.BlockBuilder()
    with bb.function("main", [x]):
        with bb.dataflow():
            y = bb.emit_match_cast(x, tensor((k, 4)))
            z = bb.emit(relax.op.exp(y))
            gv = bb.emit_output(z)
        bb.emit_func_output(gv)
    binding = bb.get()["main"].body.blocks[0].bindings[0]
    assert isinstance(binding, relax.MatchCast) and type(y) is relax.DataflowVar
    assert_tensor(z.struct_info, (k, 4))
    # k is defined inside the body, so the signature cannot mention it.
    ret = bb.get()["main"].ret_struct_info
    assert ret.shape is None and ret.ndim == 2 and ret.dtype == "float32"
    assert relax.analysis.well_formed(bb.get())
    q = relax.Var("q", tensor((2,)))
    with (
        pytest.raises(StructInfoError, match=r"relax\.match_cast.*dtype float32 vs int32"),
        bb.function("bad", [q]),
    ):
        bb.emit_match_cast(q, tensor((2,), "int32"))


def test_misuse_gives_clear_errors():
    x = relax.Var("x", tensor((2,)))
    bb = relax.BlockBuilder()
    with pytest.raises(MLCError, match=r"inside `with bb\.function"):
        bb.emit(relax.op.exp(x))
    with (
        pytest.raises(MLCError, match="only for results of a dataflow block"),
        bb.function("f", [x]),
    ):
        bb.emit_output(x)
    with pytest.raises(MLCError, match="has no output"), bb.function("g", [x]):
        bb.emit(relax.op.exp(x))
    with (
        pytest.raises(MLCError, match="dataflow variable, which is not visible"),
        bb.function("h", [x]),
    ):
        with bb.dataflow():
            lv = bb.emit(relax.op.exp(x))
        bb.emit_func_output(lv)
    with (
        pytest.raises(MLCError, match="after the dataflow block"),
        bb.function("k", [x]),
        bb.dataflow(),
    ):
        bb.emit_func_output(bb.emit_output(x))
    with pytest.raises(MLCError, match="no struct info"):
        bb.function("u", [relax.Var("nosinfo")])
    with pytest.raises(MLCError, match="has no struct info"):
        bb.normalize(relax.op.exp(relax.Var("y")))
    with pytest.raises(MLCError, match="cannot be nested"), bb.function("outer", [x]):
        bb.function("inner", [x])


def test_block_builder_current_and_explicit_blocks():
    x = relax.Var("x", tensor((2,)))
    bb = relax.BlockBuilder()
    assert relax.BlockBuilder.current() is None
    with bb.function("f", [x]):
        assert relax.BlockBuilder.current() is bb
        bb.emit_func_output(x)
    # Blocks can also be built by hand (as mutators do), outside any function.
    bb.begin_dataflow_block()
    v = bb.emit(relax.op.exp(x))
    block = bb.end_block()
    assert isinstance(block, relax.DataflowBlock) and block.bindings[0].var is v


def test_module_holds_relax_functions():
    mod = build_mlp()
    assert isinstance(mod, IRModule) and len(mod) == 1
    gv = mod.get_global_var("main")
    assert isinstance(gv.struct_info_, relax.FuncStructInfo)


def test_a_kernel_named_like_the_open_function_gets_another_name():
    # The kernel took the name "B", and the relax function "B" replaced it when finished.
    bb = relax.BlockBuilder()
    x = relax.Var("x", relax.TensorStructInfo((3,), "float32"))
    with bb.function("B", [x]):
        bb.emit_func_output(bb.emit_te(topi.add, x, x, primfunc_name_hint="B"))
    mod = bb.get()
    assert sorted(gv.name_hint for gv in mod.get_global_vars()) == ["B", "B1"]
    vm = relax.VirtualMachine(relax.build(mod, "python"), mlckit.cpu())
    data = np.arange(3, dtype="float32")
    np.testing.assert_allclose(vm["B"](data).numpy(), data + data)
