"""The package's ``N5ZARR_*`` environment variables: one table, one parser, one error.

Every setting read from the environment is read here (:func:`number`, :func:`flag`), so a
value that cannot be used fails the same way wherever it is read: an
:class:`~napari_n5zarr.errors.EnvironmentVariableError` (a usage error, exit status 2 in the
CLI) naming the variable, the value and what it takes, never a fallback or an "unreadable
node" further on. :func:`check_environment` checks them all at once (the CLI does so before
any command). Leaf module: the standard library and :mod:`napari_n5zarr.errors` only.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass

from napari_n5zarr.errors import EnvironmentVariableError

__all__ = ["VARIABLES", "Flag", "Number", "check_environment", "flag", "number"]

_TRUE = ("1", "true", "yes", "on")
_FALSE = ("0", "false", "no", "off")


@dataclass(frozen=True)
class Number:
    """A number: whole (``integer``) or not, at least ``minimum`` (above it if ``positive``)."""

    integer: bool = False
    minimum: float = 0.0
    positive: bool = False
    what: str = "a number"

    def parse(self, name: str, text: str) -> float:
        try:
            value: float = int(text) if self.integer else float(text)
        except ValueError:
            raise EnvironmentVariableError(
                f"environment variable {name} must be {self.what}, got {text!r}"
            ) from None
        low = "greater than" if self.positive else "at least"
        if math.isnan(value) or value < self.minimum or (self.positive and value <= self.minimum):
            raise EnvironmentVariableError(
                f"environment variable {name} must be {low} {self.minimum:g}, got {text!r}"
            )
        return value


@dataclass(frozen=True)
class Flag:
    """On or off: ``1``/``true``/``yes``/``on`` or ``0``/``false``/``no``/``off``."""

    def parse(self, name: str, text: str) -> bool:
        word = text.lower()
        if word in _TRUE or word in _FALSE:
            return word in _TRUE
        raise EnvironmentVariableError(
            f"environment variable {name} must be 1 or 0 (on or off), got {text!r}"
        )


_BYTES = Number(integer=True, positive=True, what="a whole number of bytes")
_SECONDS = Number(what="a number of seconds")

VARIABLES: dict[str, Number | Flag] = {
    "N5ZARR_MAX_METADATA_BYTES": _BYTES,
    "N5ZARR_MAX_BLOCK_BYTES": _BYTES,
    "N5ZARR_MAX_LISTING_BYTES": _BYTES,
    "N5ZARR_MAX_LISTING_ENTRIES": Number(
        integer=True, positive=True, what="a whole number of entries"
    ),
    "N5ZARR_CACHE_BYTES": Number(what="a number of bytes"),
    "N5ZARR_CONNECT_TIMEOUT": _SECONDS,
    "N5ZARR_READ_TIMEOUT": _SECONDS,
    "N5ZARR_REQUEST_TIMEOUT": _SECONDS,
    "N5ZARR_RETRIES": Number(integer=True, what="a whole number"),
    "N5ZARR_RETRY_BACKOFF": _SECONDS,
    "N5ZARR_SCHEDULER_TIMEOUT": _SECONDS,
    "N5ZARR_PROGRESS": Flag(),
    "N5ZARR_PREFETCH": Flag(),
    "N5ZARR_PAINTERA_FRAGMENTS": Flag(),
    "N5ZARR_3D_MAX_BYTES": _BYTES,
}
"""Every setting variable and the values it takes (``N5ZARR_DEBUG`` is on when set at all)."""


def _raw(name: str) -> str:
    if name not in VARIABLES:
        raise KeyError(f"{name} is not one of this package's environment variables")
    return os.environ.get(name, "").strip()


def number(name: str, default: float) -> float:
    """The value of the number variable ``name``, or ``default`` when it is unset or empty.

    Raises
    ------
    EnvironmentVariableError
        When it is set to something it does not take (the message names it)."""
    value = _value(name, Number)
    return default if value is None else float(value)


def flag(name: str, default: bool) -> bool:
    """The value of the on/off variable ``name``, or ``default`` when it is unset or empty."""
    value = _value(name, Flag)
    return default if value is None else bool(value)


def _value(name: str, kind: type[Number | Flag]) -> float | bool | None:
    """The parsed value of ``name`` (a variable of ``kind``), None when unset or empty."""
    text = _raw(name)
    spec = VARIABLES[name]
    assert isinstance(spec, kind)
    return spec.parse(name, text) if text else None


def check_environment() -> None:
    """Raise :class:`~napari_n5zarr.errors.EnvironmentVariableError` for the first set
    variable of :data:`VARIABLES` whose value cannot be used."""
    for name, spec in VARIABLES.items():
        text = _raw(name)
        if text:
            spec.parse(name, text)
