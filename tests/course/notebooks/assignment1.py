# %% [cell 0]
# [shell] !python3 -m pip install mlc-ai-nightly -f https://mlc.ai/wheels
# [shell] !python3 -m pip install torch torchvision torchaudio torchsummary --extra-index-url https://download.pytorch.org/whl/cpu

# %% [cell 1]
import numpy as np
import pickle as pkl
import torch
import torch.nn.functional as F
# [data] import torchvision
import mlckit as tvm
import mlckit.testing

from matplotlib import pyplot as plt
from torch import nn
# [data] from torchvision import transforms
from mlckit import topi, relax, te
from mlckit.script import tir as T

# %% [cell 2]
batch_size = 4
input_shape = (batch_size, 1, 28, 28)  # NCHW layout


def pytorch_model():
    list = []
    list.append(nn.Conv2d(in_channels=1, out_channels=32, kernel_size=(3, 3), bias=True))
    list.append(nn.ReLU())
    list.append(nn.MaxPool2d(kernel_size=(2, 2)))
    list.append(nn.Flatten())
    list.append(nn.Linear(in_features=5408, out_features=100, bias=True))
    list.append(nn.ReLU())
    list.append(nn.Linear(in_features=100, out_features=10, bias=True))
    list.append(nn.Softmax(dim=1))

    model = nn.Sequential(*list).cpu()
    name_map = {
        "0.weight": "conv2d_weight",
        "0.bias": "conv2d_bias",
        "4.weight": "linear0_weight",
        "4.bias": "linear0_bias",
        "6.weight": "linear1_weight",
        "6.bias": "linear1_bias",
    }
    for name, param in model.named_parameters():
        param.data = torch.from_numpy(weight_map[name_map[name]]).cpu()
    return model

# %% [cell 3]
# Hide outputs
# [shell] !wget -nc https://github.com/mlc-ai/web-data/raw/main/models/fasionmnist_mlp_assignment_params.pkl

# %% [cell 4]
# Load the weight map from file.
# The prediction accuracy of the weight map on test data is around 83.3%.
weight_map = pkl.load(open("fasionmnist_mlp_assignment_params.pkl", "rb"))
class_names = ['T-shirt/top', 'Trouser', 'Pullover', 'Dress', 'Coat',
               'Sandal', 'Shirt', 'Sneaker', 'Bag', 'Ankle boot']


def test(model, test_loader):
    model.eval()
    test_loss = 0
    correct = 0
    with torch.no_grad():
        print_img = True
        for data, label in test_loader:
            data, label = data.cpu(), label.cpu()
            output = model(data)
            # sum up batch loss
            test_loss += F.nll_loss(output, label, reduction="sum").item()
            # get the index of the max log-probability
            pred = output.argmax(dim=1, keepdim=True)
            if print_img:
                imshow(data[0])
                print("predict: {}, label: {}".format(class_names[pred[0][0]], class_names[label[0]]))
                print_img = False
            correct += pred.eq(label.view_as(pred)).sum().item()

    test_loss /= len(test_loader.dataset)

    print("\nTest set: Average loss: {:.4f}, Accuracy: {}/{} ({:.0f}%)\n".format(
        test_loss, correct, len(test_loader.dataset),
        100. * correct / len(test_loader.dataset)))


def imshow(img):
    img = img / 2 + 0.5
    npimg = img.numpy()
    plt.imshow(np.transpose(npimg, (1, 2, 0)))
    plt.show()


test_data = mlckit.datasets.torch_dataset("sprite900")  # [data]
test_loader = torch.utils.data.DataLoader(
    test_data, batch_size=batch_size, shuffle=False)
test(pytorch_model(), test_loader)

# %% [cell 5]
def relu(A):
    B = te.compute(shape=(128, 128), fcompute=lambda i, j: te.max(A[i, j], 0), name="B")
    return B


def emit_te_example():
    bb = relax.BlockBuilder()
    x = relax.Var("x", (128, 128), relax.DynTensorType(2, "float32"))
    with bb.function("main", [x]):
        with bb.dataflow():
            lv0 = bb.emit_te(relu, x)
            gv = bb.emit_output(lv0)
        bb.emit_func_output(gv)
    return bb.get()

# %% [cell 6]
import IPython

mod = emit_te_example()
IPython.display.Code(mod.script(), language="python")

# %% [cell 7]
def create_model_via_emit_te():
    bb = relax.BlockBuilder()
    x = relax.Var("x", input_shape, relax.DynTensorType(batch_size, "float32"))

    conv2d_weight = relax.const(weight_map["conv2d_weight"], "float32")
    conv2d_bias = relax.const(weight_map["conv2d_bias"].reshape(1, 32, 1, 1), "float32")
    linear0_weight = relax.const(weight_map["linear0_weight"], "float32")
    linear0_bias = relax.const(weight_map["linear0_bias"].reshape(1, 100), "float32")
    linear1_weight = relax.const(weight_map["linear1_weight"], "float32")
    linear1_bias = relax.const(weight_map["linear1_bias"].reshape(1, 10), "float32")

    with bb.function("main", [x]):
        with bb.dataflow():
           # TODO
            # [solution] the layers with TOPI's operators, in the model's order
            conv = bb.emit_te(topi.nn.conv2d, x, conv2d_weight, strides=1, padding=0, dilation=1)  # [solution]
            conv = bb.emit_te(topi.add, conv, conv2d_bias)  # [solution]
            relu0 = bb.emit_te(topi.nn.relu, conv)  # [solution]
            pool = bb.emit_te(topi.nn.pool2d, relu0, kernel=[2, 2], stride=[2, 2], dilation=[1, 1], padding=[0, 0, 0, 0], pool_type="max")  # [solution]
            flat = bb.emit_te(topi.nn.flatten, pool)  # [solution]
            dense0 = bb.emit_te(topi.nn.dense, flat, linear0_weight)  # [solution]
            dense0 = bb.emit_te(topi.add, dense0, linear0_bias)  # [solution]
            relu1 = bb.emit_te(topi.nn.relu, dense0)  # [solution]
            dense1 = bb.emit_te(topi.nn.dense, relu1, linear1_weight)  # [solution]
            dense1 = bb.emit_te(topi.add, dense1, linear1_bias)  # [solution]
            probs = bb.emit_te(topi.nn.softmax, dense1, axis=1)  # [solution]
            gv = bb.emit_output(probs)  # [solution]
        bb.emit_func_output(gv)

    return bb.get()


def build_mod(mod):
    exec = relax.vm.build(mod, "llvm")
    dev = tvm.cpu()
    vm = relax.VirtualMachine(exec, dev)
    return vm


def check_equivalence(mod, torch_model, test_loader):
    torch_model.eval()
    with torch.no_grad():
        rt_mod = build_mod(mod)
        for data, label in test_loader:
            data, label = data.cpu(), label.cpu()
            output_from_pytorch = torch_model(data).numpy()
            output_from_relax = rt_mod["main"](tvm.nd.array(data, tvm.cpu())).numpy()
            tvm.testing.assert_allclose(output_from_pytorch, output_from_relax, rtol=1e-4)


test_data = mlckit.datasets.torch_dataset("sprite900")  # [data]
test_loader = torch.utils.data.DataLoader(test_data, batch_size=batch_size, shuffle=False)

mod = create_model_via_emit_te()
torch_model = pytorch_model()

check_equivalence(mod, torch_model, test_loader)
IPython.display.Code(mod.script(), language="python")

# %% [cell 8]


@tvm.register_func("env.conv2d", override=True)  # [solution]
def torch_conv2d(x: tvm.nd.NDArray, w: tvm.nd.NDArray, out: tvm.nd.NDArray):  # [solution]
    out_torch = torch.from_dlpack(out)  # [solution]
    out_torch.copy_(torch.nn.functional.conv2d(torch.from_dlpack(x), torch.from_dlpack(w)))  # [solution]


def create_model_with_torch_func():
    bb = relax.BlockBuilder()

    x = relax.Var("x", input_shape, relax.DynTensorType(4, "float32"))

    conv2d_weight = relax.const(weight_map["conv2d_weight"], "float32")
    conv2d_bias = relax.const(weight_map["conv2d_bias"].reshape(1, 32, 1, 1), "float32")
    linear0_weight = relax.const(weight_map["linear0_weight"], "float32")
    linear0_bias = relax.const(weight_map["linear0_bias"].reshape(1, 100), "float32")
    linear1_weight = relax.const(weight_map["linear1_weight"], "float32")
    linear1_bias = relax.const(weight_map["linear1_bias"].reshape(1, 10), "float32")

    with bb.function("main", [x]):
        with bb.dataflow():
            # TODO:
            # [solution] the convolution through torch (registered above as env.conv2d), the rest with TOPI
            conv = bb.emit(relax.call_dps_packed("env.conv2d", (x, conv2d_weight), relax.TensorStructInfo((4, 32, 26, 26), "float32")))  # [solution]
            conv = bb.emit_te(topi.add, conv, conv2d_bias)  # [solution]
            relu0 = bb.emit_te(topi.nn.relu, conv)  # [solution]
            pool = bb.emit_te(topi.nn.pool2d, relu0, kernel=[2, 2], stride=[2, 2], dilation=[1, 1], padding=[0, 0, 0, 0], pool_type="max")  # [solution]
            flat = bb.emit_te(topi.nn.flatten, pool)  # [solution]
            dense0 = bb.emit_te(topi.add, bb.emit_te(topi.nn.dense, flat, linear0_weight), linear0_bias)  # [solution]
            relu1 = bb.emit_te(topi.nn.relu, dense0)  # [solution]
            dense1 = bb.emit_te(topi.add, bb.emit_te(topi.nn.dense, relu1, linear1_weight), linear1_bias)  # [solution]
            gv = bb.emit_output(bb.emit_te(topi.nn.softmax, dense1, axis=1))  # [solution]
        bb.emit_func_output(gv)

    return bb.get()


test_loader = torch.utils.data.DataLoader(test_data, batch_size=batch_size, shuffle=False)
mod = create_model_with_torch_func()
check_equivalence(mod, torch_model, test_loader)

# %% [cell 9]
@T.prim_func
def before_inline(a: T.handle, c: T.handle) -> None:
    A = T.match_buffer(a, (128, 128))
    B = T.alloc_buffer((128, 128))
    C = T.match_buffer(c, (128, 128))
    for i, j in T.grid(128, 128):
        with T.block("B"):
            vi, vj = T.axis.remap("SS", [i, j])
            B[vi, vj] = A[vi, vj] * 2.0
    for i, j in T.grid(128, 128):
        with T.block("C"):
            vi, vj = T.axis.remap("SS", [i, j])
            C[vi, vj] = B[vi, vj] + 1.0


sch = tvm.tir.Schedule(before_inline)
sch.compute_inline(sch.get_block("B"))
IPython.display.Code(sch.mod["main"].script(), language="python")

# %% [cell 10]
@T.prim_func
def before_fuse(a: T.handle, b: T.handle) -> None:
    A = T.match_buffer(a, (128, 128))
    B = T.match_buffer(b, (128, 128))
    for i, j in T.grid(128, 128):
        with T.block("B"):
            vi, vj = T.axis.remap("SS", [i, j])
            B[vi, vj] = A[vi, vj] * 2.0


sch = tvm.tir.Schedule(before_fuse)
i, j = sch.get_loops(sch.get_block("B"))
sch.fuse(i, j)
IPython.display.Code(sch.mod["main"].script(), language="python")

# %% [cell 11]
mod = create_model_via_emit_te()
sch = tvm.tir.Schedule(mod)

# Step 1. Get blocks
# block = sch.get_block(name="your_block_name", func_name="your_function_name")
block = sch.get_block(name="conv2d_nchw", func_name="conv2d")  # [solution]

# Step 2. Inline the padding block (if exists)

# Step 3. Get loops
n, co, h, w, ci, kh, kw = sch.get_loops(block)  # [solution]

# Step 4. Organize the loops
co0, co1 = sch.split(co, [None, 8])  # [solution]
w0, w1 = sch.split(w, [None, 2])  # [solution]
sch.reorder(n, co0, h, w0, ci, kh, kw, co1, w1)  # [solution]

# Step 5. decompose reduction
fused = sch.fuse(n, co0, h, w0)  # [solution]
sch.parallel(fused)  # [solution] loop kinds before decompose_reduction, which copies them
sch.vectorize(w1)  # [solution]
sch.decompose_reduction(block, ci)  # [solution]

# Step 6. fuse + vectorize / fuse + parallel / fuse + unroll

IPython.display.Code(sch.mod.script(), language="python")

# %% [cell 12]
test_loader = torch.utils.data.DataLoader(test_data, batch_size=batch_size, shuffle=False)
check_equivalence(sch.mod, torch_model, test_loader)
