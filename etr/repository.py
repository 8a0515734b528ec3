"""The model repository: ``models/<name>/<version>/{model.onnx, metadata.json, model_card.md}``.

Versions are directory names; ``latest`` is the highest numeric version. Loading checks the
ONNX file's sha256 against the metadata, so a half-copied or edited artifact is refused.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

DEFAULT_ROOT = Path(__file__).resolve().parents[1] / "models"


@dataclass(frozen=True)
class ModelArtifact:
    """One version of a model: its ONNX bytes and metadata (see ``etr.train``)."""

    name: str
    version: str
    path: Path
    onnx_bytes: bytes
    metadata: dict[str, Any]

    @property
    def sha256(self) -> str:
        return str(self.metadata["sha256"])

    @property
    def n_features(self) -> int:
        return int(self.metadata["input"]["shape"][1])


def versions(name: str = "etr", root: Path = DEFAULT_ROOT) -> list[str]:
    """Versions present, oldest first (numeric order where the names are numbers)."""
    base = root / name
    found = (
        [p.name for p in base.iterdir() if (p / "model.onnx").is_file()] if base.is_dir() else []
    )
    return sorted(found, key=lambda v: (0, int(v), "") if v.isdigit() else (1, 0, v))


def load_artifact(
    name: str = "etr", version: str | None = None, root: Path = DEFAULT_ROOT
) -> ModelArtifact:
    """Load a version (default: the latest).

    Raises FileNotFoundError when the model or version is missing, ValueError when the ONNX
    file does not match its recorded sha256.
    """
    have = versions(name, root)
    if not have:
        raise FileNotFoundError(f"no versions of model {name!r} under {root}")
    version = version or have[-1]
    if version not in have:
        raise FileNotFoundError(f"model {name!r} has no version {version!r}; have {have}")
    path = root / name / version
    blob = (path / "model.onnx").read_bytes()
    meta = json.loads((path / "metadata.json").read_text())
    digest = hashlib.sha256(blob).hexdigest()
    if digest != meta.get("sha256"):
        raise ValueError(f"{path / 'model.onnx'}: sha256 {digest} does not match metadata")
    return ModelArtifact(name, version, path, blob, meta)
