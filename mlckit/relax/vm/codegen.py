"""Relax functions -> Python: the program the virtual machine runs.

Each relax function becomes one Python function in the course's "low-level numpy" style
(``lnumpy_mlp``): it checks its arguments against the signature, binds symbolic dims from
their shapes, allocates each ``call_tir`` output and calls the compiled kernel with
destination passing. Values are numpy arrays, tuples, shapes (tuples of ints) and Python
scalars; the VirtualMachine converts NDArrays at the boundary.

A ``call_tir`` output comes from ``pooled_empty(slot, shape, dtype)`` on the cpu: the array
that output got at the previous call, when it has the same shape and nothing else refers to it
(an intermediate always, once its call returned; a result once the caller dropped it), else a
new one from ``aligned_empty`` (``np.empty`` whose data starts on a cache line, as the tuner
measured the kernels with). The course's MLP in a loop then allocates nothing after its first
call, where an allocation per output cost more than the VM's other work together (~1 us each),
and still no caller sees an array of its own overwritten by a later call::

    n, _ = check_tensor(x, 'main: parameter x', 'float32', (None, 784), ('n', '784'))
    # outputs reuse their last call's array once nothing else refers to it
    lv1 = pooled_empty(0, (n, 128), dtype=np.float32)
    fused_linear_relu(x, w0, b0, lv1)
    out = pooled_empty(1, (n, 10), dtype=np.float32)
    linear(lv1, w1, b1, out)
    return out

On cuda each output is a new device array. After CallTIRRewrite and StaticPlanBlockMemory the
allocations are explicit and run as written, each a new array per call (the program, not the
VM, plans that memory), mapping to numpy one by one: ``R.builtin.alloc_tensor`` is
``aligned_empty``, a storage from ``R.memory.alloc_storage`` a flat ``np.uint8`` buffer
(aligned likewise), ``R.memory.alloc_tensor`` a view into it
(``storage[0:4096].view(np.float32).reshape((16, 64))``), ``R.memory.kill_*`` a ``del``, and a
direct call of a kernel (``cls.relu(x, alloc)``) is that call, writing into ``alloc``. Each
operator the VM runs itself has one emitter method, named by the table
``RelaxToPython.OP_EMITTERS``; any other operator must be legalized first.

A kernel's arguments are held to its parameters as every compiled function's are
(``runtime.module.check_arguments``): at build time where their struct info decides (a wrong
dtype is a BuildError), at run time, through ``checked_args``, where only the values can (a
tensor of unknown dtype, an output that is not the VM's own allocation).

Generated code is safe to exec: every name comes from one NameSupply that reserves the names
the code itself uses (``VM_RESERVED``), and all other text is a ``string_literal``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar

from mlckit.arith import Analyzer
from mlckit.backend.codegen import HELPER_SOURCE, RESERVED, PrimExprPrinter, string_literal
from mlckit.errors import BuildError
from mlckit.ir.dtype import SCALAR_DTYPES, to_numpy
from mlckit.ir.module import GlobalVar
from mlckit.ir.name_supply import NameSupply
from mlckit.ir.op import Op
from mlckit.runtime.module import ParamSpec, a
from mlckit.tir import expr as E
from mlckit.tir.analysis import collect_vars

from ..analysis.analysis import used_vars
from ..expr import (
    Call,
    Constant,
    DataTypeImm,
    Expr,
    ExternFunc,
    Function,
    If,
    MatchCast,
    PrimValue,
    SeqExpr,
    ShapeExpr,
    StringImm,
    Tuple,
    TupleGetItem,
    Var,
    VarBinding,
)
from ..struct_info import (
    ObjectStructInfo,
    PrimStructInfo,
    ShapeStructInfo,
    StructInfo,
    TensorStructInfo,
    TupleStructInfo,
)
from ..utils import format_struct_info

# Names the VM namespace defines for generated functions.
VM_RUNTIME_NAMES = frozenset(
    {
        "np",
        "aligned_empty",
        "cuda",
        "check_tensor",
        "check_tuple",
        "check_shape",
        "check_prim",
        "check_dim",
        "check_storage",
        "call_dps_packed",
        "call_packed",
        "constants",
        "as_bool",
        "tuple_item",
        "checked_args",
        "pooled_empty",
    }
)

# Every name the generated code uses on its own: the runtime's, the builtins and helpers the
# shape arithmetic calls (the kernels' reserved words), the placeholder ``_`` of an unpacking,
# and the module's ``__builtins__``. A user's name (a parameter ``β`` sanitizes to ``_``) never
# takes one of them: it gets a suffix instead.
VM_RESERVED = VM_RUNTIME_NAMES | RESERVED | set(HELPER_SOURCE) | {"_", "__builtins__"}


class RelaxToPython:
    """Generates the Python function of one relax function."""

    def __init__(
        self,
        func: Function,
        name: str,
        globals_: dict[str, str],
        constants: list[Constant],
        kernels: dict[str, tuple[ParamSpec, ...]] | None = None,
        on_gpu: bool = False,
        pool_slots: list[str] | None = None,
    ):
        self.func = func
        # Where tensors live: numpy arrays on the CPU, or numba device arrays on the GPU.
        self.on_gpu = on_gpu
        self.name = name
        # Module-level names: relax function and kernel names by their GlobalVar name.
        self.globals = globals_
        # The parameters of each kernel (PrimFunc) by GlobalVar name: a kernel call's
        # arguments are checked against them. Calling a kernel returns nothing.
        self.kernels = kernels or {}
        # Variables bound to the VM's own allocations: contiguous, writable, and aliasing
        # nothing, so a kernel may write into them unchecked.
        self.owned: set[Var] = set()
        # The parameters some kernel writes into: the caller's array must take the result
        # itself, so the VM may not copy it on the way in (VirtualMachine's entry).
        self.written_params: set[Var] = set()
        self.constants = constants
        # The arrays the VM keeps between calls, one per call_tir output (its slot is its
        # index; the text says which output). Shared by the module's functions, as constants are.
        self.pool_slots = [] if pool_slots is None else pool_slots
        self.first_slot = len(self.pool_slots)
        # Variables read somewhere: a call made only for its effect binds nothing otherwise.
        self.used = set(used_vars(func))
        # The size in bytes of each storage of R.memory.alloc_storage, to check views against.
        self.storage_sizes: dict[Var, E.PrimExpr] = {}
        self.names = NameSupply(VM_RESERVED | set(globals_.values()))
        self.prim = PrimExprPrinter(self.names)
        self.defined_dims: set[int] = set()
        self.lines: list[str] = []
        self.indent = 1

    # ------------------------------------------------------------------ entry
    def generate(self) -> str:
        params = [self.names.get(p, p.name_hint) for p in self.func.params]
        if self.func.params:
            self.emit("# check the arguments against the signature")
        for param, pname in zip(self.func.params, params):
            self.check_value(pname, param.struct_info_, f"parameter {param.name_hint}")
        result = self.seq_expr(self.func.body)
        self.emit(f"return {result}")
        header = f"def {self.name}({', '.join(params)}):"
        return "\n".join([header, *self.lines]) + "\n"

    def emit(self, line: str) -> None:
        self.lines.append("    " * self.indent + line)

    # ------------------------------------------------------------------ argument checks
    def check_value(self, value: str, sinfo: StructInfo | None, what: str) -> None:
        """Emit the run-time check of ``value`` against ``sinfo``, binding new symbolic dims."""
        where = string_literal(f"{self.func_label()}: {what}")
        if isinstance(sinfo, TensorStructInfo):
            self.check_tensor(value, sinfo, where)
        elif isinstance(sinfo, TupleStructInfo):
            self.emit(f"check_tuple({value}, {where}, {len(sinfo.fields)})")
            for index, field in enumerate(sinfo.fields):
                self.check_value(f"{value}[{index}]", field, f"{what}[{index}]")
        elif isinstance(sinfo, ShapeStructInfo):
            self.emit(f"check_shape({value}, {where}, {sinfo.ndim})")
            if sinfo.values is not None:
                self.check_dims(value, sinfo.values, where)
        elif isinstance(sinfo, PrimStructInfo):
            self.emit(f"check_prim({value}, {where}, {string_literal(sinfo.dtype)})")
            if sinfo.value is not None:
                self.check_dims(f"({value},)", (sinfo.value,), where)

    def check_tensor(self, value: str, sinfo: TensorStructInfo, where: str) -> None:
        """One call per tensor: ``n, _ = check_tensor(x, where, dtype, (None, 784), names)``
        checks kind, rank, dtype and the known dims, and binds the new symbolic dims."""
        dtype = "None" if sinfo.dtype == "void" else string_literal(sinfo.dtype)
        dims = sinfo.shape_values
        if dims is None:
            expected = "None" if sinfo.ndim < 0 else _tuple_text(["None"] * sinfo.ndim)
            self.emit(f"check_tensor({value}, {where}, {dtype}, {expected}, ())")
            return
        targets, expected, labels, repeated = [], [], [], []
        new_here: set[int] = set()
        for axis, dim in enumerate(dims):
            if isinstance(dim, E.Var) and id(dim) not in self.defined_dims:
                if id(dim) in new_here:  # (n, n): the second n is checked after binding
                    repeated.append((axis, dim))
                    targets.append("_")
                else:
                    new_here.add(id(dim))
                    targets.append(self.prim.expr(dim))
                expected.append("None")
            else:
                self._require_defined(dim)
                targets.append("_")
                expected.append(self.prim.expr(dim))
            labels.append(string_literal(self.prim.expr(dim)))
        call = (
            f"check_tensor({value}, {where}, {dtype}, {_tuple_text(expected)}, "
            f"{_tuple_text(labels)})"
        )
        if new_here:
            self.emit(f"{', '.join(targets)}{',' if len(targets) == 1 else ''} = {call}")
            self.defined_dims |= new_here
        else:
            self.emit(call)
        for axis, dim in repeated:
            expected_text = self.prim.expr(dim)
            self.emit(
                f"check_dim({value}.shape[{axis}], {expected_text}, {where}, {axis}, "
                f"{string_literal(expected_text)})"
            )

    def check_dims(self, shape: str, dims: tuple[E.PrimExpr, ...], where: str) -> None:
        for axis, dim in enumerate(dims):
            actual = f"{shape}[{axis}]"
            if isinstance(dim, E.Var) and id(dim) not in self.defined_dims:
                self.defined_dims.add(id(dim))
                self.emit(f"{self.prim.expr(dim)} = {actual}")
                continue
            self._require_defined(dim)
            expected = self.prim.expr(dim)
            self.emit(
                f"check_dim({actual}, {expected}, {where}, {axis}, {string_literal(expected)})"
            )

    def _require_defined(self, expr: E.PrimExpr) -> None:
        for var in collect_vars(expr):
            if id(var) not in self.defined_dims:
                raise BuildError(
                    f"{self.func_label()}: the symbolic dim {var.name_hint} is used before any "
                    "parameter or match_cast defines it"
                )

    def func_label(self) -> str:
        return str(self.func.attrs.get("global_symbol", self.name))

    # ------------------------------------------------------------------ bodies
    def seq_expr(self, seq: Expr) -> str:
        if isinstance(seq, SeqExpr):
            for block in seq.blocks:
                for binding in block.bindings:
                    self.binding(binding)
            seq = seq.body
        if isinstance(seq, (Call, If)):
            # A branch may end in a call (`else: y = R.add(x, x)`): bound like any binding.
            result = Var("result", seq.struct_info_)
            self.used.add(result)
            self.binding(VarBinding(result, seq))
            seq = result
        return self.value(seq)

    def binding(self, binding: Any) -> None:
        target = self.names.get(binding.var, binding.var.name_hint)
        if isinstance(binding, MatchCast):
            self.emit(f"{target} = {self.value(binding.value)}")
            self.check_value(
                target, binding.struct_info, f"R.match_cast of {binding.var.name_hint}"
            )
            return
        if not isinstance(binding, VarBinding):
            raise BuildError(f"cannot build the binding {type(binding).__name__}")
        value = binding.value
        if isinstance(value, If):
            self.if_(target, value, binding.var.name_hint)
        elif isinstance(value, Call):
            self.call(target, value, binding)
        else:
            self.emit(f"{target} = {self.value(value)}")

    def if_(self, target: str, node: If, name: str) -> None:
        where = string_literal(f"{self.func_label()}: the condition of the if that defines {name}")
        self.emit(f"if as_bool({self.value(node.cond)}, {where}):")
        for branch in (node.true_branch, node.false_branch):
            self.indent += 1
            self.emit(f"{target} = {self.seq_expr(branch)}")
            self.indent -= 1
            if branch is node.true_branch:
                self.emit("else:")

    def call(self, target: str, call: Call, binding: VarBinding) -> None:
        op = call.op
        if isinstance(op, Op):
            emit = self.OP_EMITTERS.get(op.name)
            if emit is None:
                raise BuildError(
                    f"{self.func_label()}: "
                    f"`{binding.var.name_hint} = {_op_spelling(op.name)}(...)` "
                    f"uses the high-level operator {op.name}, which has no kernel yet; lower it "
                    "to TensorIR first with relax.transform.LegalizeOps()"
                )
            emit(self, target, call, binding)
        elif isinstance(op, GlobalVar):
            callee = self.globals.get(op.name_hint)
            if callee is None:
                raise BuildError(
                    f"{self.func_label()}: calls {op.name_hint}, which is not a "
                    "function of the module"
                )
            if op.name_hint in self.kernels:
                # A kernel writes into its output arguments and returns nothing.
                args = [(self.value(a), a.struct_info_, a) for a in call.args]
                self.effect(binding, self.kernel_call(op, args))
            else:
                self.emit(f"{target} = {callee}({self._values(call.args)})")
        elif isinstance(op, ExternFunc):
            self.effect(binding, f"call_packed({self._extern_name(op)}, {self._tuple(call.args)})")
            if binding.var in self.used:
                self.check_result(target, binding, op)
        else:
            self.emit(f"{target} = {self.value(op)}({self._values(call.args)})")

    def check_result(self, target: str, binding: VarBinding, func: Any) -> None:
        """A registered function's result is held to the struct info the call declares, as an
        argument is to its parameter's: what the code after it assumes must be so."""
        name = func.global_symbol if isinstance(func, ExternFunc) else getattr(func, "value", "")
        self.check_value(target, binding.var.struct_info_, f"the result of {name}")

    def effect(self, binding: VarBinding, statement: str) -> None:
        """A call made for what it writes: its result is bound only if something reads it."""
        if binding.var in self.used:
            self.emit(f"{self.names.get(binding.var, binding.var.name_hint)} = {statement}")
        else:
            self.emit(statement)

    # ------------------------------------------------------------------ the VM's own operators
    def pure_packed_call(self, target: str, call: Call, binding: VarBinding) -> None:
        """``R.call_pure_packed(f, *args)``: the registered function's result, checked."""
        func, *args = call.args
        self.emit(f"{target} = call_packed({self._extern_name(func)}, {self._tuple(args)})")
        self.check_result(target, binding, func)

    def alloc_tensor(self, target: str, call: Call, binding: VarBinding) -> None:
        """``R.builtin.alloc_tensor(shape, dtype, ...)``: a fresh array the VM owns."""
        shape, dtype = self._shape_text(call.args[0]), self._dtype_of(call.args[1])
        self.emit(f"{target} = {self._empty(shape, dtype)}")
        self.owned.add(binding.var)

    def alloc_storage(self, target: str, call: Call, binding: VarBinding) -> None:
        if self.on_gpu:
            raise BuildError(
                f"{self.func_label()}: `{binding.var.name_hint} = R.memory.alloc_storage(...)`: "
                "the cuda target allocates each tensor itself; build the module before "
                "memory planning (StaticPlanBlockMemory)"
            )
        size = call.args[0]
        if not isinstance(size, ShapeExpr) or len(size.values) != 1:
            raise BuildError(
                f"{self.func_label()}: `{binding.var.name_hint} = R.memory.alloc_storage(...)` "
                "needs its size in bytes as a literal shape, R.shape([nbytes])"
            )
        self.storage_sizes[binding.var] = size.values[0]
        self.emit(f"{target} = aligned_empty({self.prim_value(size.values[0])}, dtype=np.uint8)")

    def storage_view(self, target: str, call: Call, binding: VarBinding) -> None:
        """``R.memory.alloc_tensor``: a view of bytes ``[offset, offset + nbytes)`` of a storage,
        checked against the storage's size at build time when both are known, else at run time."""
        storage, offset, shape, dtype_arg = call.args
        if not isinstance(shape, ShapeExpr) or not isinstance(offset, PrimValue):
            raise BuildError(
                f"{self.func_label()}: `{binding.var.name_hint} = R.memory.alloc_tensor(...)` "
                "needs a literal offset and shape: R.prim_value(0), R.shape([...])"
            )
        dtype = self._dtype_of(dtype_arg)
        np_dtype = self._np_dtype(dtype)
        nbytes: E.PrimExpr = E.IntImm("int64", to_numpy(dtype).itemsize)
        for dim in shape.values:
            self._require_defined(dim)
            nbytes = nbytes * dim
        analyzer = Analyzer()
        end = analyzer.simplify(offset.value + nbytes)
        start = analyzer.simplify(offset.value)
        where = f"{self.func_label()}: R.memory.alloc_tensor of {binding.var.name_hint}"
        size = self.storage_sizes.get(storage) if isinstance(storage, Var) else None
        excess = None if size is None else analyzer.simplify(end - size)
        if isinstance(excess, E.IntImm):
            if excess.value > 0:
                raise BuildError(
                    f"{where} needs bytes {self.prim_value(start)} to {self.prim_value(end)}, "
                    f"but the storage {storage.name_hint} holds {self.prim_value(size)} bytes"
                )
        else:
            self.emit(
                f"check_storage({self.value(storage)}, {self.prim_value(end)}, "
                f"{string_literal(where)})"
            )
        self.emit(
            f"{target} = {self.value(storage)}[{self.prim_value(start)}:{self.prim_value(end)}]"
            f".view({np_dtype}).reshape({self._shape_text(shape)})"
        )
        self.owned.add(binding.var)

    def kill(self, target: str, call: Call, binding: VarBinding) -> None:
        value = call.args[0]
        if not isinstance(value, Var):
            raise BuildError(
                f"{self.func_label()}: R.{call.op.name.removeprefix('relax.')} "  # type: ignore[union-attr]
                "takes a variable"
            )
        # Dropping the name frees the memory once no other name or view refers to it.
        self.emit(f"del {self.value(value)}")
        if binding.var in self.used:
            self.emit(f"{target} = ()")

    def destination_passing_call(self, target: str, call: Call, binding: VarBinding) -> None:
        """``R.call_tir``/``R.call_dps_packed``: the outputs allocated, then the callee
        writing into them."""
        callee, args = call.args[0], call.args[1]
        if not isinstance(args, Tuple):
            raise BuildError(f"{self.func_label()}: call_tir arguments must be a tuple literal")
        outputs = []
        for index, sinfo in enumerate(call.sinfo_args):
            out = target if len(call.sinfo_args) == 1 else self.names.fresh(f"{target}_{index}")
            self.emit(f"{out} = {self.allocation(sinfo, out)}")
            outputs.append(out)
        inputs = [self.value(a) for a in args.fields]
        scalars: list[E.PrimExpr] = []
        if len(call.args) > 2:
            shape = call.args[2]
            if not isinstance(shape, ShapeExpr):
                raise BuildError(f"{self.func_label()}: call_tir's tir_vars must be a shape")
            scalars = list(shape.values)
        if call.op.name == "relax.call_tir":
            if not isinstance(callee, GlobalVar) or callee.name_hint not in self.kernels:
                raise BuildError(
                    f"{self.func_label()}: call_tir needs a TensorIR function of "
                    f"the module, got {callee!r}"
                )
            self.emit(
                self.kernel_call(
                    callee,
                    [
                        *[(text, a.struct_info_, a) for text, a in zip(inputs, args.fields)],
                        # Fresh allocations, which nothing else refers to.
                        *[(out, sinfo, None) for out, sinfo in zip(outputs, call.sinfo_args)],
                        *[(self.prim_value(v), PrimStructInfo(v.dtype), None) for v in scalars],
                    ],
                )
            )
        else:
            self.emit(
                f"call_dps_packed({self._extern_name(callee)}, {_tuple_text(inputs)}, "
                f"{_tuple_text(outputs)})"
            )
        if len(outputs) > 1:
            self.emit(f"{target} = ({', '.join(outputs)})")
        self.owned.add(binding.var)  # an allocation (a tuple of them for several)

    # How each operator the VM runs itself becomes Python: op name -> the method emitting it
    # (called with the target's name, the call and its binding). Any other operator is high
    # level: it has no kernel until LegalizeOps lowers it.
    OP_EMITTERS: ClassVar[dict[str, Callable[[RelaxToPython, str, Call, VarBinding], None]]] = {
        "relax.call_tir": destination_passing_call,
        "relax.call_dps_packed": destination_passing_call,
        "relax.call_pure_packed": pure_packed_call,
        "relax.builtin.alloc_tensor": alloc_tensor,
        "relax.memory.alloc_storage": alloc_storage,
        "relax.memory.alloc_tensor": storage_view,
        "relax.memory.kill_storage": kill,
        "relax.memory.kill_tensor": kill,
    }

    def kernel_call(
        self, kernel: GlobalVar, args: list[tuple[str, StructInfo | None, Expr | None]]
    ) -> str:
        """The call of ``kernel`` with ``args`` (text, struct info, and the expression, or None
        for a fresh allocation or a scalar). Arguments are held to the kernel's parameters as
        every compiled function's are (``runtime.module.check_arguments``): at build time
        where the struct info decides, at run time where only the values can; a VM allocation
        is known to be a writable, contiguous output that overlaps no other argument."""
        name = kernel.name_hint
        specs = self.kernels[name]
        spelled = [expr.name_hint if isinstance(expr, Var) else text for text, _, expr in args]
        label = f"{self.func_label()}: {name}({', '.join(spelled)})"
        if len(args) != len(specs):
            raise BuildError(
                f"{label} passes {len(args)} arguments, but {name} takes {len(specs)} "
                f"({', '.join(spec.name for spec in specs)})"
            )
        at_run_time = False
        for index, (spec, (_, sinfo, expr)) in enumerate(zip(specs, args)):
            where = f"{label}: argument {index} ({spec.name})"
            problem = _argument_problem(spec, sinfo)
            if problem is not None:
                raise BuildError(f"{where} {problem}")
            if spec.written and expr is not None:
                others = [other for other, (_, _, e) in enumerate(args) if e is expr]
                if len(others) > 1:
                    raise BuildError(
                        f"{where} receives a result, but the same value is passed as argument "
                        f"{', '.join(str(o) for o in others if o != index)} too; a kernel's "
                        "buffers must not overlap"
                    )
            if spec.written and expr in self.func.params:
                self.written_params.add(expr)
            owned = expr is None or expr in self.owned
            at_run_time |= not _proven(spec, sinfo) or (spec.written and not owned)
        texts = [text for text, _, _ in args]
        callee = self.globals[name]
        if at_run_time:
            key, label = string_literal(str(name)), string_literal(label)
            return f"{callee}(*checked_args({key}, {label}, {_tuple_text(texts)}))"
        return f"{callee}({', '.join(texts)})"

    def allocation(self, sinfo: StructInfo, name: str) -> str:
        """The array a call_tir output ``name`` is written into: on the cpu the one it got at
        the previous call when nothing refers to it any more (``pooled_empty``), else a new
        one."""
        if not isinstance(sinfo, TensorStructInfo) or sinfo.shape_values is None:
            raise BuildError(
                f"{self.func_label()}: an output of call_tir needs a known shape, got {sinfo!r}"
            )
        shape = self._dims_text(sinfo.shape_values)
        if self.on_gpu:
            return self._empty(shape, sinfo.dtype)
        if len(self.pool_slots) == self.first_slot:
            self.emit("# outputs reuse their last call's array once nothing else refers to it")
        self.pool_slots.append(f"{self.func_label()}: {name}")
        slot = len(self.pool_slots) - 1
        return f"pooled_empty({slot}, {shape}, dtype={self._np_dtype(sinfo.dtype)})"

    def _dtype_of(self, arg: Expr) -> str:
        if not isinstance(arg, DataTypeImm):
            raise BuildError(
                f'{self.func_label()}: an allocation needs its dtype as R.dtype("..."), '
                f"got {type(arg).__name__}"
            )
        return arg.value

    def _np_dtype(self, dtype: str) -> str:
        """The numpy type of an allocation: a dtype is code here, so only known ones pass."""
        if dtype not in SCALAR_DTYPES:
            raise BuildError(
                f"{self.func_label()}: cannot allocate a tensor of dtype {dtype!r}; give it one "
                f"of {', '.join(SCALAR_DTYPES)}"
            )
        return f"np.{dtype}"

    def _empty(self, shape: str, dtype: str) -> str:
        if self.on_gpu:
            return f"cuda.device_array({shape}, dtype={self._np_dtype(dtype)})"
        return f"aligned_empty({shape}, dtype={self._np_dtype(dtype)})"

    def _dims_text(self, dims: tuple[E.PrimExpr, ...]) -> str:
        for dim in dims:
            self._require_defined(dim)
        return _tuple_text([self.prim_value(dim) for dim in dims])

    def _shape_text(self, shape: Expr) -> str:
        """A shape argument: a literal's dims, or the run-time tuple a shape variable holds."""
        if isinstance(shape, ShapeExpr):
            return self._dims_text(shape.values)
        return self.value(shape)

    def _extern_name(self, func: Any) -> str:
        """The registered name of a packed function, as a string literal (never as code)."""
        if isinstance(func, ExternFunc):
            return string_literal(str(func.global_symbol))
        if isinstance(func, StringImm):
            return string_literal(str(func.value))
        raise BuildError(f"{self.func_label()}: a packed call needs a function name, got {func!r}")

    # ------------------------------------------------------------------ values
    def _values(self, args: Any) -> str:
        return ", ".join(self.value(a) for a in args)

    def _tuple(self, args: Any) -> str:
        return _tuple_text([self.value(a) for a in args])

    def prim_value(self, expr: E.PrimExpr) -> str:
        return self.prim.expr(expr)

    def value(self, expr: Any) -> str:
        if isinstance(expr, Var):
            if not self.names.has(expr):
                raise BuildError(
                    f"{self.func_label()}: variable {expr.name_hint} is used but never defined"
                )
            return self.names.get(expr, expr.name_hint)
        if isinstance(expr, Constant):
            self.constants.append(expr)
            return f"constants[{len(self.constants) - 1}]"
        if isinstance(expr, Tuple):
            return self._tuple(expr.fields)
        if isinstance(expr, TupleGetItem):
            base = self.value(expr.tuple_value)
            if isinstance(expr.tuple_value.struct_info_, TupleStructInfo):
                return f"{base}[{expr.index}]"  # the value was checked to be such a tuple
            where = string_literal(
                f"{self.func_label()}: {_label_of(expr.tuple_value)}[{expr.index}]"
            )
            return f"tuple_item({base}, {expr.index}, {where})"
        if isinstance(expr, ShapeExpr):
            return _tuple_text([self.prim_value(v) for v in expr.values])
        if isinstance(expr, PrimValue):
            return self.prim_value(expr.value)
        if isinstance(expr, (StringImm, DataTypeImm)):
            return string_literal(str(expr.value))
        if isinstance(expr, GlobalVar) and expr.name_hint in self.globals:
            return self.globals[expr.name_hint]
        if isinstance(expr, SeqExpr):
            return self.seq_expr(expr)
        raise BuildError(f"{self.func_label()}: cannot build the expression {type(expr).__name__}")


def _label_of(expr: Any) -> str:
    return expr.name_hint if isinstance(expr, Var) else type(expr).__name__


def _tuple_text(items: list[str]) -> str:
    return f"({', '.join(items)}{',' if len(items) == 1 else ''})"


def _op_spelling(name: str) -> str:
    return "R." + name.removeprefix("relax.")


def _argument_problem(spec: ParamSpec, sinfo: StructInfo | None) -> str | None:
    """What the struct info of an argument shows to be wrong for the kernel parameter
    ``spec``, or None (right, or unknown until run time)."""
    if sinfo is None or isinstance(sinfo, ObjectStructInfo):
        return None
    if spec.ndim is None:
        if isinstance(sinfo, PrimStructInfo) and _scalar_fits(sinfo.dtype, spec.dtype):
            return None
        return f"expects {a(spec.dtype)} scalar, but gets {format_struct_info(sinfo)}"
    got = f"but gets {format_struct_info(sinfo)}"
    if not isinstance(sinfo, TensorStructInfo) or sinfo.dtype not in ("void", spec.dtype):
        return f"expects {a(spec.dtype)} tensor, {got}"
    if sinfo.ndim not in (-1, spec.ndim):
        return f"expects a tensor of rank {spec.ndim}, {got}"
    for axis, (dim, size) in enumerate(zip(sinfo.shape_values or (), spec.shape)):
        if isinstance(dim, E.IntImm) and isinstance(size, int) and dim.value != size:
            return f"expects size {size} in dimension {axis}, {got}"
    return None


def _proven(spec: ParamSpec, sinfo: StructInfo | None) -> bool:
    """Whether the struct info alone shows the argument to be of the kind, dtype and rank
    ``spec`` takes (given that :func:`_argument_problem` found nothing wrong)."""
    if spec.ndim is None:
        return isinstance(sinfo, PrimStructInfo)
    return isinstance(sinfo, TensorStructInfo) and (sinfo.dtype, sinfo.ndim) == (
        spec.dtype,
        spec.ndim,
    )


def _scalar_fits(given: str, expected: str) -> bool:
    """A scalar of dtype ``given`` is taken for one of ``expected``: the same kind of number,
    or an integer where a float is expected."""

    def kind(dtype: str) -> str:
        return (
            "bool" if dtype == "bool" else "int" if dtype.startswith(("int", "uint")) else "float"
        )

    return kind(given) == kind(expected) or (kind(given), kind(expected)) == ("int", "float")
