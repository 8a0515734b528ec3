"""The fleet scenario as data: overrides applied before validation, bad ones named."""

from __future__ import annotations

import pytest

from devices.catalog import DeviceInputError
from fleet.scenario import load_scenario


def test_overrides_reach_nested_settings_and_are_validated() -> None:
    s = load_scenario(overrides=["traffic.zone_rounds=spread", "tuning.targets=[0.6, 0.5]"])
    assert s.traffic.zone_rounds == "spread"
    assert list(s.tuning.targets) == [0.6, 0.5]
    assert load_scenario().traffic.zone_rounds == "burst"


@pytest.mark.parametrize(
    ("override", "named"),
    [
        ("traffic.zone_rounds=sideways", "traffic.zone_rounds"),
        ("traffic.no_such_setting=1", "traffic.no_such_setting"),
        ("nope.x=1", "nope.x"),
        ("traffic", "expected dotted.key=VALUE"),
    ],
)
def test_a_bad_override_is_refused_naming_it(override: str, named: str) -> None:
    with pytest.raises(DeviceInputError, match=named.replace(".", r"\.")):
        load_scenario(overrides=[override])
