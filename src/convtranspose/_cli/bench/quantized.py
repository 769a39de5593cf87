"""The quantized suite (``convtranspose bench --quantized``): each layer in int8 through
the dialect each peer runtime runs, against that runtime, and in float32 through this
library, on the same values.

Per layer the row holds our int8 time in each dialect (``ct.qlinear_conv_transpose``
for the ONNX QDQ model and OpenVINO's FakeQuantize pattern, ``ct.torch_quantized_conv_transpose``
for torch's quantized module on an engine), our float32 time on the dequantized
operands, each peer's time, each peer's result checked against the dialect that
reproduces it (within one unit of the output, the documented bound), and two ratios:
our float32 time over our int8 time, and the best int8 peer's time over our time in the
dialect it runs.  onnxruntime's CPU provider runs the QDQ model in float32: it is timed
and checked, labelled ``(float)``, and never the best int8 peer.  With ``--prepared`` ours
(int8 and float32) run through prepared layers made before the timing, as the peers'
compiled models and modules are.
"""

from __future__ import annotations

import statistics
import sys
import warnings
from dataclasses import asdict, replace

import numpy as np

from .peers import Unsupported, onnxruntime_session, run_ours
from .random_suite import random_layers
from .suite import THREADS, Layer

#: The fixed quantized layers: GEMM-bound decoder layers and a small one (NCX float32
#: geometry; the int8 operands are drawn by :func:`quantized_inputs`).
QUANTIZED_SUITE: list[Layer] = [
    Layer("DCGAN N4 256->128 16x16 k4 s2 p1", 4, 256, 128, (16, 16), 4, 2, 1),
    Layer("DCGAN N16 256->128 16x16 k4 s2 p1", 16, 256, 128, (16, 16), 4, 2, 1, quick=False),
    Layer("U-Net N1 512->256 32x32 k2 s2", 1, 512, 256, (32, 32), 2, 2),
    Layer("seg head N1 128->64 64x64 k4 s2 p1", 1, 128, 64, (64, 64), 4, 2, 1),
    Layer("small N1 16->16 8x8 k3 s2 p1", 1, 16, 16, (8, 8), 3, 2, 1),
]

def quantized_random_layers(seed: int, count: int) -> list[Layer]:
    """The random suite's layers (:func:`.random_suite.random_layers`) as the quantized
    suite runs them: channels first (every quantized dialect's layout) in float32 for
    our float32 time; a layer drawn in both layouts is run once."""
    layers: dict[str, Layer] = {}
    for layer in random_layers(seed, count):
        layer = replace(layer, layout="NCX", dtype="float32")
        layers.setdefault(layer.label, layer)
    return list(layers.values())


#: Our runners' names: the float32 layer and each int8 dialect.
FLOAT = "convtranspose float32"
QLINEAR = "convtranspose qlinear"


def _torch_dialect(engine: str) -> str:
    return f"convtranspose torch-{engine}"


def vnni_flags(cpuinfo: str | None = None) -> list[str]:
    """The int8 dot-product flags (``avx512_vnni``, ``avx_vnni``) of the first
    processor in ``/proc/cpuinfo`` (or the text ``cpuinfo``); empty elsewhere."""
    if cpuinfo is None:
        try:
            with open("/proc/cpuinfo", encoding="ascii", errors="replace") as handle:
                cpuinfo = handle.read()
        except OSError:
            return []
    for line in cpuinfo.splitlines():
        if line.split(":")[0].strip() == "flags":
            flags = set(line.split(":", 1)[1].split())
            return [flag for flag in ("avx512_vnni", "avx_vnni") if flag in flags]
    return []


def quantized_inputs(layer: Layer, seed: int = 0) -> dict:
    """uint8 data (zero point 0, as after a ReLU) and int8 weights (zero point 0, within
    +-63 so that FBGEMM's int16 pair sums on CPUs without VNNI cannot saturate), their
    scales, the output's scale (about 40 units per standard deviation of the sum) and
    zero point 128; ``float``: the same layer dequantized, for our float32 time."""
    rng = np.random.default_rng(seed)
    x = rng.integers(0, 256, (layer.batch, layer.in_channels) + layer.spatial, dtype=np.uint8)
    w = np.clip(np.rint(rng.standard_normal(
        (layer.in_channels, layer.out_channels // layer.groups) + (layer.kernel,) * layer.rank)
        * 20), -63, 63).astype(np.int8)
    x_scale, w_scale = np.float32(0.02), np.float32(0.005)
    taps = max(1, layer.kernel // layer.stride) ** layer.rank
    spread = float(np.sqrt(layer.in_channels // layer.groups * taps) * 128 * 20)
    y_scale = np.float32(x_scale * w_scale * spread / 40)
    return {"x": x, "w": w, "x_scale": x_scale, "w_scale": w_scale, "y_scale": y_scale,
            "y_zero_point": np.uint8(128),
            "float": {"data": x.astype(np.float32) * x_scale,
                      "weights": w.astype(np.float32) * w_scale}}


def _geometry(layer: Layer) -> dict:
    rank = layer.rank
    return dict(group=layer.groups, strides=[layer.stride] * rank, pads=[layer.pad] * (2 * rank),
                dilations=[layer.dilation] * rank, output_padding=[layer.output_padding] * rank)


def _ours(function, data_name: str, data: np.ndarray, arguments: dict, prepared: bool):
    """Our runner of ``function`` on ``data`` with ``arguments`` (by name); with
    ``prepared``, through a prepared layer (``ct.prepare``) made here, outside the
    timing, as the peers' compiled models are."""
    import convtranspose as ct

    if prepared:
        layer = ct.prepare(function, **arguments)
        return lambda: layer(data)
    return lambda: function(**{data_name: data}, **arguments)


def ours_qlinear(layer: Layer, q: dict, prepared: bool = False):
    """Our ``ct.qlinear_conv_transpose`` runner of the layer (see :func:`_ours`)."""
    import convtranspose as ct

    return _ours(ct.qlinear_conv_transpose, "x", q["x"], dict(
        x_scale=q["x_scale"], x_zero_point=np.uint8(0), w=q["w"], w_scale=q["w_scale"],
        w_zero_point=np.int8(0), y_scale=q["y_scale"], y_zero_point=q["y_zero_point"],
        **_geometry(layer)), prepared)


def ours_torch(layer: Layer, q: dict, engine: str, prepared: bool = False):
    """Our ``ct.torch_quantized_conv_transpose`` runner on ``engine`` (see :func:`_ours`)."""
    import convtranspose as ct

    return _ours(ct.torch_quantized_conv_transpose, "input", q["x"], dict(
        weight=q["w"], bias=None, stride=layer.stride, padding=layer.pad,
        output_padding=layer.output_padding, groups=layer.groups, dilation=layer.dilation,
        input_scale=q["x_scale"], input_zero_point=0, weight_scale=q["w_scale"],
        weight_zero_point=0, output_scale=q["y_scale"],
        output_zero_point=int(q["y_zero_point"]), engine=engine), prepared)


def _torch(engine: str):
    def build(layer: Layer, q: dict):
        import torch

        if engine not in torch.backends.quantized.supported_engines:
            raise Unsupported(f"torch has no {engine} engine here")
        torch.set_num_threads(THREADS)
        torch.backends.quantized.engine = engine
        with warnings.catch_warnings():
            # torch deprecates its quantized tensors; the modules still run on them.
            warnings.simplefilter("ignore", UserWarning)
            module, data = _torch_module(layer, q, torch)

        def run():
            # The engine is a process-wide setting: set again before every call, as
            # another torch peer may have changed it between rounds.
            torch.backends.quantized.engine = engine
            with torch.inference_mode():
                return module(data)
        return run, lambda out: out.int_repr().numpy()
    return build


def _torch_module(layer: Layer, q: dict, torch):
    """torch's quantized module of the layer (weights set, output scale and zero point)
    and the quantized input."""
    modules = torch.ao.nn.quantized
    module = {1: modules.ConvTranspose1d, 2: modules.ConvTranspose2d,
              3: modules.ConvTranspose3d}[layer.rank](
        layer.in_channels, layer.out_channels, layer.kernel, stride=layer.stride,
        padding=layer.pad, output_padding=layer.output_padding, groups=layer.groups,
        bias=False, dilation=layer.dilation)
    weight = torch._make_per_tensor_quantized_tensor(torch.from_numpy(q["w"]),
                                                     float(q["w_scale"]), 0)
    module.set_weight_bias(weight, None)
    module.scale, module.zero_point = float(q["y_scale"]), int(q["y_zero_point"])
    data = torch._make_per_tensor_quantized_tensor(torch.from_numpy(q["x"]),
                                                   float(q["x_scale"]), 0)
    return module, data


def _openvino(layer: Layer, q: dict):
    """FakeQuantize (uint8 data, int8 weights, uint8 result) around
    (Group)ConvolutionBackpropData, on float32 data as OpenVINO's API takes it; the row
    records the deconvolution's runtime precision (int8 only when it is u8 or i8)."""
    import openvino as ov
    from openvino import opset1, opset13

    rank, groups = layer.rank, layer.groups
    xs, ws, ys, yz = (float(q["x_scale"]), float(q["w_scale"]), float(q["y_scale"]),
                      int(q["y_zero_point"]))

    def fake_quantize(node, low: float, high: float, levels: int):
        low_node, high_node = (opset1.constant(np.float32(low)), opset1.constant(np.float32(high)))
        return opset13.fake_quantize(node, low_node, high_node, low_node, high_node, levels)

    parameter = opset1.parameter(list(q["float"]["data"].shape), ov.Type.f32)
    data = fake_quantize(parameter, 0.0, 255 * xs, 256)
    weights = q["float"]["weights"]
    if groups > 1:
        weights = weights.reshape((groups, weights.shape[0] // groups) + weights.shape[1:])
    filter_node = fake_quantize(opset1.constant(weights), -127 * ws, 127 * ws, 255)
    geometry = dict(strides=[layer.stride] * rank, pads_begin=[layer.pad] * rank,
                    pads_end=[layer.pad] * rank, dilations=[layer.dilation] * rank,
                    output_padding=[layer.output_padding] * rank)
    make = opset1.convolution_backprop_data if groups == 1 else opset1.group_convolution_backprop_data
    conv = make(data, filter_node, **geometry)
    result = fake_quantize(conv, -yz * ys, (255 - yz) * ys, 256)
    compiled = ov.Core().compile_model(ov.Model([result], [parameter], "quantized_bench"), "CPU",
                                       {"INFERENCE_PRECISION_HINT": "f32",
                                        "INFERENCE_NUM_THREADS": str(THREADS)})
    precision = openvino_deconvolution_precision(compiled)
    request = compiled.create_infer_request()
    feed = q["float"]["data"]

    def run():
        return request.infer({0: feed}, share_inputs=True, share_outputs=True)[0]

    def to_units(out):
        return np.clip(np.rint(np.asarray(out, np.float64) / ys) + yz, 0, 255)
    run.precision = precision  # type: ignore[attr-defined]
    return run, to_units


def openvino_deconvolution_precision(compiled) -> str:
    """The runtime precision of the compiled model's deconvolution (``u8``/``i8`` when
    the low-precision transformations made it int8), ``?`` when not found."""
    for op in compiled.get_runtime_model().get_ordered_ops():
        info = op.get_rt_info()
        if info["layerType"].astype(str) == "Deconvolution":
            return info["runtimePrecision"].astype(str)
    return "?"


def _onnxruntime(layer: Layer, q: dict):
    """The QDQ model (DequantizeLinear, ConvTranspose, QuantizeLinear); the CPU
    provider runs it in float32."""
    from onnx import TensorProto, helper, numpy_helper

    geometry = _geometry(layer)
    nodes = [helper.make_node("DequantizeLinear", ["x", "xs", "xz"], ["xf"]),
             helper.make_node("DequantizeLinear", ["w", "ws", "wz"], ["wf"]),
             helper.make_node("ConvTranspose", ["xf", "wf"], ["yf"],
                              kernel_shape=[layer.kernel] * layer.rank, **geometry),
             helper.make_node("QuantizeLinear", ["yf", "ys", "yz"], ["y"])]
    constants = {"xs": q["x_scale"], "xz": np.uint8(0), "w": q["w"], "ws": q["w_scale"],
                 "wz": np.int8(0), "ys": q["y_scale"], "yz": q["y_zero_point"]}
    graph = helper.make_graph(
        nodes, "quantized_bench",
        [helper.make_tensor_value_info("x", TensorProto.UINT8, list(q["x"].shape))],
        [helper.make_tensor_value_info("y", TensorProto.UINT8, None)],
        initializer=[numpy_helper.from_array(np.asarray(v), k) for k, v in constants.items()])
    session = onnxruntime_session(graph, 21)
    feed = {"x": q["x"]}
    return (lambda: session.run(None, feed)[0]), (lambda out: out)


def _litert(layer: Layer, q: dict):
    """LiteRT's int8 TRANSPOSE_CONV: ``tf.nn.conv2d_transpose`` on the dequantized layer
    converted to full-integer int8 by ``tf.lite.TFLiteConverter`` (the layer's data as
    the representative dataset; the converter picks the scales, per-channel weights),
    run by the interpreter's default kernels (XNNPACK).  Returns our call as well:
    ``ct.tflite_quantized_transpose_conv`` on the model's own operands (``(function,
    data operand's name, data, the other arguments)``, :func:`_ours`'s)."""
    if layer.rank != 2 or layer.groups != 1 or layer.dilation != 1 or layer.output_padding:
        raise Unsupported("TFLite's TRANSPOSE_CONV is 2-D, without groups, dilation or"
                          " output padding")
    try:
        import tensorflow as tf
    except ImportError:
        raise Unsupported("building the model needs tensorflow's TFLiteConverter") from None
    from ai_edge_litert import interpreter as lite

    data = np.ascontiguousarray(np.moveaxis(q["float"]["data"], 1, -1))  # NHWC
    filters = tf.constant(q["float"]["weights"].transpose(2, 3, 1, 0))   # (H, W, O, I)
    output_shape = [layer.batch, *layer.output_spatial, layer.out_channels]
    model = tf.function(lambda x: tf.nn.conv2d_transpose(
        x, filters, output_shape, strides=layer.stride, padding="SAME"))
    converter = tf.lite.TFLiteConverter.from_concrete_functions(
        [model.get_concrete_function(tf.TensorSpec(data.shape, tf.float32))], model)
    converter.optimizations = [tf.lite.Optimize.DEFAULT]
    converter.representative_dataset = lambda: iter([[data]])
    converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
    converter.inference_input_type = converter.inference_output_type = tf.int8
    with warnings.catch_warnings():
        # The converter warns that an int8 input has no recorded statistics: the
        # representative dataset gives them.
        warnings.simplefilter("ignore", UserWarning)
        blob = converter.convert()
    interpreter = lite.Interpreter(model_content=blob, num_threads=THREADS)
    interpreter.allocate_tensors()
    return _litert_runners(interpreter, data, layer.stride)


def _litert_runners(interpreter, data: np.ndarray, stride: int):
    """The interpreter's runner, its output's converter (none: int8 NHWC, as ours) and
    our call on the model's operands (read back from the interpreter; :func:`_litert`)."""
    import convtranspose as ct

    op = next(o for o in interpreter._get_ops_details() if o["op_name"] == "TRANSPOSE_CONV")
    details = {d["index"]: d for d in interpreter.get_tensor_details()}
    shape_index, weights_index, input_index = (int(i) for i in op["inputs"][:3])
    output_index = int(op["outputs"][0])

    def params(index):
        quantization = details[index]["quantization_parameters"]
        return quantization["scales"], quantization["zero_points"]

    (x_scale, x_zero), (w_scale, w_zero), (y_scale, y_zero) = (
        params(input_index), params(weights_index), params(output_index))
    x = np.clip(np.rint(data / x_scale[0]) + x_zero[0], -128, 127).astype(np.int8)
    bias = (interpreter.get_tensor(int(op["inputs"][3]))
            if len(op["inputs"]) > 3 and int(op["inputs"][3]) >= 0 else None)
    arguments = dict(output_shape=interpreter.get_tensor(shape_index).tolist(),
                     weights=interpreter.get_tensor(weights_index), bias=bias,
                     input_scale=x_scale, input_zero_point=x_zero, weights_scale=w_scale,
                     weights_zero_point=w_zero, output_scale=y_scale,
                     output_zero_point=y_zero, padding="SAME", stride_h=stride, stride_w=stride)
    model_input = next(d["index"] for d in interpreter.get_input_details())
    model_output = next(d["index"] for d in interpreter.get_output_details())

    def run():
        interpreter.set_tensor(model_input, x)
        interpreter.invoke()
        return interpreter.get_tensor(model_output)
    return run, lambda out: out, (ct.tflite_quantized_transpose_conv, "input", x, arguments)


#: Each quantized peer: how it is built, the dialect of ours it is checked and timed
#: against, its module, and whether it computes in int8 (onnxruntime's CPU provider
#: runs QDQ in float32; OpenVINO's is read from its runtime model per layer).
QUANTIZED_PEERS = {
    "torch-fbgemm": (_torch("fbgemm"), _torch_dialect("fbgemm"), "torch", True),
    "torch-x86": (_torch("x86"), _torch_dialect("x86"), "torch", True),
    "openvino-int8": (_openvino, QLINEAR, "openvino", True),
    "litert-int8": (_litert, "convtranspose tflite", "ai_edge_litert", True),
    "onnxruntime-qdq (float)": (_onnxruntime, QLINEAR, "onnxruntime", False),
}


def installed_quantized_peers(requested: list[str] | None = None) -> list[str]:
    """The quantized peers (of ``requested``, else all) whose runtime is installed;
    a requested float peer's name (``torch``) selects its quantized peers."""
    import importlib.util

    names = [name for name, (_, _, module, _) in QUANTIZED_PEERS.items()
             if requested is None or name in requested or module in requested]
    return [name for name in names
            if importlib.util.find_spec(QUANTIZED_PEERS[name][2]) is not None]


def units_apart(name: str, layer: Layer, ours: np.ndarray, theirs: np.ndarray) -> int:
    """The most units of the output by which ``theirs`` differs from ``ours``; raises
    AssertionError on a shape mismatch or beyond one unit (the documented bound)."""
    theirs = np.asarray(theirs)
    if ours.shape != theirs.shape:
        raise AssertionError(f"{layer.label}: {name} shape {theirs.shape} != ours {ours.shape}")
    apart = int(np.max(np.abs(ours.astype(np.int64) - theirs.astype(np.int64)))) if ours.size else 0
    if apart > 1:
        raise AssertionError(f"{layer.label}: {name} differs from convtranspose by {apart}"
                             " units of the output (the bound is one)")
    return apart


def _peer_runners(layer: Layer, q: dict, peers: list[str], row: dict, ours: dict,
                  prepared: bool = False) -> dict:
    """Each peer that builds, runs and agrees with its dialect of ours, by name; the
    others in ``row["skipped"]`` with the reason. Adds our dialect runners to ``ours``
    (through prepared layers where ``prepared``)."""
    runners = {}
    for peer in peers:
        build, dialect, _, _ = QUANTIZED_PEERS[peer]
        try:
            peer_run, to_units, *own = build(layer, q)
            # The peer's own operands (LiteRT's converter picks them) come with our runner.
            mine = _ours(*own[0], prepared) if own else ours.get(dialect) or ours_torch(
                layer, q, dialect.rsplit("-", 1)[1], prepared)
            reference = np.asarray(mine())
            row["units_apart"][peer] = units_apart(peer, layer, reference, to_units(peer_run()))
        except Unsupported as reason:
            row["skipped"][peer] = str(reason)
            continue
        except Exception as error:  # a peer that cannot build, run or agree on this layer
            row["skipped"][peer] = f"{type(error).__name__}: {error}".splitlines()[0][:200]
            print(f"  {peer} skipped on {layer.label}: {row['skipped'][peer]}", file=sys.stderr)
            continue
        if hasattr(peer_run, "precision"):
            row["openvino_precision"] = peer_run.precision
        runners[peer] = peer_run
        ours[dialect] = mine
    return runners


def is_int8_peer(peer: str, row: dict) -> bool:
    """Whether the peer ran this row in int8: OpenVINO when its deconvolution did."""
    if peer == "openvino-int8":
        return row.get("openvino_precision") in ("u8", "i8")
    return QUANTIZED_PEERS[peer][3]


def bench_quantized_layer(layer: Layer, peers: list[str], repeat: int, warmup: int,
                          budget: float, rounds, prepared: bool = False) -> dict:
    """One row of the quantized suite (the module's description), timed by ``rounds``:
    the float suite's alternating rounds (:func:`.run.alternating_rounds`), which the
    caller passes so that both suites time alike.  ``prepared``: ours (int8 and float32)
    through prepared layers (``ct.prepare``), made before the timing."""
    q = quantized_inputs(layer)
    row: dict = {"layer": layer.label, "config": asdict(layer), "flops": layer.flops,
                 "times_ms": {}, "units_apart": {}, "skipped": {}}
    float_run, _ = run_ours(layer, q["float"], reuse_output=True, prepared=prepared)
    ours = {FLOAT: float_run, QLINEAR: ours_qlinear(layer, q, prepared)}
    runners = _peer_runners(layer, q, peers, row, ours, prepared)
    samples = rounds({**ours, **runners}, repeat, warmup, budget)
    row["rounds_ms"] = {name: [1e3 * value for value in values] for name, values in samples.items()}
    row["times_ms"] = {name: statistics.median(values) for name, values in row["rounds_ms"].items()}
    times = row["times_ms"]
    row["dialects"] = {peer: QUANTIZED_PEERS[peer][1] for peer in runners}
    row["int8_speedup_over_float32"] = times[FLOAT] / times[QLINEAR]
    int8 = [peer for peer in runners if is_int8_peer(peer, row)]
    if int8:
        best = min(int8, key=times.get)
        row["best_int8_peer"] = best
        row["ratio_to_best_int8_peer"] = times[best] / times[QUANTIZED_PEERS[best][1]]
    return row


def quantized_progress(row: dict) -> str:
    """The row's line on stderr: our int8 and float32 times and the ratios."""
    ratio = row.get("ratio_to_best_int8_peer")
    versus = f", {ratio:.2f}x vs {row['best_int8_peer']}" if ratio else ""
    return (f"{row['layer']:40s} int8 {row['times_ms'][QLINEAR]:8.3f} ms, float32"
            f" {row['times_ms'][FLOAT]:8.3f} ms ({row['int8_speedup_over_float32']:.2f}x){versus}")


def quantized_markdown(rows: list[dict], peers: list[str], meta: dict) -> str:
    """The quantized suite's table: our float32 and int8 times, each peer's, and the
    two ratios; then the CPU, its VNNI flags and the notes."""
    dialects = [QLINEAR] + sorted({QUANTIZED_PEERS[p][1] for p in peers} - {QLINEAR})
    head = (["layer", "ours float32 ms"] + [f"ours {d.split()[1]} ms" for d in dialects]
            + [f"{p} ms" for p in peers] + ["int8 x float32", "best int8 peer", "x best int8 peer"])
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for row in rows:
        times = row["times_ms"]
        cells = [row["layer"]] + [f"{times[n]:.3g}" if n in times else "-"
                                  for n in [FLOAT] + dialects + peers]
        ratio = row.get("ratio_to_best_int8_peer")
        cells += [f"{row['int8_speedup_over_float32']:.2f}", row.get("best_int8_peer", "-"),
                  f"{ratio:.2f}" if ratio else "-"]
        lines.append("| " + " | ".join(cells) + " |")
    vnni = ", ".join(meta.get("vnni") or []) or "none"
    calls = ("prepared layers (ct.prepare)" if meta.get("calls") == "prepared layer"
             else "the array functions")
    skipped = [f"{peer} on {row['layer']} ({reason})" for row in rows
               for peer, reason in row["skipped"].items()]
    lines += ["", f"CPU: {meta.get('cpu', 'not recorded')}; int8 dot-product flags: {vnni}."
              f" {meta['threads']} threads; repeat {meta['repeat']} (medians); ours through"
              f" {calls}.",
              "`int8 x float32`: our float32 time over our qlinear (ONNX) int8 time;"
              " `x best int8 peer`: the fastest int8 peer's time over ours in the dialect it"
              " runs (torch-*: ct.torch_quantized_conv_transpose on that engine; openvino-int8:"
              " ct.qlinear_conv_transpose; litert-int8: ct.tflite_quantized_transpose_conv on"
              " the operands its converter chose); > 1 means convtranspose is faster. Every peer's"
              " result is checked against that dialect (at most one unit of the output apart).",
              "onnxruntime's CPU provider runs the QDQ model in float32, so it is never the"
              " best int8 peer; openvino-int8 counts as int8 only where its deconvolution ran"
              " in u8/i8 (`openvino_precision` in results.json)."]
    if skipped:
        lines.append("Peers that could not run (or disagreed on) a layer: " + "; ".join(skipped) + ".")
    return "\n".join(lines) + "\n"
