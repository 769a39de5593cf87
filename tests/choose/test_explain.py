"""``ct.explain`` and ``shape --explain``: every candidate with its estimate, the choice,
and the code that runs, consistent with the registry (never which algorithm a CPU picks)."""

from __future__ import annotations

import json

import numpy as np
import pytest

import convtranspose as ct
from cli_support import run_cli
from convtranspose._kernels import ALGORITHMS, REGISTRY

PLAN = ct.shapes.conv_transpose((2, 14, 14, 64), (4, 4, 64, 16), groups=4, strides=2,
                                pads_begin=1, pads_end=1)


def test_the_choice_is_the_cheapest_candidate_and_runs_as_the_registry_says():
    explanation = ct.explain(PLAN)
    choice = explanation.choice
    names = [name for name, _ in choice.estimates]
    estimates = [ns for _, ns in choice.estimates]
    assert estimates == sorted(estimates) and all(ns > 0 for ns in estimates)
    assert set(names) <= set(ALGORITHMS) and len(names) == len(set(names))
    assert choice.decided_by == "estimates" and choice.algorithm == names[0]
    assert choice.runs == choice.algorithm and not choice.fallbacks
    text = str(explanation)
    for name in names:
        assert name in text
    assert text.count("<- chosen") == 1 and REGISTRY[choice.runs].summary in text


def test_explain_refuses_what_is_not_a_plan_by_name():
    layer = ct.prepare(ct.onnx_conv_transpose, W=np.ones((2, 3, 3, 3), np.float32))
    with pytest.raises(TypeError, match=r"PreparedLayer .*layer\.explain\(\)"):
        ct.explain(layer)
    with pytest.raises(TypeError, match="plan of convtranspose.shapes, got tuple$"):
        ct.explain((1, 2, 5, 5))


def test_without_numba_or_blas_no_such_candidate_and_forced_ones_fall_back(monkeypatch):
    bare = ct.host_target().replace(numba=False, blas=False)
    names = {name for name, _ in ct.explain(PLAN, target=bare).choice.estimates}
    assert not names & {"direct", "direct-blocked", "gemm-nxc", "gemm-ncx"}
    for forced, runs in (("direct", "direct-numpy"), ("direct-blocked", "phase-nxc"),
                         ("gemm-ncx", "phase-ncx"), ("gemm-nxc", "phase-nxc")):
        monkeypatch.setenv("CONVTRANSPOSE_ALGORITHM", forced)
        choice = ct.explain(PLAN, target=bare).choice
        assert (choice.algorithm, choice.runs, choice.decided_by) == (forced, runs, "forced")
        assert choice.fallbacks and choice.fallbacks[0][0] == forced
        assert choice.estimates  # explain estimates forced layers too


def test_integer_layers_never_take_the_numba_kernels():
    choice = ct.explain(PLAN, np.int32).choice
    assert not {"direct", "direct-blocked"} & {name for name, _ in choice.estimates}


def test_an_empty_layer_is_decided_without_estimates():
    empty = ct.shapes.convolution_backprop_data((0, 4, 5, 5), (4, 2, 3, 3), strides=2)
    choice = ct.explain(empty).choice
    assert choice.decided_by == "empty" and choice.estimates == ()


def test_the_cli_prints_the_explanation_and_its_json():
    args = ["shape", "conv_transpose", "--data-shape", "2,14,14,64", "--filter-shape",
            "4,4,64,16", "--groups", "4", "--strides", "2", "--pads-begin", "1",
            "--pads-end", "1", "--explain"]
    result = run_cli(*args)
    assert result.returncode == 0 and "<- chosen" in result.stdout
    record = json.loads(run_cli(*args, "--json").stdout)["explain"]
    assert record["algorithm"] == min(record["estimates_ns"], key=record["estimates_ns"].get)
    assert record["runs"] in ALGORITHMS and record["dtype"] == "float32"
    bad = run_cli(*args, "--dtype", "complex64")
    assert bad.returncode == 2 and "--dtype 'complex64' is not supported" in bad.stderr


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_half_precision_charges_the_rounding_to_algorithms_that_round_afterwards(dtype):
    pytest.importorskip("ml_dtypes")
    import ml_dtypes

    half = np.dtype(ml_dtypes.bfloat16) if dtype == "bfloat16" else np.dtype(dtype)
    rounded = dict(ct.explain(PLAN, half).choice.estimates)
    plain = dict(ct.explain(PLAN, np.float32).choice.estimates)
    for name in set(rounded) & set(plain) - {"direct", "direct-blocked"}:
        assert rounded[name] > plain[name], name
