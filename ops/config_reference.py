"""The configuration reference page, generated from the configuration models themselves.

    python -m ops.config_reference > docs/reference/configuration.md

Every key of a Serve config (Ray's ``ServeDeploySchema``, our application's ``args``
(``serve_app.config.DispatchAppArgs``) and the Etr deployment's ``user_config``
(``actors.etr_batcher.EtrUserConfig``)) and every environment variable (``config.Settings`` and
the other ``ORML_*`` variables, ``config.environment``), each with its type, default, bounds
and description, read from the models: the page cannot drift from the code, and
``tests/test_config_reference.py`` holds the committed page equal to this output and every key
of the shipped configs covered by it.
"""

from __future__ import annotations

import enum
import sys
import types
import typing
from collections.abc import Iterator
from typing import Any

from pydantic import BaseModel
from pydantic_core import PydanticUndefined

#: Fields of Ray's schema documented only by name: they hold whole sub-configurations Ray
#: documents itself, or internals no deployment of ours sets.
_OPAQUE = {"runtime_env", "resources", "policy_kwargs", "request_router_kwargs"}


def _type_name(annotation: Any) -> str:
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        return " | ".join(_type_name(a) for a in typing.get_args(annotation))
    if origin is typing.Literal:
        return " | ".join(repr(a) for a in typing.get_args(annotation))
    if origin is typing.Annotated:
        return _type_name(typing.get_args(annotation)[0])
    if origin in (list, tuple, set, dict):
        inner = ", ".join(_type_name(a) for a in typing.get_args(annotation) if a is not ...)
        return f"{origin.__name__}[{inner}]" if inner else origin.__name__
    if annotation is type(None):
        return "null"
    if isinstance(annotation, type):
        if issubclass(annotation, enum.Enum):
            return " | ".join(repr(m.value) for m in annotation)
        return annotation.__name__
    return str(annotation).replace("typing.", "")


def _bounds(field: Any) -> str:
    parts = []
    for meta in field.metadata:
        for name, sign in (("ge", ">="), ("gt", ">"), ("le", "<="), ("lt", "<")):
            value = getattr(meta, name, None)
            if value is not None:
                parts.append(f"{sign} {value}")
        for name in ("min_length", "max_length", "pattern"):
            value = getattr(meta, name, None)
            if value is not None:
                parts.append(f"{name} {value}")
    return ", ".join(parts)


def _default(field: Any) -> str:
    if field.default is PydanticUndefined:
        if field.default_factory is not None:
            try:
                value = field.default_factory()
            except TypeError:
                return "(computed)"
            return "(see below)" if isinstance(value, BaseModel) else repr(value)
        return "required"
    value = field.default
    if isinstance(value, enum.Enum):
        value = value.value
    if isinstance(value, BaseModel):
        return "(see below)"
    return repr(value)


def _models_in(annotation: Any) -> list[type[BaseModel]]:
    """Pydantic models an annotation holds (directly, in a union or a list)."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    return [m for a in typing.get_args(annotation) for m in _models_in(a)]


def _is_list(annotation: Any) -> bool:
    if typing.get_origin(annotation) in (list, tuple):
        return True
    return any(_is_list(a) for a in typing.get_args(annotation))


def rows(model: type[BaseModel], prefix: str) -> Iterator[tuple[str, str, str, str, str]]:
    """(key path, type, default, bounds, description) of every field, sub-models expanded
    (a list of models as ``key[]``)."""
    for name, field in model.model_fields.items():
        path = f"{prefix}{name}"
        description = " ".join((field.description or "").split())
        yield (
            path,
            _type_name(field.annotation),
            _default(field),
            _bounds(field),
            description,
        )
        if name in _OPAQUE:
            continue
        for sub in _models_in(field.annotation):
            inner = f"{path}[]." if _is_list(field.annotation) else f"{path}."
            yield from rows(sub, inner)


def _table(title: str, intro: str, entries: list[tuple[str, ...]]) -> list[str]:
    out = [f"## {title}", "", intro, "", "| key | type | default | bounds | description |"]
    out.append("|---|---|---|---|---|")
    for path, typ, default, bounds, description in entries:
        cells = [f"`{path}`", typ, f"`{default}`" if default else "", bounds, description]
        out.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
    return [*out, ""]


def serve_config_rows() -> list[tuple[str, ...]]:
    """Every key of a Serve config as our deploy files use it: Ray's schema, with our
    application's ``args`` and the Etr deployment's ``user_config`` spelled out."""
    from ray.serve.schema import ServeDeploySchema

    from actors.etr_batcher import EtrUserConfig
    from serve_app.config import DispatchAppArgs

    out = []
    for row in rows(ServeDeploySchema, ""):
        out.append(row)
        if row[0] == "applications[].args":
            out.extend(rows(DispatchAppArgs, "applications[].args."))
        if row[0] == "applications[].deployments[].user_config":
            out.extend(rows(EtrUserConfig, "applications[].deployments[].user_config."))
    return out


def environment_rows() -> list[tuple[str, ...]]:
    """Every ``ORML_*`` variable and the other variables the product reads."""
    from config import Settings
    from config.environment import VARIABLES

    out = []
    for name, field in Settings.model_fields.items():
        alias = field.validation_alias
        env = getattr(alias, "choices", [f"ORML_{name.upper()}"])[0]
        description = " ".join((field.description or "").split())
        out.append(
            (env, _type_name(field.annotation), _default(field), _bounds(field), description)
        )
    for variable in VARIABLES:
        out.append((variable.name, "str", "unset", "", f"{variable.description} ({variable.who})"))
    return sorted(out)


def page() -> str:
    lines = [
        "# Configuration reference",
        "",
        "Generated by `python -m ops.config_reference` from the configuration models; do not",
        "edit by hand (`tests/test_config_reference.py` holds it equal to the models).",
        "",
        "A Serve config (`deploy.yaml`, `deploy/production.yaml`) is validated by Ray's",
        "`ServeDeploySchema`; the application's `args` by `serve_app.config.DispatchAppArgs`",
        "when the app is built, and the Etr deployment's `user_config` by",
        "`actors.etr_batcher.EtrUserConfig` whenever it changes. A key in a list of objects is",
        "written `key[].field`.",
        "",
    ]
    lines += _table(
        "Environment variables",
        "Read once per process (`config.get_settings`); a deploy.yaml value, where one exists, "
        "wins over its variable.",
        environment_rows(),
    )
    lines += _table(
        "Serve config keys",
        "Ray Serve's keys (their descriptions are Ray's), our `args` and the Etr `user_config`.",
        serve_config_rows(),
    )
    return "\n".join(lines).rstrip() + "\n"


if __name__ == "__main__":
    sys.stdout.write(page())
