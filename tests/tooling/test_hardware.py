"""The hardware table: the datasheets' figures, frozen records, lookup by name, ridge points."""

import dataclasses

import pytest

from kernels import hardware
from kernels.hardware import GB, gpu


@pytest.mark.parametrize("name, bf16, fp32, bandwidth, capacity, sms", [
    ("A100 SXM 80GB", 312e12, 19.5e12, 2.0e12, 80 * GB, 108),
    ("H100 SXM", 989.4e12, 67e12, 3.35e12, 80 * GB, 132),
    ("H200 SXM", 989.4e12, 67e12, 4.8e12, 141 * GB, 132),
    ("B200", 2.25e15, 75e12, 8e12, 180 * GB, 148),  # HGX B200: 180 GB per GPU
])
def test_each_gpu_has_the_dense_figures_of_the_facts_sheet(name, bf16, fp32, bandwidth, capacity, sms):
    device = gpu(name)
    assert (device.name, device.bf16_flops_per_sec, device.fp32_flops_per_sec, device.hbm_bandwidth_bytes_per_sec,
            device.hbm_bytes, device.num_sms) == (name, bf16, fp32, bandwidth, capacity, sms)
    assert type(device.hbm_bytes) is int and type(device.num_sms) is int


def test_the_table_holds_the_four_gpus_of_the_course():
    assert [g.name for g in hardware.GPUS] == ["A100 SXM 80GB", "H100 SXM", "H200 SXM", "B200"]


def test_records_are_frozen():
    with pytest.raises(dataclasses.FrozenInstanceError):
        gpu("H100").num_sms = 1


def test_ridge_points_are_peak_over_bandwidth():
    assert gpu("H100").ridge_point() == pytest.approx(295.3, abs=0.1)
    assert gpu("H200").ridge_point() == pytest.approx(206.1, abs=0.1)
    assert round(gpu("H100").ridge_point()) == 295 and round(gpu("H200").ridge_point()) == 206
    assert gpu("H100").ridge_point("fp32") == pytest.approx(67e12 / 3.35e12)


@pytest.mark.parametrize("name, fp8", [("H100", 1978.9e12), ("H200", 1978.9e12), ("B200", 4.5e15)])
def test_fp8_doubles_the_bf16_tensor_core_peak_from_hopper_on(name, fp8):
    device = gpu(name)
    assert device.peak_flops_per_sec("fp8") == fp8 == pytest.approx(2 * device.bf16_flops_per_sec, rel=1e-3)
    assert device.ridge_point("fp8") == pytest.approx(2 * device.ridge_point(), rel=1e-3)


def test_the_a100_has_no_fp8_peak_and_says_so():
    with pytest.raises(ValueError, match="A100 SXM 80GB has no fp8 tensor cores"):
        gpu("A100").peak_flops_per_sec("fp8")


@pytest.mark.parametrize("query, name", [("H100", "H100 SXM"), ("h100-sxm", "H100 SXM"), ("a100", "A100 SXM 80GB"),
                                         ("H200 SXM", "H200 SXM"), ("b200", "B200")])
def test_lookup_ignores_case_and_punctuation_and_accepts_a_prefix(query, name):
    assert gpu(query).name == name


@pytest.mark.parametrize("query, problem", [("V100", "matches no GPU"), ("H", "matches several GPUs"),
                                            ("", "matches no GPU")])
def test_lookup_of_an_unknown_or_ambiguous_name_lists_the_known_gpus(query, problem):
    with pytest.raises(ValueError, match=problem) as info:
        gpu(query)
    assert "H100 SXM" in str(info.value) and "B200" in str(info.value)


def test_an_unknown_dtype_is_refused_with_the_known_ones():
    with pytest.raises(ValueError, match=r"\['bf16', 'fp32', 'fp8'\]"):
        gpu("H100").peak_flops_per_sec("fp16")
