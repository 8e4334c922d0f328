"""The analyst contract's preset names are the presets the runtime builds (the contract cannot
import the runtime, so it writes the names down; this holds the two lists equal)."""

import pytest
from pydantic import TypeAdapter, ValidationError

from shared.contracts.analyst_api.schemas import ENV_PRESETS, EnvPreset
from shared.runtime.shopsim.presets import PRESETS


def test_the_contract_names_every_preset_the_runtime_builds():
    assert list(ENV_PRESETS) == list(PRESETS)


@pytest.mark.parametrize("name", ["paper", "cpu", "test"])
def test_a_built_preset_is_accepted(name):
    assert TypeAdapter(EnvPreset).validate_python(name) == name


def test_an_unknown_preset_is_refused_with_the_known_ones():
    with pytest.raises(ValidationError, match="unknown ShopSim preset 'huge'; known: paper, cpu"):
        TypeAdapter(EnvPreset).validate_python("huge")
