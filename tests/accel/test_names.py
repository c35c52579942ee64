"""Canonical accelerator names: vendor strings, user spellings, tokens a node advertises."""

import pytest

from accel.names import (
    ACCELERATOR_TYPES,
    UnknownAcceleratorTypeError,
    common_tokens,
    lookup,
    resolve_model,
    tokens_for,
)


@pytest.mark.parametrize(
    ("model", "memory_mib", "tokens"),
    [
        ("NVIDIA A100-SXM4-80GB", 81920, ("A100", "A100-80G")),
        ("NVIDIA A100-SXM4-40GB", 40960, ("A100", "A100-40G")),
        ("NVIDIA A100-PCIE-40GB", None, ("A100", "A100-40G")),
        ("A100", 40960, ("A100", "A100-40G")),  # AWS names it bare, with memory
        ("A100", 81920, ("A100", "A100-80G")),
        ("NVIDIA H100 80GB HBM3", 81559, ("H100", "H100-80G")),
        ("NVIDIA H100 NVL", 95830, ("H100", "H100-NVL")),
        ("Tesla T4", 15360, ("T4",)),
        ("NVIDIA T4G", None, ("T4", "T4G")),
        ("Tesla V100-SXM2-16GB", None, ("V100", "V100-16G")),
        ("Tesla V100-SXM2-32GB", None, ("V100", "V100-32G")),
        ("NVIDIA L40S", 46068, ("L40S",)),
        ("NVIDIA L40", None, ("L40",)),
        ("NVIDIA L4", None, ("L4",)),
        ("NVIDIA A10G", None, ("A10G",)),
        ("NVIDIA A10", None, ("A10",)),
        ("NVIDIA GB200", None, ("GB200",)),
        ("NVIDIA B200", None, ("B200",)),
        ("NVIDIA H200", None, ("H200",)),
        ("NVIDIA H20", None, ("H20",)),
        ("NVIDIA GH200 480GB", None, ("GH200",)),
        ("NVIDIA RTX PRO 6000 Blackwell Server Edition", None, ("RTX-PRO-6000",)),
        ("NVIDIA GeForce RTX 4090", None, ("GeForce-RTX-4090", "RTX-4090")),
        ("Quadro RTX 6000", None, ("RTX-6000",)),
        ("NVIDIA RTX A6000", None, ("RTX-A6000",)),
        ("NVIDIA RTX 6000 Ada Generation", None, ("RTX-6000", "RTX-6000-Ada")),
    ],
)
def test_nvidia_marketing_names_resolve(model, memory_mib, tokens):
    resolved = resolve_model(model, family="nvidia", memory_mib=memory_mib)
    assert resolved is not None
    assert tokens_for(resolved.name) == tokens


def test_unknown_model_resolves_to_none():
    assert resolve_model("NVIDIA Quantum Widget 9000", family="nvidia") is None


def test_family_filter_keeps_families_apart():
    assert resolve_model("v4", family="tpu").name == "TPU-V4"
    assert resolve_model("v4", family="nvidia") is None


@pytest.mark.parametrize(
    ("typed", "canonical"),
    [
        ("a100-80gb", "A100-80G"),
        ("A100_80G", "A100-80G"),
        ("h100-sxm", "H100-80G"),
        ("v5e", "TPU-V5LITEPOD"),
        ("V5LITEPOD", "TPU-V5LITEPOD"),
        ("tpu-v4", "TPU-V4"),
        ("accelerator_type:T4", "T4"),
        ("mi300x", "AMD-Instinct-MI300X"),
        ("gaudi2", "Intel-GAUDI2"),
        ("trn1", "Trainium"),
    ],
)
def test_user_spellings_are_case_insensitive_with_aliases(typed, canonical):
    assert lookup(typed).name == canonical


def test_unknown_name_suggests_the_closest():
    with pytest.raises(UnknownAcceleratorTypeError) as caught:
        lookup("A1000")
    assert "A100" in caught.value.suggestions
    assert "closest: A100" in str(caught.value)


def test_mixed_node_advertises_only_shared_tokens():
    assert common_tokens(["A100-40G", "A100-80G"]) == ("A100",)
    assert common_tokens(["A100-80G", "T4"]) == ()
    assert common_tokens(["A100-80G", "A100-80G"]) == ("A100", "A100-80G")


def test_partitioned_gpus_never_claim_the_whole_gpu_token():
    partitioned = [t for t in ACCELERATOR_TYPES if t.partitioned]
    assert partitioned
    for entry in partitioned:
        assert entry.generic is None
        assert "L4" not in tokens_for(entry.name) and "L40S" not in tokens_for(entry.name)


def test_every_generic_parent_exists_and_names_are_unique():
    names = [t.name for t in ACCELERATOR_TYPES]
    assert len(names) == len(set(names))
    for entry in ACCELERATOR_TYPES:
        assert entry.generic is None or entry.generic in names
