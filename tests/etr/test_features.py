"""ETR features: one function for training and serving; domain orders map onto it."""

from __future__ import annotations

import math
from datetime import UTC, datetime

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from domain import LatLng, Order, OrderColumns
from etr.features import (
    FEATURE_NAMES,
    N_FEATURES,
    build_features,
    features_from_columns,
    features_from_orders,
)


def test_columns_and_one_hot():
    x = build_features(
        np.array([12.5]), np.array([6]), np.array([2.0]), np.arange(27, dtype=float)[None, :]
    )
    assert x.shape == (1, N_FEATURES) == (1, len(FEATURE_NAMES)) and x.dtype == np.float32
    row = dict(zip(FEATURE_NAMES, x[0].tolist(), strict=True))
    assert row["hour"] == 12.5 and row["day_Sun"] == 1.0 and row["day_Mon"] == 0.0
    assert row["hour_sin"] == pytest.approx(math.sin(2 * math.pi * 12.5 / 24), abs=1e-6)
    assert row["items_total"] == sum(range(27))


def test_bad_shapes_and_days_are_rejected():
    with pytest.raises(ValueError, match="item_counts"):
        build_features(np.zeros(2), np.zeros(2, int), np.zeros(2), np.zeros((2, 5)))
    with pytest.raises(ValueError, match=r"day must be in 0\.\.6"):
        build_features(np.zeros(1), np.array([7]), np.zeros(1), np.zeros((1, 27)))


def test_features_from_orders_use_local_time_and_haversine_miles():
    # 2026-01-02 is a Friday; 18:30 local at UTC+8 is 10:30 UTC.
    created = datetime(2026, 1, 2, 10, 30, tzinfo=UTC).timestamp()
    order = Order(
        id="o",
        pickup=LatLng(31.2304, 121.4737),
        dropoff=LatLng(31.2600, 121.4737),
        created_at=created,
        ready_at=created + 600,
        promised_at=created + 2400,
        item_counts=(1, 0, 2),
    )
    x = features_from_orders([order], utc_offset_s=8 * 3600)
    row = dict(zip(FEATURE_NAMES, x[0].tolist(), strict=True))
    assert row["hour"] == pytest.approx(18.5)
    assert row["day_Fri"] == 1.0
    assert row["distance_mi"] == pytest.approx(3291.4 / 1609.344, rel=1e-3)
    assert row["item_01"] == 1 and row["item_03"] == 2 and row["items_total"] == 3


@st.composite
def orders(draw) -> Order:
    created = draw(st.floats(0, 1e10, allow_nan=False))
    lat = st.floats(-89.9, 89.9, allow_nan=False)
    lng = st.floats(-179.9, 179.9, allow_nan=False)
    return Order(
        id=draw(st.text(min_size=1, max_size=8)),
        pickup=LatLng(draw(lat), draw(lng)),
        dropoff=LatLng(draw(lat), draw(lng)),
        created_at=created,
        ready_at=created,
        promised_at=created + draw(st.floats(0, 1e5)),
        item_counts=tuple(draw(st.lists(st.integers(0, 10_000), max_size=27))),
    )


@settings(max_examples=300, deadline=None, derandomize=True, database=None)
@given(batch=st.lists(orders(), min_size=1, max_size=8), offset=st.floats(-50_400, 50_400))
def test_the_row_by_row_path_equals_the_vectorised_one_exactly(batch, offset):
    """Small batches are filled a row at a time (``etr.features._rows``): the same numbers,
    bit for bit, as ``build_features`` over the whole batch (which training uses)."""
    from etr import features

    rows = features._rows(batch, offset)
    saved, features.ROWS_ONE_BY_ONE = features.ROWS_ONE_BY_ONE, 0
    try:
        whole = features_from_orders(batch, utc_offset_s=offset)
    finally:
        features.ROWS_ONE_BY_ONE = saved
    np.testing.assert_array_equal(rows, whole)


@settings(max_examples=200, deadline=None, derandomize=True, database=None)
@given(batch=st.lists(orders(), min_size=0, max_size=20), offset=st.floats(-50_400, 50_400))
def test_orders_as_columns_give_the_same_features_exactly(batch, offset):
    """A served round's new orders are columns (``domain.OrderColumns``): their features are
    the domain orders' bit for bit, at every size (the row path's included)."""
    got = features_from_columns(OrderColumns.of(batch), utc_offset_s=offset)
    np.testing.assert_array_equal(got, features_from_orders(batch, utc_offset_s=offset))


def test_too_many_item_counts_are_refused_from_columns_as_from_orders():
    order = Order("o", LatLng(0, 0), LatLng(0, 1), 0.0, 0.0, 1.0, item_counts=(1,) * 28)
    with pytest.raises(ValueError, match="28 item counts"):
        features_from_orders([order] * 9)
    with pytest.raises(ValueError, match="28 item counts"):
        features_from_columns(OrderColumns.of([order]))
