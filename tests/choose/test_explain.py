"""``ct.explain`` and ``shape --explain``: every candidate with its estimate, the choice,
and the code that runs, consistent with the registry (never which algorithm a CPU picks)."""

from __future__ import annotations

import json

import numpy as np
import pytest

import convtranspose as ct
from cli_support import run_cli
from convtranspose._kernels import ALGORITHMS, REGISTRY
from convtranspose._kernels.adjoints import ALGORITHMS as ADJOINT_ALGORITHMS
from convtranspose._kernels.adjoints import SUMMARIES as ADJOINT_SUMMARIES

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


# A forward convolution runs as the data gradient of a transposed convolution
# (docs/planning.md): explain says which, and its choice is what the call runs.
STRIDE_ONE = ct.shapes.convolution((1, 6, 9, 9), (4, 6, 3, 3), pads_begin=1, pads_end=2)
STRIDED = ct.shapes.group_convolution((2, 8, 11, 11), (2, 3, 4, 3, 3), strides=2,
                                      pads_begin=1, pads_end=1)


def test_a_stride_one_convolution_is_explained_as_its_transposed_convolution():
    # The hand-written twin: the convolution's data, its filter [C_OUT, C_IN, K...]
    # read as [C_IN, C_OUT, K...] (channel roles swapped), the pads K-1-p: 3-1-1 = 1
    # before and 3-1-2 = 0 after.
    twin = ct.shapes.convolution_backprop_data((1, 6, 9, 9), (6, 4, 3, 3), pads_begin=1,
                                               pads_end=0)
    assert twin.output_shape == STRIDE_ONE.output_shape
    explanation, expected = ct.explain(STRIDE_ONE), ct.explain(twin)
    assert explanation.choice.estimates == expected.choice.estimates
    assert explanation.choice.algorithm == expected.choice.algorithm
    assert explanation.choice.decided_by == "estimates"  # conftest: planning "estimate"
    text = str(explanation)
    assert text.startswith("problem      convolution data [1, 6, 9, 9], filter [4, 6, 3, 3]")
    assert "computed as  every stride is 1" in text and text.count("<- chosen") == 1
    layer = ct.prepare(ct.convolution, filter=np.ones((4, 6, 3, 3), np.float32),
                       pads_begin=1, pads_end=2)
    assert layer.explain((1, 6, 9, 9)).choice.estimates == expected.choice.estimates


def _strided_operands():
    rng = np.random.default_rng(3)
    data = rng.standard_normal(STRIDED.data_shape).astype(np.float32)
    filter = rng.standard_normal(STRIDED.filter_shape).astype(np.float32)
    return data, filter


def test_a_strided_convolution_lists_the_adjoint_kernels_and_their_times(tmp_path,
                                                                        monkeypatch):
    from convtranspose._execute.adjoints import kept_data_adjoint

    monkeypatch.setenv("CONVTRANSPOSE_WISDOM", str(tmp_path / "wisdom.json"))
    monkeypatch.setenv("CONVTRANSPOSE_PLANNING", "measure")
    before = ct.explain(STRIDED).choice
    assert before.decided_by == "unmeasured" and not before.measured
    assert {"im2col", "taps"} <= set(before.candidates) <= set(ADJOINT_ALGORITHMS)
    assert before.algorithm in before.candidates
    measured = ct.explain(STRIDED, measure=True)
    choice = measured.choice
    assert choice.decided_by == "measured"
    assert {name for name, _ in choice.measured} == set(choice.candidates)
    assert choice.algorithm == choice.measured[0][0]  # the fastest
    text = str(measured)
    assert "computed as  strides [2, 2]" in text and text.count("<- chosen") == 1
    assert f"runs         {choice.algorithm}: {ADJOINT_SUMMARIES[choice.algorithm]}" in text
    again = ct.explain(STRIDED).choice
    assert (again.decided_by, again.algorithm) == ("wisdom", choice.algorithm)
    # what the call runs: the adjoint it keeps for the next calls
    data, filter = _strided_operands()
    layer = ct.prepare(ct.group_convolution, filter=filter, strides=2, pads_begin=1,
                       pads_end=1)
    layer(data)
    layer(data)
    call, _ = kept_data_adjoint(data, filter.reshape(STRIDED.canonical_filter_shape),
                                STRIDED.axes, False, np.dtype(np.float32))
    assert call is not None and call.algorithm == choice.algorithm
    assert layer.explain().choice.algorithm == choice.algorithm
    ct.forget_wisdom()


def test_measuring_now_says_measured_and_a_later_account_wisdom(tmp_path, monkeypatch):
    monkeypatch.setenv("CONVTRANSPOSE_WISDOM", str(tmp_path / "wisdom.json"))
    monkeypatch.setenv("CONVTRANSPOSE_PLANNING", "measure")
    for plan in (STRIDE_ONE, PLAN):
        now = ct.explain(plan, measure=True).choice
        assert now.decided_by == "measured" and now.measured
        later = ct.explain(plan, measure=True).choice
        assert later.decided_by == "wisdom" and later.algorithm == now.algorithm
    ct.forget_wisdom()


def test_a_strided_convolution_forced_or_at_the_estimate_level_is_decided_by_rule(
        monkeypatch):
    monkeypatch.setenv("CONVTRANSPOSE_BACKWARD_ALGORITHM", "taps")
    forced = ct.explain(STRIDED).choice
    assert (forced.algorithm, forced.decided_by) == ("taps", "forced")
    assert "CONVTRANSPOSE_BACKWARD_ALGORITHM (forced)" in str(ct.explain(STRIDED))
    monkeypatch.delenv("CONVTRANSPOSE_BACKWARD_ALGORITHM")
    monkeypatch.setenv("CONVTRANSPOSE_PLANNING", "estimate")
    ruled = ct.explain(STRIDED, measure=True).choice  # estimate: nothing to time
    assert ruled.decided_by == "rule" and not ruled.measured
    assert ruled.algorithm in ruled.candidates


def test_every_adjoint_algorithm_has_a_summary():
    assert tuple(ADJOINT_SUMMARIES) == ADJOINT_ALGORITHMS
