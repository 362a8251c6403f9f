"""Executable.export_library and mlckit.runtime.load_module: one file runs a compiled model in
another process without compiling it again, and a damaged or foreign file is refused."""

from __future__ import annotations

import json
import subprocess
import sys
import zipfile
from pathlib import Path

import numpy as np
import pytest

import mlckit
from mlckit import relax
from mlckit.contrib import clang
from mlckit.datasets import mlp_params
from mlckit.demo import mlp_script
from mlckit.errors import BuildError, SerializationError, VMError
from mlckit.ir import IRModule, load_json, save_json
from mlckit.relax.training import SetupTrainer, Trainer
from mlckit.relax.training.loss import MSELoss
from mlckit.relax.training.optimizer import Adam
from mlckit.relax.vm import library as library_module
from mlckit.runtime import load_module
from mlckit.runtime.archive import canonical_json, sha256, write_archive
from mlckit.runtime.gpu import simulated
from mlckit.runtime.module import Module
from mlckit.script import from_source
from mlckit.script import ir as I
from mlckit.script import relax as R
from mlckit.script import tir as T

ROOT = Path(__file__).parents[2]


def course_mlp(k: int = 784, hidden: int = 128, classes: int = 10, weights=None):
    """The course MLP with its weights bound (they become the executable's constants)."""
    weights = weights or mlp_params()
    mod = from_source(mlp_script(k, hidden, classes))
    return relax.transform.BindParams("main", weights)(mod)


def small_mlp_weights(rng: np.random.Generator) -> dict[str, np.ndarray]:
    shapes = {"w0": (4, 8), "b0": (4,), "w1": (3, 4), "b1": (3,)}
    return {name: rng.standard_normal(shape).astype("float32") for name, shape in shapes.items()}


@pytest.fixture(scope="module")
def mlp_file(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("export") / "mlp.mlckit"
    relax.build(course_mlp(), "llvm", relax_pipeline="default").export_library(path)
    return path


def run_main(lib, x: np.ndarray, device=None) -> np.ndarray:
    return relax.VirtualMachine(lib, device or mlckit.cpu())["main"](x).numpy()


# The child process refuses to parse TVMScript, run a pass or generate a kernel, then loads
# and runs the library.
CHILD = """
import sys
import numpy as np

import mlckit
from mlckit import relax
from mlckit.backend import kernel
from mlckit.ir.transform import Pass
from mlckit.script.parser.core import Parser


def forbidden(what):
    def refuse(*args, **kwargs):
        raise AssertionError(f"loading a library must not {what}")

    return refuse


Parser.__init__ = forbidden("parse TVMScript")
Pass.__call__ = forbidden("run a pass")
kernel.kernel_source = forbidden("generate a kernel")

library, inputs, outputs = sys.argv[1:]
vm = relax.VirtualMachine(mlckit.runtime.load_module(library), mlckit.cpu())
np.save(outputs, vm["main"](np.load(inputs)).numpy())
"""


def test_the_course_mlp_runs_in_another_process_without_compiling(mlp_file, tmp_path):
    x = np.random.default_rng(0).random((5, 784)).astype("float32")
    expected = run_main(relax.build(course_mlp(), "llvm", relax_pipeline="default"), x)
    np.save(tmp_path / "x.npy", x)
    subprocess.run(
        [sys.executable, "-c", CHILD, str(mlp_file), str(tmp_path / "x.npy"), str(tmp_path / "y")],
        check=True,
        cwd=ROOT,
    )
    np.testing.assert_array_equal(np.load(tmp_path / "y.npy"), expected)


def test_the_same_executable_always_gives_the_same_bytes(mlp_file, tmp_path):
    again = tmp_path / "again.mlckit"
    relax.build(course_mlp(), "llvm", relax_pipeline="default").export_library(again)
    assert again.read_bytes() == mlp_file.read_bytes()


def test_the_file_lists_its_parts_their_hashes_and_the_versions(mlp_file):
    with zipfile.ZipFile(mlp_file) as archive:
        manifest = json.loads(archive.read("manifest.json"))
        names = archive.namelist()
    assert manifest["format"] == "mlckit.library" and manifest["target"] == "llvm"
    assert set(manifest["versions"]) == {"mlckit", "codegen", "numba", "python", "numpy"}
    assert [k["name"] for k in manifest["kernels"]] == ["linear", "fused_linear_relu"]
    assert [(c["dtype"], c["shape"]) for c in manifest["constants"]] == [
        ("float32", [128, 784]),
        ("float32", [128]),
        ("float32", [10, 128]),
        ("float32", [10]),
    ]
    parts = [*manifest["kernels"], *manifest["functions"], *manifest["constants"]]
    assert sorted(manifest["files"]) == sorted(p["file"] for p in parts)
    assert sorted(names) == sorted(["manifest.json", *manifest["files"]])


@pytest.mark.parametrize("target", ["llvm", "python"])
def test_a_module_with_constants_round_trips(target, tmp_path):
    rng = np.random.default_rng(1)
    mod = course_mlp(8, 4, 3, small_mlp_weights(rng))
    exe = relax.build(mod, target, relax_pipeline="default")
    exe.export_library(tmp_path / "lib")
    loaded = load_module(tmp_path / "lib")
    assert loaded.target == exe.target and loaded.source() == exe.source()
    x = rng.standard_normal((2, 8)).astype("float32")
    np.testing.assert_array_equal(run_main(loaded, x), run_main(exe, x))
    # A loaded executable exports to the same file again.
    loaded.export_library(tmp_path / "again")
    assert (tmp_path / "again").read_bytes() == (tmp_path / "lib").read_bytes()


def test_a_cuda_build_round_trips(tmp_path):
    if not simulated():
        pytest.skip("checked under numba's CUDA simulator, where a cuda build is cheap")
    rng = np.random.default_rng(2)
    exe = relax.build(course_mlp(8, 4, 3, small_mlp_weights(rng)), "cuda", relax_pipeline="default")
    exe.export_library(tmp_path / "lib")
    x = rng.standard_normal((2, 8)).astype("float32")
    loaded = load_module(tmp_path / "lib")
    np.testing.assert_array_equal(
        run_main(loaded, x, mlckit.cuda()), run_main(exe, x, mlckit.cuda())
    )


ADD_ONE = """
@T.prim_func
def add_one(A: T.Buffer((3, 4), "float32"), B: T.Buffer((3, 4), "float32")):
    T.func_attr({"global_symbol": "plus_one"})
    for i, j in T.grid(3, 4):
        with T.block("B"):
            vi, vj = T.axis.remap("SS", [i, j])
            B[vi, vj] = A[vi, vj] + T.float32(1)
"""


@pytest.mark.parametrize("target", ["llvm", "python"])
def test_a_module_of_prim_funcs_round_trips(target, tmp_path):
    lib = mlckit.build(IRModule({"main": from_source(ADD_ONE)}), target)
    lib.export_library(tmp_path / "lib")
    loaded = load_module(tmp_path / "lib")
    assert isinstance(loaded, Module) and loaded.source() == lib.source()
    a = np.arange(12, dtype="float32").reshape(3, 4)
    b = mlckit.nd.empty((3, 4), "float32")
    loaded["main"](a, b)  # the name in the IRModule, beside its global_symbol
    np.testing.assert_array_equal(b.numpy(), a + 1)
    with pytest.raises(VMError, match=r"plus_one: argument 1 \(B\) expects shape \(3, 4\)"):
        loaded["plus_one"](a, np.zeros((3, 5), "float32"))


BACKBONE = """
@I.ir_module
class Backbone:
    I.module_attrs({"param_num": 2, "state_num": 0})

    @R.function
    def backbone(x: R.Tensor((2, 6), "float32"), w: R.Tensor((6, 3), "float32"),
                 b: R.Tensor((3,), "float32")):
        with R.dataflow():
            out = R.nn.relu(R.add(R.matmul(x, w), b))
            R.output(out)
        return out
"""


def test_a_trainer_runs_on_a_loaded_training_module(tmp_path):
    """The file holds the compiled code; Trainer also reads the training module's attributes,
    which travel beside it as IR JSON."""
    pred = relax.TensorStructInfo((2, 3), "float32")
    train_mod = SetupTrainer(MSELoss(reduction="sum"), Adam(0.01), [pred, pred])(
        from_source(BACKBONE)
    )
    relax.build(train_mod, "llvm", relax_pipeline="default").export_library(tmp_path / "lib")
    (tmp_path / "train.json").write_text(save_json(train_mod))
    w = np.linspace(-1, 1, 18, dtype="float32").reshape(6, 3)
    x, y = np.ones((2, 6), "float32"), np.eye(2, 3, dtype="float32")

    def losses(mod, exe) -> list[float]:
        trainer = Trainer(mod, relax.VirtualMachine(exe, mlckit.cpu()), mlckit.cpu())
        trainer.load_params([w, np.zeros(3, "float32")])
        return [float(trainer.update(x, y).numpy()) for _ in range(3)]

    shipped = load_json((tmp_path / "train.json").read_text())
    expected = losses(train_mod, relax.build(train_mod, "llvm", relax_pipeline="default"))
    assert losses(shipped, load_module(tmp_path / "lib")) == expected


# ------------------------------------------------------------------ refused files
def rewrite(source: Path, target: Path, change) -> None:
    """Copy the library ``source`` to ``target`` with ``change(members)`` applied to its
    members (a dict of name to bytes, the manifest parsed)."""
    with zipfile.ZipFile(source) as archive:
        members = {name: archive.read(name) for name in archive.namelist()}
    members["manifest.json"] = json.loads(members["manifest.json"])
    change(members)
    encoded = [(k, canonical_json(v) if isinstance(v, dict) else v) for k, v in members.items()]
    target.write_bytes(write_archive(encoded))


def rehash(manifest: dict) -> None:
    manifest.pop("sha256")
    manifest["sha256"] = sha256(canonical_json(manifest))


def edit_kernel(members: dict) -> None:
    members["kernels/linear.py"] += b"\nprint('hello')\n"


def edit_vm_code(members: dict) -> None:
    members["vm/main.py"] = members["vm/main.py"].replace(b"return out", b"return lv1")


def edit_constant(members: dict) -> None:
    data = bytearray(members["constants/3.npy"])
    data[-1] ^= 1
    members["constants/3.npy"] = bytes(data)


def edit_target(members: dict) -> None:
    members["manifest.json"]["target"] = "python"


def older_mlckit(members: dict) -> None:
    members["manifest.json"]["versions"]["mlckit"] = "0.0.1"
    rehash(members["manifest.json"])


def newer_format(members: dict) -> None:
    members["manifest.json"]["format_version"] = 99
    rehash(members["manifest.json"])


def another_kind(members: dict) -> None:
    members["manifest.json"]["kind"] = "relax.Function"
    rehash(members["manifest.json"])


def drop_manifest(members: dict) -> None:
    members["other.json"] = members.pop("manifest.json")


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (edit_kernel, "the hash of kernels/linear.py does not match"),
        (edit_vm_code, "the hash of vm/main.py does not match"),
        (edit_constant, "the hash of constants/3.npy does not match"),
        (edit_target, "the hash of its manifest does not match"),
        (
            older_mlckit,
            r"written by mlckit 0\.0\.1 \(codegen \d+\); this is mlckit 0\.1\.0 \(codegen",
        ),
        (newer_format, "library format version 99; this mlckit reads version 1"),
        (another_kind, "holds a 'relax.Function', which this mlckit cannot load"),
        (drop_manifest, "is not an mlckit library: the zip archive has no manifest.json"),
    ],
    ids=lambda value: getattr(value, "__name__", None),
)
def test_a_changed_file_is_refused_before_any_code_runs(
    change, message, mlp_file, tmp_path, monkeypatch
):
    rewrite(mlp_file, tmp_path / "changed", change)

    def no_kernel(*args):
        raise AssertionError("a kernel of a refused file was loaded")

    monkeypatch.setattr(library_module, "load_kernel_source", no_kernel)
    with pytest.raises(SerializationError, match=message):
        load_module(tmp_path / "changed")


def test_a_truncated_file_is_refused(mlp_file, tmp_path):
    data = mlp_file.read_bytes()
    (tmp_path / "cut").write_bytes(data[: len(data) // 2])
    with pytest.raises(SerializationError, match="cut is truncated or corrupted"):
        load_module(tmp_path / "cut")


def test_a_corrupted_member_is_refused(mlp_file, tmp_path):
    data = bytearray(mlp_file.read_bytes())
    with zipfile.ZipFile(mlp_file) as archive:
        info = archive.getinfo("constants/0.npy")
    # A byte in the middle of the stored weights: the zip's CRC-32 catches it.
    data[info.header_offset + 100_000] ^= 0xFF
    (tmp_path / "flipped").write_bytes(bytes(data))
    with pytest.raises(SerializationError, match="is corrupted: member 'constants/0.npy'"):
        load_module(tmp_path / "flipped")


def test_a_file_that_is_not_a_library_is_refused(tmp_path):
    (tmp_path / "text").write_text("def main(x): return x\n")
    with pytest.raises(SerializationError, match="is not an mlckit library: it is not a zip"):
        load_module(tmp_path / "text")
    with pytest.raises(SerializationError, match="cannot read the library"):
        load_module(tmp_path / "missing")


SCALE_C = """
extern "C" int export_test_scale(float* x, int n, float by) {
  for (int i = 0; i < n; ++i) x[i] *= by;
  return 0;
}
"""


def test_a_kernel_calling_a_c_library_is_not_exported(tmp_path):
    try:
        library = clang.create_llvm(SCALE_C)
    except BuildError as err:
        pytest.skip(f"no C++ compiler: {err}")

    @I.ir_module
    class WithExtern:
        @T.prim_func
        def scale(A: T.Buffer((4,), "float32"), B: T.Buffer((4,), "float32")):
            for i in T.serial(4):
                with T.block("copy"):
                    vi = T.axis.remap("S", [i])
                    B[vi] = A[vi]
            for _ in T.serial(1, annotations={"pragma_import_llvm": library}):
                T.evaluate(T.call_extern("int32", "export_test_scale", B.access_ptr("rw"), 4, 3.0))

        @R.function
        def main(x: R.Tensor((4,), "float32")):
            cls = WithExtern
            y = R.call_tir(cls.scale, (x,), out_sinfo=R.Tensor((4,), "float32"))
            return y

    for built in (relax.build(WithExtern, "llvm"), mlckit.build(WithExtern["scale"], "llvm")):
        with pytest.raises(SerializationError, match="'scale' calls export_test_scale from the C"):
            built.export_library(tmp_path / "lib")
