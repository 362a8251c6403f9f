"""save_json / load_json: every IR object round-trips to a structurally equal one that saves to
the same text, keeps its sharing and cached struct info, builds and runs; bad text is a
SerializationError that says what is wrong; pickling goes through the JSON form."""

from __future__ import annotations

import copy
import importlib
import json
import math
import pickle
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import mlckit
from mlckit import relax, tir
from mlckit.demo import mlp_script
from mlckit.errors import MLCError, SerializationError
from mlckit.ir import IRModule, assert_structural_equal, load_json, save_json
from mlckit.ir.node import Span
from mlckit.relax.training import SetupTrainer
from mlckit.relax.training.loss import CrossEntropyLoss
from mlckit.relax.training.optimizer import Adam
from mlckit.runtime.ndarray import NDArray
from mlckit.script import from_source
from mlckit.testing import examples
from mlckit.testing.fuzzing import schedules, scripts
from mlckit.tir.schedule import Schedule
from mlckit.tir.stmt import ForKind

TESTS = Path(__file__).resolve().parent.parent


def import_test_module(relative: str) -> Any:
    """A test module of another folder (its generators), imported as pytest imports it."""
    path = TESTS / relative
    if str(path.parent) not in sys.path:
        sys.path.insert(0, str(path.parent))
    return importlib.import_module(path.stem)


legalize_cases = import_test_module("relax/transform/test_legalize_ops.py")
schedule_helpers = import_test_module("tir/schedule/schedule_helpers.py")


def round_trip(node: Any) -> Any:
    """``node`` saved and loaded: structurally equal, and saving it again gives the same text."""
    text = save_json(node)
    loaded = load_json(text)
    assert_structural_equal(loaded, node)
    assert save_json(loaded) == text
    return loaded


# ------------------------------------------------------------------------------ the format
def test_the_worked_example_shares_one_variable():
    i = tir.Var("i", "int32")
    text = save_json(i * i + 1)
    document = json.loads(text)
    assert (document["format"], document["version"], document["root"]) == (
        "mlckit.ir",
        1,
        {"ref": 0},
    )
    assert [entry["type"] for entry in document["nodes"]] == [
        "tir.Add",
        "tir.Mul",
        "tir.Var",
        "tir.IntImm",
    ]
    assert document["nodes"][1]["fields"]["a"] == document["nodes"][1]["fields"]["b"] == {"ref": 2}
    loaded = round_trip(i * i + 1)
    assert loaded.a.a is loaded.a.b
    assert loaded.a.a is not i and loaded.a.a.name_hint == "i"


def test_a_module_keeps_one_object_per_variable_and_global_var():
    mod = round_trip(examples.Module)
    main = mod["main"]
    x = main.params[0]
    first_call = main.body.blocks[0].bindings[0].value
    assert first_call.args[1][0] is x  # the parameter object is the one the body uses
    callee = first_call.args[0]
    assert callee in mod.functions  # the called GlobalVar is the module's key
    linear = mod["linear"]
    assert all(p in linear.buffer_map for p in linear.params)


def test_cached_struct_info_and_spans_survive():
    mod = from_source(mlp_script())
    loaded = round_trip(mod)
    assert loaded.get_global_var("main").struct_info_ is not None
    for gv, saved in zip(loaded.functions, mod.functions):
        assert (gv.struct_info_ is None) == (saved.struct_info_ is None)
    for binding in loaded["main"].body.blocks[0].bindings:
        assert binding.var.struct_info_ is not None
        assert binding.value.struct_info_ is not None
    spans = [(type(f).__name__, f.span) for f in mod.functions.values() if f.span is not None]
    assert spans, "the parser records where each function was written"
    assert [(type(f).__name__, f.span) for f in loaded.functions.values() if f.span] == spans


def test_values_keep_their_python_types():
    tensor = mlckit.nd.array(np.arange(6, dtype="float16").reshape(2, 3))
    attrs = {
        "int": 3,
        "float": 3.0,
        "tiny": 1e-300,
        "nan": math.nan,
        "inf": -math.inf,
        "bool": True,
        "none": None,
        "text": 'quote " and \\ and \u00e9 and \ud800',
        "tuple": (1, (2.5, "x")),
        "list": [1, [2]],
        "dict": {"b": 1, "a": 2},
        "map": {1: "one", (2, 3): "pair"},
        "numpy": (np.float32(0.1), np.int64(-7), np.bool_(True)),
        "dtype": np.dtype("float16"),
        "enum": ForKind.PARALLEL,
        "tensor": tensor,
        "array": np.array([[1, 2]], dtype="int8"),
        "big": 2**80,
    }
    loaded = round_trip(IRModule(attrs=attrs)).attrs

    def kinds(value: Any) -> Any:
        if isinstance(value, (tuple, list)):
            return type(value), [kinds(v) for v in value]
        if isinstance(value, dict):
            return type(value), [(kinds(k), kinds(v)) for k, v in value.items()]
        return type(value)

    assert kinds(loaded) == kinds(attrs)
    assert list(loaded["dict"]) == ["b", "a"]  # insertion order is kept
    assert loaded["text"] == attrs["text"] and loaded["big"] == 2**80
    assert math.isnan(loaded["nan"]) and loaded["inf"] == -math.inf
    assert loaded["numpy"][0] == np.float32(0.1) and loaded["enum"] is ForKind.PARALLEL
    np.testing.assert_array_equal(loaded["tensor"].numpy(), tensor.numpy())
    assert loaded["tensor"].dtype == "float16" and loaded["tensor"].device == mlckit.cpu()
    np.testing.assert_array_equal(loaded["array"], attrs["array"])
    assert loaded["array"].dtype == np.int8


PIECES = {
    "relax function": lambda: examples.Module["main"],
    "struct info": lambda: examples.Module["main"].struct_info_,
    "global var": lambda: examples.Module.get_global_var("main"),
    "binding block": lambda: examples.Module["main"].body.blocks[0],
    "prim func": lambda: examples.Module["linear"],
    "buffer": lambda: next(iter(examples.Module["linear"].buffer_map.values())),
    "statement": lambda: examples.Module["linear"].body,
    "prim expr": lambda: tir.Var("n", "int64") * 2 // 3,
    "several nodes at once": lambda: {"f": examples.Module["main"], "g": [examples.MyModule]},
}


@pytest.mark.parametrize("name", PIECES)
def test_any_piece_of_ir_round_trips(name):
    round_trip(PIECES[name]())


def test_a_gpu_tensor_loads_on_the_gpu():
    # Without a GPU, numba's simulator stands in for one.
    tensor = mlckit.nd.array(np.arange(4, dtype="float32"), mlckit.cuda())
    loaded = round_trip(tensor)
    assert loaded.device == mlckit.cuda() and loaded is not tensor
    np.testing.assert_array_equal(loaded.numpy(), tensor.numpy())


def test_one_tensor_used_twice_stays_one_tensor():
    data = np.ones((2, 2), "float32")
    const = relax.const(data)
    loaded = round_trip((const, relax.Tuple([const, const]), const.data))
    assert loaded[0] is loaded[1].fields[0] is loaded[1].fields[1]
    assert loaded[2] is loaded[0].data
    np.testing.assert_array_equal(loaded[0].data.numpy(), data)


def test_an_operator_is_the_registered_one():
    call = relax.op.add(relax.Var("x", relax.TensorStructInfo((2,), "float32")), relax.const(1.0))
    loaded = round_trip(call)
    assert loaded.op is mlckit.ir.Op.get("relax.add")


def test_the_same_module_gives_the_same_text_in_a_new_process():
    code = "from mlckit.demo import mlp_script; from mlckit.ir import save_json\n"
    code += "from mlckit.script import from_source\n"
    code += "print(save_json(from_source(mlp_script())), end='')"
    other = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    assert other == save_json(from_source(mlp_script()))


# ------------------------------------------------------------------------------ every module
COURSE_MODULES = {
    "Module": lambda: examples.Module,
    "MyModule": lambda: examples.MyModule,
    "MyModuleLegacy": lambda: examples.MyModuleLegacy,
    "MyModuleWithExternCall": lambda: examples.MyModuleWithExternCall,
    "MyModuleMixture": lambda: examples.MyModuleMixture,
    "MLPBackbone": lambda: examples.MLPBackbone,
    "tmm16_desc": lambda: examples.tmm16_desc,
    "tmm16_impl": lambda: examples.tmm16_impl,
    "mlp_script": lambda: from_source(mlp_script()),
    "mm_relu": lambda: schedule_helpers.mm_relu,
    "row_sum_13": lambda: schedule_helpers.row_sum_13,
    "row_normalize": lambda: schedule_helpers.row_normalize,
    "recomputed_row_sum": lambda: schedule_helpers.recomputed_row_sum().mod,
    "Module legalized and fused": lambda: relax.get_pipeline("default")(examples.Module),
    **{f"schedules.{name}": make for name, make in schedules.OPERATORS.items()},
}


@pytest.mark.parametrize("name", COURSE_MODULES)
def test_course_modules_round_trip(name):
    node = COURSE_MODULES[name]()
    loaded = round_trip(node)
    assert loaded.script() == node.script()


@pytest.mark.parametrize("index", range(len(scripts.corpus())))
def test_the_fuzzing_corpus_round_trips(index):
    round_trip(from_source(scripts.corpus()[index]))


def test_a_training_module_keeps_its_optimizer_state():
    train = SetupTrainer(
        CrossEntropyLoss(reduction="sum"),
        Adam(0.01),
        [relax.TensorStructInfo((50, 10), "float32"), relax.TensorStructInfo((50,), "int64")],
    )(examples.MLPBackbone)
    loaded = round_trip(train)
    state = loaded.attrs["optim_state"]
    assert isinstance(state, tuple) and all(isinstance(t, NDArray) for t in state)
    for got, want in zip(state, train.attrs["optim_state"]):
        np.testing.assert_array_equal(got.numpy(), want.numpy())
    assert loaded.attrs["param_num"] == train.attrs["param_num"]


def _run(mod: IRModule, args: list[np.ndarray]) -> np.ndarray:
    vm = relax.VirtualMachine(mlckit.build(mod, "llvm"), mlckit.cpu())
    return vm["main"](*[mlckit.nd.array(a) for a in args]).numpy()


def test_a_loaded_course_mlp_builds_and_runs_like_the_original():
    rng = np.random.default_rng(0)
    args = [
        rng.standard_normal(shape).astype("float32")
        for shape in [(3, 784), (784, 256), (256,), (256, 10), (10,)]
    ]
    expected = _run(relax.get_pipeline("default")(examples.Module), args)
    # Loaded before the pipeline: the passes run on loaded IR.
    compiled = relax.get_pipeline("default")(load_json(save_json(examples.Module)))
    np.testing.assert_array_equal(_run(compiled, args), expected)
    # Loaded after it: built as it is, without normalizing again.
    np.testing.assert_array_equal(_run(load_json(save_json(compiled)), args), expected)


def test_a_loaded_module_with_constants_runs():
    x = relax.Var("x", relax.TensorStructInfo((2, 3), "float32"))
    weight = np.arange(6, dtype="float32").reshape(3, 2)
    bb = relax.BlockBuilder()
    with bb.function("main", [x]):
        with bb.dataflow():
            out = bb.emit_output(relax.op.nn.relu(relax.op.matmul(x, relax.const(weight))))
        bb.emit_func_output(out)
    mod = relax.transform.LegalizeOps()(bb.get())
    loaded = round_trip(mod)
    data = np.linspace(-1, 1, 6, dtype="float32").reshape(2, 3)
    np.testing.assert_array_equal(_run(loaded, [data]), _run(mod, [data]))


# ------------------------------------------------------------------------------ properties
@settings(max_examples=60, deadline=None, derandomize=True, database=None)
@given(data=st.data())
def test_random_relax_graphs_round_trip(data):
    """The legalization tests' random graphs: one op on random shapes, static or symbolic,
    before and after LegalizeOps."""
    name = data.draw(st.sampled_from(sorted(legalize_cases.CASES)))
    rng = np.random.default_rng(data.draw(st.integers(0, 2**16)))
    case = legalize_cases.CASES[name](data.draw, rng)
    mod = legalize_cases.build_module(case, symbolic=data.draw(st.booleans()))
    round_trip(mod)
    round_trip(relax.transform.LegalizeOps()(mod))


@settings(max_examples=100, deadline=None, derandomize=True, database=None)
@given(rng=st.randoms(use_true_random=False))
def test_mutated_scripts_that_parse_round_trip(rng):
    """The script fuzzer's mutations of its corpus: whatever still parses round-trips."""
    text, _ = scripts.mutate(rng, rng.choice(scripts.corpus()))
    try:
        program = from_source(text)
    except MLCError:
        return
    round_trip(program)


@settings(
    max_examples=60,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(rng=st.randoms(use_true_random=False))
def test_random_schedules_and_their_traces_round_trip(rng):
    """The schedule fuzzer's random schedules: the scheduled module round-trips, and so does
    the trace, which replays to the same module, unless a step received a Python function."""
    case = schedules.Case(rng.randrange(1 << 31), rng.choice(list(schedules.OPERATORS)), "python")
    sch = schedules.schedule(case, rng)
    round_trip(sch.mod)
    if any(step.kind == "transform_layout" for step in sch.trace):
        with pytest.raises(SerializationError, match=r"Python function.*sch\.transform_layout"):
            save_json(sch.trace)
        return
    text = save_json(sch.trace)
    trace = load_json(text)
    assert save_json(trace) == text
    assert trace.as_python() == sch.trace.as_python()
    replayed = Schedule(schedules.reference(case.operator)[0])
    trace.apply_to_schedule(replayed)
    assert_structural_equal(replayed.mod, sch.mod)


def test_a_trace_keeps_its_handles_and_sampled_values():
    sch = Schedule(schedule_helpers.mm_relu, seed=1)
    block = sch.get_block("Y")
    i, _, _ = sch.get_loops(block)
    factors = sch.sample_perfect_tile(i, n=2)
    sch.split(i, factors)
    sch.annotate(block, "note", 0.5)
    trace = load_json(save_json(sch.trace))
    get_loops, sample, split = trace.instructions[1:4]
    assert get_loops.args[0] is trace.instructions[0].outputs
    assert sample.args[0] is get_loops.outputs[0]
    assert split.args[1] == sample.outputs and split.args[1][0] is sample.outputs[0]
    assert type(sample.outputs[0]) is type(factors[0])
    assert isinstance(get_loops.outputs, list) and isinstance(split.args, tuple)


# ------------------------------------------------------------------------------ pickling
@pytest.mark.parametrize(
    "node",
    [
        examples.Module,
        schedule_helpers.mm_relu,
        relax.op.add(relax.Var("x", relax.TensorStructInfo((2,), "float32")), relax.const(1.0)),
    ],
    ids=["module", "prim_func", "expression"],
)
def test_pickling_goes_through_the_json_form(node):
    loaded = pickle.loads(pickle.dumps(node))
    assert_structural_equal(loaded, node)
    assert save_json(loaded) == save_json(node)


def test_a_pickled_module_loads_in_another_process():
    code = (
        "import pickle, sys; import mlckit\n"
        "mod = pickle.load(sys.stdin.buffer)\n"
        "print(mod.script(), end='')"
    )
    printed = subprocess.run(
        [sys.executable, "-c", code],
        input=pickle.dumps(examples.Module),
        capture_output=True,
        check=True,
    ).stdout.decode()
    assert printed == examples.Module.script()


def test_copy_stays_shallow():
    func = examples.Module["main"]
    copied = copy.copy(func)
    assert copied is not func and copied.body is func.body and copied.params is func.params
    mod = copy.copy(examples.Module)
    assert mod.functions is examples.Module.functions


# ------------------------------------------------------------------------------ bad text
def _edited(node: Any, edit) -> str:
    document = json.loads(save_json(node))
    edit(document)
    return json.dumps(document)


def _first(document: dict, type_name: str) -> dict:
    return next(entry for entry in document["nodes"] if entry["type"] == type_name)


def _set_ref(document: dict, index: int) -> None:
    _first(document, "tir.Add")["fields"]["a"] = {"ref": index}


EXPR = tir.Var("i", "int32") + 1

BAD_TEXT = {
    "truncated": (save_json(EXPR)[:-20], r"not JSON, or cut short"),
    "empty": ("", r"not JSON, or cut short"),
    "another format": ('{"format": "tvm", "version": 1}', r"not mlckit IR.*'mlckit\.ir'"),
    "a JSON list": ("[1, 2]", r"not mlckit IR"),
    "an unknown version": (
        _edited(EXPR, lambda d: d.update(version=99)),
        r"version 99 is unknown to this mlckit, which reads version 1",
    ),
    "an extra top-level key": (
        _edited(EXPR, lambda d: d.update(comment="hi")),
        r"keys format, version, root and nodes, got format, version, root, nodes, comment",
    ),
    "an unknown type name": (
        _edited(EXPR, lambda d: _first(d, "tir.Var").update(type="tir.Variable")),
        r"entry 1 has the type 'tir\.Variable', which is no type mlckit knows",
    ),
    "a Python path as a type name": (
        _edited(EXPR, lambda d: _first(d, "tir.Var").update(type="os.system")),
        r"'os\.system', which is no type mlckit knows",
    ),
    "a missing field": (
        _edited(EXPR, lambda d: _first(d, "tir.Var")["fields"].pop("name_hint")),
        r"entry 1 \(tir\.Var\) has the wrong fields: missing name_hint \(a tir\.Var has span, "
        r"dtype, name_hint, type_annotation\)",
    ),
    "an extra field": (
        _edited(EXPR, lambda d: _first(d, "tir.Var")["fields"].update(colour="red")),
        r"entry 1 \(tir\.Var\) has the wrong fields: extra colour",
    ),
    "a dangling reference": (
        _edited(EXPR, lambda d: _set_ref(d, 7)),
        r"entry 0 \(tir\.Add\), field a: the reference \{'ref': 7\} points to no entry "
        r"\(there are 3\)",
    ),
    "a negative reference": (
        _edited(EXPR, lambda d: _set_ref(d, -1)),
        r"\{'ref': -1\} points to no entry",
    ),
    "a value of no known spelling": (
        _edited(EXPR, lambda d: _first(d, "tir.Add")["fields"].update(a={"set": [1]})),
        r"field a: \{\"set\": \[1\]\} is no value save_json writes",
    ),
    "an entry without fields": (
        _edited(EXPR, lambda d: _first(d, "tir.Var").pop("fields")),
        r"entry 1 must be an object with the keys 'type' and 'fields'",
    ),
    "an unknown operator": (
        _edited(
            relax.op.add(relax.const(1.0), relax.const(2.0)),
            lambda d: _first(d, "ir.Op")["fields"].update(name="relax.plus"),
        ),
        r"\(ir\.Op\): no operator named 'relax\.plus'",
    ),
    "a type name that is no string": (
        _edited(EXPR, lambda d: _first(d, "tir.Var").update(type=["tir", "Var"])),
        r"entry 1 has the type \['tir', 'Var'\], which is no type mlckit knows",
    ),
    "a tensor on an unknown device": (
        _edited(
            relax.const(np.ones(4, "float32")),
            lambda d: _first(d, "runtime.NDArray")["fields"].update(device=["tpu", 0]),
        ),
        r"\(runtime\.NDArray\): device\('tpu'\): mlckit runs on CPUs and NVIDIA GPUs only",
    ),
    "an unknown enum member": (
        json.dumps(
            {
                "format": "mlckit.ir",
                "version": 1,
                "root": {"enum": ["tir.ForKind", "SIDEWAYS"]},
                "nodes": [],
            }
        ),
        r'\["tir\.ForKind", "SIDEWAYS"\] is no enum member mlckit knows',
    ),
    "corrupted tensor data": (
        _edited(
            relax.const(np.ones(4, "float32")),
            lambda d: _first(d, "runtime.NDArray")["fields"].update(data="AAAA"),
        ),
        r"\(runtime\.NDArray\): a tensor of dtype 'float32' and shape \(4,\) has unreadable data",
    ),
}


@pytest.mark.parametrize("name", BAD_TEXT)
def test_bad_text_is_a_serialization_error_that_says_which(name):
    text, message = BAD_TEXT[name]
    with pytest.raises(SerializationError, match=message):
        load_json(text)


def test_an_object_json_cannot_hold_is_refused_with_its_path():
    mod = IRModule(attrs={"note": {"items": [1, {2, 3}]}})
    with pytest.raises(
        SerializationError,
        match=r"cannot store a builtins\.set at root\.attrs\['note'\]\['items'\]\[1\]: it is no "
        r"type mlckit knows how to save",
    ):
        save_json(mod)


def test_a_trace_with_an_index_map_names_the_step():
    sch = Schedule(schedule_helpers.mm_relu)
    sch.transform_layout(sch.get_block("Y"), ("write", 0), lambda i, j: [j, i])
    with pytest.raises(
        SerializationError,
        match=r"cannot store a Python function \(.*<lambda>\) at root\.instructions\[1\]"
        r"\.args\[2\] \(in sch\.transform_layout\): JSON holds data, not code",
    ):
        save_json(sch.trace)


def test_a_span_is_a_value():
    span = Span("model.py", 3, 4, 9)
    loaded = round_trip(tir.Var("i", "int32", span=span) + 1)
    assert loaded.a.span == span
