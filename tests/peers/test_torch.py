"""oneDNN Graph ConvTranspose-1 (``ct.conv_transpose``) against torch ``conv_transpose{1,2,3}d``.

torch's weight layout ``(C_in, C_out/groups, K...)`` is oneDNN's IOX; the other
layouts (OIX, XIO, XOI) and NXC data are transposed to it.  Symmetric explicit pads
run as torch's ``padding``; everything torch cannot express (asymmetric pads,
oneDNN's SAME, an ``output_shape``) is checked by cropping torch's ``padding=0``
result at the offset docs/semantics.md gives, rewritten here from its text.
"""

from __future__ import annotations

import numpy as np
import pytest

from . import _runtimes as rt
from ._runtimes import record
from ._strategies import onednn_cases

torch = pytest.importorskip("torch", reason="torch is not installed (pip install '.[test]')")

pytestmark = pytest.mark.peers


def to_torch_layouts(case: rt.Case):
    """``(data NCX, weight IOX, bias or None)`` as torch tensors."""
    kwargs = case.kwargs
    arrays = case.arrays()
    data, weight = arrays[0], arrays[1]
    rank = len(case.data_shape) - 2
    if kwargs["data_format"] == "NXC":
        data = np.moveaxis(data, -1, 1)
    layout = kwargs.get("weights_format") or kwargs.get("filter_format")
    spatial = list(range(rank))
    if layout == "OIX":
        weight = np.swapaxes(weight, 0, 1)
    elif layout == "XIO":
        weight = weight.transpose([rank, rank + 1] + spatial)
    elif layout == "XOI":
        weight = weight.transpose([rank + 1, rank] + spatial)
    bias = torch.from_numpy(np.ascontiguousarray(arrays[2])) if case.bias else None
    return (torch.from_numpy(np.ascontiguousarray(data)),
            torch.from_numpy(np.ascontiguousarray(weight)), bias)


def semantics_crop(case: rt.Case) -> tuple[list[int], list[int]]:
    """Per axis ``(offset, size)`` from docs/semantics.md's oneDNN rules (not from the library)."""
    kwargs = case.kwargs
    rank = len(case.data_shape) - 2
    spatial = (case.data_shape[1:-1] if kwargs["data_format"] == "NXC" else case.data_shape[2:])
    layout = kwargs.get("weights_format") or kwargs.get("filter_format")
    kernel = case.filter_shape[:rank] if layout.startswith("X") else case.filter_shape[2:]
    mode, target = kwargs["auto_pad"], kwargs.get("output_shape")
    offsets, sizes = [], []
    for i in range(rank):
        s, d, p = kwargs["strides"][i], kwargs["dilations"][i], kwargs["output_padding"][i]
        dilated = (kernel[i] - 1) * d + 1
        full = (spatial[i] - 1) * s + dilated
        if target is not None:
            total = max(full + p - target[i], 0)
            begin = {"same_upper": total // 2, "valid": 0}.get(mode, total - total // 2)
            size = target[i]
        elif mode == "none":
            begin = kwargs["pads_begin"][i]
            size = full + p - begin - kwargs["pads_end"][i]
        elif mode == "valid":
            begin, size = 0, full + p
        else:
            total = max(dilated - s, 0)
            begin = total // 2 if mode == "same_upper" else total - total // 2
            size = full + p - total
        offsets.append(begin)
        sizes.append(size)
    return offsets, sizes


def torch_compute(cases) -> dict:
    results = {}
    for case in cases:
        results[case] = torch_expected(case)
    return results


def torch_expected(case: rt.Case) -> tuple[str, np.ndarray]:
    """``(how, expected output)`` in the case's data format."""
    kwargs = case.kwargs
    rank = len(case.data_shape) - 2
    function = getattr(torch.nn.functional, f"conv_transpose{rank}d")
    data, weight, bias = to_torch_layouts(case)
    common = dict(stride=kwargs["strides"], dilation=kwargs["dilations"],
                  output_padding=kwargs["output_padding"], groups=kwargs["groups"])
    symmetric = (kwargs["auto_pad"] == "none" and kwargs.get("output_shape") is None
                 and kwargs["pads_begin"] == kwargs["pads_end"])
    with torch.inference_mode():
        if symmetric:
            how = "torch padding"
            out = function(data, weight, bias, padding=kwargs["pads_begin"], **common).numpy()
        else:
            how = "cropped torch padding=0"
            full = function(data, weight, None, padding=0, **common).numpy()
            offsets, sizes = semantics_crop(case)
            out = np.zeros(full.shape[:2] + tuple(sizes), full.dtype)
            src, dst = [], []
            for f, offset, size in zip(full.shape[2:], offsets, sizes):
                lo, hi = max(offset, 0), min(offset + size, f)
                src.append(slice(lo, max(hi, lo)))
                dst.append(slice(lo - offset, max(hi, lo) - offset))
            out[(Ellipsis,) + tuple(dst)] = full[(Ellipsis,) + tuple(src)]
            if bias is not None:
                out += bias.numpy().reshape((-1,) + (1,) * rank)
    if kwargs["data_format"] == "NXC":
        out = np.moveaxis(out, 1, -1)
    return how, np.ascontiguousarray(out)


def check_torch(case: rt.Case, result) -> None:
    how, expected = result
    rt.assert_close(case, expected, case.compute(), label=f"torch ({how})")
    record(f"conv_transpose vs torch: equal ({how})", case)


def test_against_torch(peer_examples):
    torch.set_num_threads(2)
    rt.run_batched(onednn_cases(), peer_examples * 11 // 10, torch_compute, check_torch)


def test_onednn_same_puts_the_odd_pad_at_the_end():
    """oneDNN SAME_UPPER puts the odd pad at the END, unlike OpenVINO's (docs/semantics.md)."""
    import convtranspose as ct

    data = np.array([[[1.0], [2.0], [3.0]]], np.float32)                        # NXC, X = 3
    weights = np.array([[[1.0]], [[10.0]], [[100.0]], [[1000.0]]], np.float32)  # XIO, K = 4
    full = np.convolve([1.0, 2.0, 3.0], [1.0, 10.0, 100.0, 1000.0])             # F = 6
    # stride 1: total = K' - s = 3; same_upper pads 1 (begin) / 2 (end), same_lower 2 / 1
    out = ct.conv_transpose(data, weights, strides=1, auto_pad="same_upper")
    np.testing.assert_array_equal(out.ravel(), full[1:4])
    out = ct.conv_transpose(data, weights, strides=1, auto_pad="same_lower")
    np.testing.assert_array_equal(out.ravel(), full[2:5])
