"""The delivery data set (tidymodels ``deliveries``, 8,000 rows; MIT) and its fixed split."""

from __future__ import annotations

import csv
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from etr.features import DAYS, N_MENU_ITEMS, build_features

DEFAULT_CSV = Path(__file__).resolve().parents[1] / "data/eta/modeldata_deliveries.csv"


@dataclass(frozen=True)
class Split:
    """Features float32[N, 39] and targets float32[N] (minutes) of one part of the data."""

    x: np.ndarray
    y: np.ndarray


@dataclass(frozen=True)
class Dataset:
    train: Split
    validation: Split
    test: Split
    source: str


def load_deliveries(path: Path = DEFAULT_CSV) -> tuple[np.ndarray, np.ndarray]:
    """All rows as (features float32[N, 39], minutes float32[N]).

    Raises FileNotFoundError, or ValueError naming the line of a malformed row.
    """
    hour, day, dist, items, y = [], [], [], [], []
    day_index = {d: k for k, d in enumerate(DAYS)}
    with path.open(newline="") as f:
        for line, row in enumerate(csv.DictReader(f), start=2):
            try:
                y.append(float(row["time_to_delivery"]))
                hour.append(float(row["hour"]))
                day.append(day_index[row["day"]])
                dist.append(float(row["distance"]))
                items.append([int(row[f"item_{k:02d}"]) for k in range(1, N_MENU_ITEMS + 1)])
            except (KeyError, ValueError) as exc:
                raise ValueError(f"{path}:{line}: malformed row ({exc})") from exc
    x = build_features(np.array(hour), np.array(day), np.array(dist), np.array(items))
    return x, np.asarray(y, np.float32)


def split(
    x: np.ndarray, y: np.ndarray, *, seed: int = 20261121, fractions=(0.7, 0.15, 0.15)
) -> Dataset:
    """A seeded shuffle cut into train / validation / test (70/15/15 by default)."""
    order = np.random.default_rng(seed).permutation(len(y))
    n_train = round(fractions[0] * len(y))
    n_val = round(fractions[1] * len(y))
    parts = np.split(order, [n_train, n_train + n_val])
    tr, va, te = (Split(x[p], y[p]) for p in parts)
    return Dataset(tr, va, te, source="tidymodels/modeldata deliveries (80% sample)")
