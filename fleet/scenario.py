"""The fleet day's scenario as data: ``fleet/scenario.yaml`` validated at the edge.

A bad file raises ``DeviceInputError`` naming the file and the field. Units: times in the
unit their name says (``_s``, ``_ms``, ``_min``, ``_h``), memory in MiB unless ``_kb``.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, model_validator

from devices.catalog import DeviceInputError, gpu_types, parse_model, read_yaml

SCENARIO_PATH = Path(__file__).with_name("scenario.yaml")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class CitySize(_Strict):
    scale: float = Field(gt=0, description="MDRP regions per city (every city's orders x this).")
    sigma: float = Field(ge=0, description="Log-normal sigma of a city's order multiplier.")
    min: float = Field(gt=0)
    max: float = Field(gt=0)


class Traffic(_Strict):
    round_period_s: float = Field(gt=0)
    open_order_min: float = Field(gt=0)
    riders_per_order: float = Field(gt=0)
    large_round_orders: int = Field(ge=1)
    max_round_orders: int = Field(ge=1, description="A dispatch zone's orders, at most.")
    zone_rounds: Literal["burst", "spread", "random"] = Field(
        "burst",
        description="When a city's zone rounds of one period start: 'burst' 0.1 s apart (one "
        "dispatch tick for the whole city), 'spread' evenly over the period (zone k of Z at "
        "k x round_period_s / Z), 'random' each zone at a phase of its own all day (uniform in "
        "the period: zones dispatched on clocks of their own).",
    )
    queries_per_order: float = Field(ge=0)
    query_lead_min: float = Field(gt=0)
    rows_per_query: int = Field(ge=1)
    offline_rows_per_order: float = Field(ge=0)
    offline_rows_per_request: int = Field(ge=1)


class LaneSpec(_Strict):
    """The app's admission lane (``args.admission`` in deploy.yaml) for one deployment, as the
    whole ingress fleet holds it."""

    max_in_flight: int = Field(ge=1)
    max_queued: int = Field(ge=0)


class DeploymentSpec(_Strict):
    model: Literal["etr", "or_solver"]
    slo_ms: float = Field(gt=0, description="p99 target of an online request, ms.")
    timeout_s: float = Field(gt=0, description="A caller gives up after this (shed).")
    max_batch_rows: int = Field(1, ge=1, description="Rows per call (a round is one row).")
    lane: LaneSpec | None = Field(
        None, description="Admission in front of it (our policies); None: requests go straight in."
    )


class CallCosts(_Strict):
    """Where a call's cost comes from: the measured profiles (``fleet.call_costs``)."""

    profiles: str = Field(
        "profiles", description="Profiles folder (profiles/<model>/<type>-*.json), from the root."
    )
    jitter_sigma: float = Field(
        ge=0, le=1, description="Log-normal sigma of a call around its profile's median."
    )


class Autoscale(_Strict):
    interval_s: float = Field(gt=0)
    upscale_delay_s: float = Field(ge=0)
    downscale_delay_s: float = Field(ge=0)
    look_back_s: float = Field(gt=0, description="Serve averages the metrics over this.")
    min_replicas: int = Field(ge=0)


class Fleet(_Strict):
    types: list[str] = Field(min_length=1)
    cards_per_node: int = Field(ge=1)
    nodes_per_type: int = Field(ge=1)
    replica_start_s: float = Field(ge=0)
    busy_window_s: float = Field(gt=0)
    routing_stats_period_s: float = Field(gt=0)
    autoscale: Autoscale
    autoscale_target_busy: float = Field(0.6, gt=0, lt=1, description="Ours: Busy to run at.")
    serve_target_ongoing_requests: float = Field(gt=0)
    offline_aging_s: float = Field(gt=0)
    offline_rows_while_online: int = Field(ge=1)
    offline_short_call_ms: float = Field(
        0.0,
        ge=0,
        description="An offline-only call of offline_rows_while_online rows expected to take "
        "at most this long runs beside online traffic (0: it waits for a pause).",
    )
    offline_concurrency: int = Field(ge=1, description="A bulk job's requests in flight.")


class Tuning(_Strict):
    """How ``ours`` is planned (``fleet.tune``): on the days of the ``seeds`` (other cities and
    requests than a day of another seed), per deployment a card type and one of ``targets``
    (Busy; the first wins a tie), the cheapest combination whose online SLO attainment reaches
    ``attainment + margin`` on every one of them (the margin is for the planning days' error).
    A day of any other seed was never seen by the tuning."""

    targets: list[Annotated[float, Field(gt=0.15, lt=1)]] = Field(
        [0.6, 0.45, 0.4, 0.35], min_length=1, description="Above the autoscaler's band (0.15)."
    )
    attainment: float = Field(0.99, gt=0, le=1)
    margin: float = Field(0.002, ge=0, lt=1)
    seeds: list[int] = Field(
        [0, 1], min_length=1, max_length=6, description="Planning days; each must reach it."
    )


class Failure(_Strict):
    at_h: float = Field(ge=0)
    down_min: float = Field(gt=0)


class Scenario(_Strict):
    cities: int = Field(ge=1, le=1000)
    seed: int = 0
    mdrp_days: list[str] = Field(min_length=1)
    day_offset: int = Field(
        0, ge=0, description="City c replays day (c + day_offset) of the days found."
    )
    city_size: CitySize
    time_zones_h: list[float] = Field(min_length=1)
    traffic: Traffic
    deployments: dict[str, DeploymentSpec] = Field(min_length=1)
    call_costs: CallCosts
    fleet: Fleet
    failures: list[Failure] = []
    tuning: Tuning = Tuning()

    @model_validator(mode="after")
    def _known_types(self) -> Scenario:
        known = gpu_types()
        for name in self.fleet.types:
            if name not in known:
                raise ValueError(f"unknown GPU type {name!r}; known: {sorted(known)}")
        return self


def load_scenario(path: Path = SCENARIO_PATH, overrides: Sequence[str] = ()) -> Scenario:
    """The scenario in ``path`` with ``overrides`` applied before it is validated: each
    ``dotted.key=VALUE``, VALUE read as YAML (``traffic.zone_rounds=spread``,
    ``tuning.targets=[0.6, 0.5]``). Raises DeviceInputError naming the bad override or field."""
    raw = read_yaml(path)
    for item in overrides:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise DeviceInputError(f"override {item!r}: expected dotted.key=VALUE")
        *parents, leaf = key.split(".")
        node = raw
        for name in parents:
            node = node.get(name) if isinstance(node, dict) else None
            if not isinstance(node, dict):
                raise DeviceInputError(f"override {item!r}: {key} is not a scenario field")
        try:
            node[leaf] = yaml.safe_load(value)
        except yaml.YAMLError as exc:
            raise DeviceInputError(f"override {item!r}: not a YAML value ({exc})") from exc
    return parse_model(Scenario, raw, path)
