"""Reference solutions of chapter 5's exercises (integration with machine learning frameworks)."""


def fx_cnn():
    import torch
    from torch import nn

    from mlckit import relax, topi
    from mlckit.script import relax as R

    # ------------------------------------------------------------ the chapter's importer
    def map_param(param):
        return relax.const(param.data.cpu().numpy(), "float32")

    def fetch_attr(fx_mod, target):
        value = fx_mod
        for name in target.split("."):
            value = getattr(value, name)
        return value

    def from_fx(fx_mod, input_shapes, call_function_map, call_module_map):
        input_index = 0
        node_map = {}
        named_modules = dict(fx_mod.named_modules())

        bb = relax.BlockBuilder()
        fn_inputs = []
        with bb.function("main"):
            with bb.dataflow():
                for node in fx_mod.graph.nodes:
                    if node.op == "placeholder":
                        shape = input_shapes[input_index]
                        input_index += 1
                        input_var = relax.Var(node.target, R.Tensor(shape, "float32"))
                        fn_inputs.append(input_var)
                        node_map[node] = input_var
                    elif node.op == "get_attr":
                        node_map[node] = map_param(fetch_attr(fx_mod, node.target))
                    elif node.op == "call_function":
                        node_map[node] = call_function_map[node.target](bb, node_map, node)
                    elif node.op == "call_module":
                        named_module = named_modules[node.target]
                        converter = call_module_map[type(named_module)]
                        node_map[node] = converter(bb, node_map, node, named_module)
                    elif node.op == "output":
                        output = bb.emit_output(node_map[node.args[0]])
            bb.emit_func_output(output, fn_inputs)
        return bb.get()

    # ------------------------------------------------------------ the chapter's converters
    def map_relu(bb, node_map, node):
        return bb.emit_te(topi.nn.relu, node_map[node.args[0]])

    def map_nn_relu(bb, node_map, node, nn_mod):
        return map_relu(bb, node_map, node)

    def map_nn_linear(bb, node_map, node, nn_mod):
        x = node_map[node.args[0]]
        w = map_param(nn_mod.weight)
        b = map_param(nn_mod.bias) if nn_mod.bias is not None else None
        return bb.emit_te(topi.nn.dense, x, w, b)

    # ------------------------------------------------------------ the new converters
    def map_nn_conv2d(bb, node_map, node, nn_mod):
        x = node_map[node.args[0]]
        w = map_param(nn_mod.weight)  # (out channels, in channels, kh, kw): OIHW
        conv = bb.emit_te(topi.nn.conv2d_nchw, x, w, nn_mod.stride, nn_mod.padding, nn_mod.dilation)
        if nn_mod.bias is None:
            return conv
        # one bias value per output channel: shape it (1, C, 1, 1) to broadcast over NCHW
        bias = relax.const(nn_mod.bias.data.cpu().numpy().reshape(1, -1, 1, 1), "float32")
        return bb.emit_te(topi.add, conv, bias)

    def map_nn_max_pool2d(bb, node_map, node, nn_mod):
        x = node_map[node.args[0]]
        # torch's stride defaults to the kernel size: nn.MaxPool2d(2) has stride 2
        return bb.emit_te(
            topi.nn.max_pool2d,
            x,
            kernel=nn_mod.kernel_size,
            stride=nn_mod.stride,
            padding=nn_mod.padding,
        )

    def map_nn_flatten(bb, node_map, node, nn_mod):
        # (n, 32, 13, 13) -> (n, 5408): keep the batch, merge the rest in NCHW order
        return bb.emit_te(topi.nn.flatten, node_map[node.args[0]])

    def import_cnn(fx_module):
        return from_fx(
            fx_module,
            input_shapes=[(1, 1, 28, 28)],
            call_function_map={torch.relu: map_relu},
            call_module_map={
                nn.Linear: map_nn_linear,
                nn.ReLU: map_nn_relu,
                nn.Conv2d: map_nn_conv2d,
                nn.MaxPool2d: map_nn_max_pool2d,
                nn.Flatten: map_nn_flatten,
            },
        )

    return import_cnn
