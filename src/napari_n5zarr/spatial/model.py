"""The spatial model: :class:`Multiscale`, :class:`Calibration`, :class:`ArrayInfo`, and the
small helpers shared by every convention (numbers, units, axes). Per-axis tuples are in
N5 order (index 0 = fastest axis = x)."""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

Attrs = Mapping[str, Any]
ErrorHandler = Callable[[str, BaseException], None]

DEFAULT_AXES = ("x", "y", "z", "t", "c")
INHERITABLE = ("pixelResolution", "resolution", "units", "axes", "offset")
"""Group keys that N5 Viewer and neuroglancer let children inherit."""

LEVEL = re.compile(r"^s(\d+)$")
"""A pyramid level's name: ``s0, s1, ...`` (N5 Viewer, neuroglancer, BigDataViewer); use
:func:`level_number`, :func:`level_name` and :func:`level_names`, the one definition."""
SETUP = re.compile(r"^setup(\d+)$")
"""A BigDataViewer setup group's name."""
TIMEPOINT = re.compile(r"^timepoint(\d+)$")
"""A BigDataViewer time point group's name."""
LABEL_WORDS = frozenset({"label", "labels", "seg", "segmentation", "segmentations"})
"""A dataset/group name whose last word is one of these names labels (``labels``,
``raw_labels``, ``neuronLabels``, ``seg``, ``cell-segmentation``): see
:func:`~napari_n5zarr.spatial.pyramids.is_labels`."""
CONTAINER_SUFFIXES = (".n5", ".zarr", ".zip", ".xml")
"""Names with these endings are containers (or point at one): never a labels name."""


def level_number(name: str) -> int | None:
    """N of a pyramid level named ``sN`` (the whole name); None for any other name."""
    m = LEVEL.fullmatch(name)
    return int(m.group(1)) if m else None


def level_name(n: int) -> str:
    """The name of pyramid level ``n``: ``sN``."""
    return f"s{n}"


def level_names(names: Iterable[str]) -> list[str]:
    """Names ``s0, s1, ...`` among ``names``, sorted by level number."""
    found = [(k, n) for n in names if (k := level_number(n)) is not None]
    return [n for _, n in sorted(found)]


class ArrayInfo(NamedTuple):
    """What the conventions need to know about one array (metadata only)."""

    attrs: Attrs
    shape: tuple[int, ...]
    dtype: str = ""


class Calibration(NamedTuple):
    """Scale/translate/units/axes of one array, N5 order."""

    scale: tuple[float, ...]
    translate: tuple[float, ...]
    units: tuple[str | None, ...]
    axes: tuple[str, ...]
    convention: str = "none"


@dataclass(frozen=True)
class Multiscale:
    """One image (or labels) pyramid, finest level first; per-axis values in N5 order.

    ``scale``/``translate`` are those of level 0. ``downsampling[k]`` is level k's
    factor relative to level 0. ``time_paths`` (BigDataViewer) lists, per time point,
    the level paths; a reader stacks them along a trailing (slowest) ``t`` axis that
    ``scale``/``axes``/... already include.
    """

    name: str
    paths: tuple[str, ...]
    scale: tuple[float, ...]
    translate: tuple[float, ...]
    units: tuple[str | None, ...]
    axes: tuple[str, ...]
    downsampling: tuple[tuple[float, ...], ...]
    convention: str = "none"
    is_labels: bool = False
    shapes: tuple[tuple[int, ...], ...] = ()
    dtype: str = ""
    time_paths: tuple[tuple[str, ...], ...] = ()
    channel_axis: int | None = None
    attrs: Attrs = field(default_factory=dict, compare=False, repr=False)
    unreadable: str = ""
    """Why it is described but never shown ("" when it is shown): the read wing's walk sets it
    for a Paintera lookup table opened on its own (:meth:`napari_n5zarr.read.tree.Tree.multiscale`)."""
    label_multiset: bool = False
    """Paintera label multisets (``isLabelMultiset``): read as uint64 labels (``dtype``) by
    :mod:`napari_n5zarr.read.multiset_levels`."""
    notes: tuple[str, ...] = ()
    """One line per fallback taken while describing it (a resolution of 0 read as 1, ...),
    without its name: readers say ``f"{name}: {note}"`` (napari a notice, ``info`` a line)."""

    @property
    def ndim(self) -> int:
        return len(self.scale)

    def level_scale(self, level: int) -> tuple[float, ...]:
        """Scale of ``level`` (level 0 scale times its downsampling)."""
        return tuple(s * f for s, f in zip(self.scale, self.downsampling[level], strict=True))

    def level_translate(self, level: int) -> tuple[float, ...]:
        """Translate of ``level`` by the N5 Viewer rule (pixel centre at 0.5 * (f - 1))."""
        return tuple(
            t + 0.5 * (f - 1) * s
            for t, s, f in zip(self.translate, self.scale, self.downsampling[level], strict=True)
        )


@dataclass
class Listing:
    """What the walk read of one group and below, as plain data; paths relative to the group
    (``""`` is the group itself). A convention looks at it (``matches``), may ask the walk to
    read more of it (``reads``), then describes it (``build``).

    ``groups`` holds the attributes of every group read, ``arrays`` the facts of every array
    read, ``children`` the child names of every group whose children were listed. A child
    that is not in ``arrays`` is a group.
    """

    groups: dict[str, Attrs] = field(default_factory=dict)
    arrays: dict[str, ArrayInfo] = field(default_factory=dict)
    children: dict[str, tuple[str, ...]] = field(default_factory=dict)

    @classmethod
    def of(
        cls,
        attrs: Attrs,
        arrays: Mapping[str, ArrayInfo] | None = None,
        groups: Mapping[str, Listing | None] | None = None,
    ) -> Listing:
        """A group with these child arrays and child groups (a nested :class:`Listing`, or
        None for a group whose contents were not read)."""
        out = cls()
        out.add("", attrs, arrays or {}, list(groups or {}))
        for key, sub in (groups or {}).items():
            if sub is not None:
                out.groups.update({join_path(key, p): a for p, a in sub.groups.items()})
                out.arrays.update({join_path(key, p): a for p, a in sub.arrays.items()})
                out.children.update({join_path(key, p): c for p, c in sub.children.items()})
        return out

    def add(
        self, path: str, attrs: Attrs, arrays: Mapping[str, ArrayInfo], groups: Sequence[str]
    ) -> None:
        """Record the group at ``path``: its attributes and its children."""
        self.groups[path] = attrs
        self.arrays.update({join_path(path, k): v for k, v in arrays.items()})
        self.children[path] = (*arrays, *groups)

    @property
    def attrs(self) -> Attrs:
        """The group's own attributes."""
        return self.groups.get("", {})

    def arrays_in(self, path: str = "") -> dict[str, ArrayInfo]:
        """The child arrays of the group at ``path``, by name."""
        out = {}
        for name in self.children.get(path, ()):
            info = self.arrays.get(join_path(path, name))
            if info is not None:
                out[name] = info
        return out

    def groups_in(self, path: str = "") -> list[str]:
        """The names of the child groups of the group at ``path``."""
        return [n for n in self.children.get(path, ()) if join_path(path, n) not in self.arrays]

    def listed(self, path: str) -> bool:
        """True once the children of the group at ``path`` were listed."""
        return path in self.children

    def sub(self, path: str) -> Listing:
        """The part below ``path``, with paths relative to it."""
        if not path:
            return self
        head = path + "/"

        def below(d: Mapping[str, Any]) -> dict[str, Any]:
            return {
                ("" if k == path else k[len(head) :]): v
                for k, v in d.items()
                if k == path or k.startswith(head)
            }

        return Listing(below(self.groups), below(self.arrays), below(self.children))


def inheritable(attrs: Attrs | None) -> dict[str, Any]:
    """The :data:`INHERITABLE` keys of ``attrs`` (what a group passes to its children)."""
    return {k: attrs[k] for k in INHERITABLE if attrs and k in attrs}


def describe_error(path: str, exc: BaseException) -> str:
    """``"path: reason"`` without repeating a path the message already starts with."""
    msg = str(exc) or type(exc).__name__
    return msg if path and msg.startswith(path) else f"{path or '/'}: {msg}"


def natural_key(name: str) -> list[Any]:
    """Sort key that puts ``s2`` before ``s10``."""
    return [(0, int(p)) if p.isdigit() else (1, p) for p in re.split(r"(\d+)", name)]


def join_path(*parts: str) -> str:
    """Relative node paths joined with ``/`` (empty parts and outer slashes dropped)."""
    return "/".join(p.strip("/") for p in parts if p and p.strip("/"))


def as_floats(value: Any) -> tuple[float, ...] | None:
    """A list of finite numbers as floats, else None."""
    if not isinstance(value, list | tuple) or not value:
        return None
    try:
        out = tuple(float(v) for v in value)
    except (TypeError, ValueError):
        return None
    if any(isinstance(v, bool) for v in value) or not all(math.isfinite(v) for v in out):
        return None
    return out


def as_strings(value: Any) -> tuple[str | None, ...] | None:
    if not isinstance(value, list | tuple) or not value:
        return None
    return tuple(v if isinstance(v, str) else None for v in value)


def fit(values: Sequence[Any], ndim: int, fill: Any) -> tuple[Any, ...]:
    """Truncate or pad ``values`` to ``ndim`` entries."""
    return tuple(values[:ndim]) + (fill,) * max(0, ndim - len(values))


def default_axes(ndim: int) -> tuple[str, ...]:
    """Axis names in N5 order when metadata gives none: x, y, z, t, c, d5, ..."""
    return tuple(DEFAULT_AXES[i] if i < len(DEFAULT_AXES) else f"d{i}" for i in range(ndim))


def identity(ndim: int) -> Calibration:
    """Unit scale, zero translate, unknown units."""
    return Calibration((1.0,) * ndim, (0.0,) * ndim, (None,) * ndim, default_axes(ndim))


def unique_axes(axes: Sequence[str | None], ndim: int) -> tuple[str, ...]:
    """Axis names fitted to ``ndim``, blanks and duplicates replaced by defaults."""
    names = list(fit(list(axes), ndim, None))
    defaults = default_axes(ndim)
    seen: set[str] = set()
    for i, name in enumerate(names):
        if not isinstance(name, str) or not name or name in seen:
            name = defaults[i] if defaults[i] not in seen and defaults[i] not in names else f"d{i}"
        names[i] = name
        seen.add(name)
    return tuple(names)


def in_n5_order(axes: Sequence[Any] | None) -> bool | None:
    """True if axis names list x before y (or z): N5 order; False if after; None if unknown."""
    if not axes:
        return None
    names = [a.lower() if isinstance(a, str) else None for a in axes]
    if "x" in names:
        for other in ("y", "z"):
            if other in names:
                return names.index("x") < names.index(other)
    return None
