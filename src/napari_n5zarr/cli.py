"""``n5zarr``: tree | info | convert | add-zarr-metadata | view.

Imports napari only for ``view``; the other commands need zarr, dask and this package.
"""

from __future__ import annotations

import argparse
import contextlib
import enum
import json
import logging
import os
import sys
import warnings
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, Literal

from napari_n5zarr.n5.constants import METADATA_FILES

if TYPE_CHECKING:
    from napari_n5zarr.spatial import Multiscale


def _print(*args: Any) -> None:
    print(*args, flush=True)  # noqa: T201


class ExitCode(enum.IntEnum):
    """The exit status of every command: one per kind of fault (see :data:`EXIT_CODES`)."""

    OK = 0
    PARTIAL = 1
    """Done, but something was skipped or unreadable (listed in the output)."""
    USAGE = 2
    """A bad or refused argument; nothing was read or written."""
    NOT_FOUND = 3
    UNREACHABLE = 4
    """Cannot read or write: no connection, a timeout, a server error, a permission."""
    INVALID_DATA = 5
    MISSING_PACKAGE = 6
    UNEXPECTED = 7
    INTERRUPTED = 130


EXIT_CODES = """exit status:
  0  all good
  1  done, but something was skipped or unreadable (listed in the output)
  2  usage error: a bad or refused argument or N5ZARR_* environment variable (DEST exists or is being written, ...)
  3  not found: nothing at PATH/SRC (no such folder, file or URL, no N5 or Zarr node there)
  4  unreachable: cannot read or write (connection refused, timeout, server error, permission)
  5  invalid data: the metadata or blocks are not valid N5/Zarr, or nothing to convert
  6  a needed package is missing (the message says what to pip install)
  7  unexpected error (N5ZARR_DEBUG=1 shows the traceback)
  130  interrupted (Ctrl-C)
Errors are one line on stderr: what could not be done, and where."""


def exit_code(exc: BaseException) -> ExitCode:
    """The kind of fault an exception is, as an exit status (the order of checks matters:
    a NodeNotFoundError is an OSError, an N5MetadataError a KeyError)."""
    from napari_n5zarr.errors import (
        DestinationBusyError,
        DestinationLockError,
        InvalidArgumentError,
    )

    if isinstance(
        exc, InvalidArgumentError | FileExistsError | DestinationBusyError | DestinationLockError
    ):
        return ExitCode.USAGE
    if isinstance(exc, FileNotFoundError):
        return ExitCode.NOT_FOUND
    if isinstance(exc, ImportError):
        return ExitCode.MISSING_PACKAGE
    if isinstance(exc, OSError):  # N5StoreError, PermissionError, TimeoutError, ConnectionError
        return ExitCode.UNREACHABLE
    if isinstance(
        exc, ValueError | KeyError | TypeError
    ):  # N5FormatError, N5MetadataError, nothing to convert
        return ExitCode.INVALID_DATA
    return ExitCode.UNEXPECTED


def _error(message: str, code: int = ExitCode.USAGE) -> int:
    print(f"n5zarr: error: {message}", file=sys.stderr, flush=True)  # noqa: T201
    return int(code)


# -- tree -----------------------------------------------------------------------------


def _tree_line(node: Any, name: str | None = None) -> str:
    """One node of ``n5zarr tree``: the browser's columns, napari order (z, y, x)."""
    row = {**node.row(), **({"name": name} if name is not None else {})}
    if node.kind == "error":
        return f"{row['name']}  ! unreadable: {node.error}"
    marker = "  (N5 only)" if node.n5 and not node.zarr else ""
    if node.kind == "group":
        return f"{row['name']}/{marker}" + (f"  ! {node.warning}" if node.warning else "")
    parts = [
        row["shape"],
        row["dtype"],
        f"blocks {row['blocks']}",
        row["compression"],
        row["voxel"],
        row["size"],
    ]
    head = f"{row['name']}/  [{row['kind']}]" if node.kind == "pyramid" else row["name"]
    if node.lookup_table and node.kind != "pyramid":
        head = f"{row['name']}  [{row['kind']}]"
    text = "  ".join([head, *[p for p in parts if p]]) + marker
    text += f"  ! {node.warning}" if node.warning else ""
    if node.lookup_table:
        return text  # listed as what it is (the kind says it), not as a fault
    return text + (f"  ! cannot open: {node.reason}" if node.reason else "")


def _siblings(tree: Any, node: Any) -> Any:
    """(child, is_last) for the children of ``node``, streamed page by page (one child of
    look-ahead to draw the last branch)."""
    previous = None
    for page in tree.iter_children(node):
        for child in page:
            if previous is not None:
                yield previous, False
            previous = child
    if previous is not None:
        yield previous, True


def _print_tree(tree: Any, node: Any, indent: str, counts: dict[str, int]) -> None:
    for child, last in _siblings(tree, node):
        counts[child.kind] = counts.get(child.kind, 0) + 1
        _print(f"{indent}{'└── ' if last else '├── '}{_tree_line(child)}")
        if child.has_children:
            _print_tree(tree, child, indent + ("    " if last else "│   "), counts)


def cmd_tree(args: argparse.Namespace) -> int:
    """Print the hierarchy as it is read: shape (napari order, axis names), dtype, blocks,
    N5 compression, voxel size, uncompressed size; unreadable nodes in place. ``--json``:
    one JSON object per line (JSON Lines), depth first."""
    from napari_n5zarr.read.tree import Activity, open_tree, report_waits

    activity = Activity()  # a wait over 1.5 s is named on stderr; the nodes stream on stdout
    counts: dict[str, int] = {}
    with report_waits(activity, lambda text: print(f"n5zarr: {text}", file=sys.stderr, flush=True)):  # noqa: T201
        tree = open_tree(args.path, activity=activity)
        tree.raise_for_root()  # nothing to list: one line, the fault's exit status
        if getattr(args, "json", False):
            for depth, node in tree.walk():
                counts[node.kind] = counts.get(node.kind, 0) + 1
                _print(json.dumps({"depth": depth, **node.to_json()}))
        else:
            root = tree.root
            counts[root.kind] = 1
            _print(_tree_line(root, args.path.rstrip("/")))
            if root.has_children:
                _print_tree(tree, root, "", counts)
    return 1 if counts.get("error") else 0


# -- info -----------------------------------------------------------------------------


def _axis_text(names: Sequence[str], values: Sequence[Any]) -> str:
    return " ".join(
        f"{n}={v:g}" if isinstance(v, float) else f"{n}={v}"
        for n, v in zip(names, values, strict=True)
    )


def cmd_info(args: argparse.Namespace) -> int:
    """One node in full (fields, attributes, blocks on disk) and the image/labels pyramids
    the reader finds under it: levels, scale, translate, units."""
    from napari_n5zarr.read.node_info import node_info
    from napari_n5zarr.write.edit.journal import unfinished_save

    as_json = getattr(args, "json", False)
    info = node_info(args.path, unfinished_save=unfinished_save)
    if info.incomplete and not as_json:
        _print(f"{args.path}: INCOMPLETE export (interrupted before its metadata was written)")
    if info.unfinished_save and not as_json:
        if info.unfinished_save.startswith("unusable: "):
            _print(
                f"{args.path}: labels open read-only: {info.unfinished_save.removeprefix('unusable: ')}"
            )
        else:
            _print(
                f"{args.path}: unfinished save of label edits ({info.unfinished_save}); the next save, or opening "
                "it editable in napari, finishes it"
            )
    root = info.root
    if info.tree is not None:
        info.tree.raise_for_root()  # nothing to show (a 500, bad metadata): fatal, one line
    if as_json:
        _print(json.dumps(info.to_json(), indent=2, default=str))
        return 1 if info.problems else 0
    row = root.row()
    formats = " + ".join(
        name for name, present in (("N5", root.n5), ("Zarr v3", root.zarr)) if present
    )
    _print(f"{args.path}: {row['kind']}" + (f", {formats}" if formats else ""))
    for label in ("shape", "dtype", "blocks", "compression", "voxel", "size"):
        if row[label]:
            _print(f"  {label:<11} {row[label]}")
    if info.blocks is not None:
        on_disk, expected, partial = info.blocks
        more = "+" if partial else ""
        sparse = " (sparse: missing blocks read as 0)" if not partial and on_disk < expected else ""
        _print(f"  {'on disk':<11} {on_disk}{more} of {expected} blocks{sparse}")
    if root.reason:
        _print(f"  cannot open: {root.reason}")
    if root.warning:
        _print(f"  ! {root.warning}")
    for label, text in root.facts:
        _print(f"  {label:<11} {text}")
    user = {
        k: v
        for k, v in root.attributes.items()
        if k not in ("dimensions", "blockSize", "dataType", "compression", "compressionType")
    }
    if user:
        _print("  attributes " + json.dumps(user, default=str)[:2000])
    here = args.path.rstrip("/").rsplit("/", 1)[-1] or "/"  # a pyramid that is the node itself
    for ms in info.multiscales:
        _print_multiscale(ms, here)
    for problem in info.problems:
        _print(f"! {problem}")
    if not info.multiscales:
        _print(f"{args.path}: no image or labels arrays found")
    return 1 if info.problems else 0


# -- convert --------------------------------------------------------------------------


PROGRESS_ENV = "N5ZARR_PROGRESS"
"""``1`` shows the progress bar even when stderr is not a terminal, ``0`` hides it."""


def _print_multiscale(ms: Multiscale, here: str = "/") -> None:
    """One pyramid of ``n5zarr info``: kind, levels, convention, calibration, level shapes
    (``here``: the name shown for a pyramid that is the node itself)."""
    from napari_n5zarr.read.node import convention_label

    kind = "labels" if ms.is_labels else "image"
    _print(
        f"{ms.name or here}: {kind} {ms.dtype}, {len(ms.paths)} level(s), convention {convention_label(ms.convention)}"
    )
    if ms.unreadable:
        _print(f"  cannot open: {ms.unreadable}")
    for note in ms.notes:
        _print(f"  note: {note}")
    _print(f"  scale      {_axis_text(ms.axes, ms.scale)}")
    _print(f"  translate  {_axis_text(ms.axes, ms.translate)}")
    _print(f"  units      {_axis_text(ms.axes, [u or '-' for u in ms.units])}")
    for path, shape, factors in zip(ms.paths, ms.shapes, ms.downsampling, strict=True):
        shape_text = " x ".join(str(s) for s in shape)
        _print(f"  {path or '.':<10} {shape_text:<24} factors {[round(f, 3) for f in factors]}")


def _show_progress() -> bool:
    from napari_n5zarr.environment import flag

    return flag(PROGRESS_ENV, sys.stderr.isatty())


def progress_bar(width: int = 30, unit: str = "blocks") -> Callable[[str, int, int], None] | None:
    """``progress(label, done, total)`` drawing one bar per image on stderr (the export's
    own counter of ``unit``, as the export widget's bar), or None when stderr is not a
    terminal (piped, logged: quiet) unless ``N5ZARR_PROGRESS=1``."""
    if not _show_progress():
        return None

    def report(label: str, done: int, total: int) -> None:
        filled = width * done // max(total, 1)
        bar = "#" * filled + "." * (width - filled)
        end = "\n" if done >= total else ""
        print(f"\r{label} [{bar}] {done:,}/{total:,} {unit}", end=end, file=sys.stderr, flush=True)  # noqa: T201

    return report


def cmd_convert(args: argparse.Namespace) -> int:
    """Any N5 / Zarr source -> a dual N5 + Zarr v3 pyramid (one per image in the source)."""
    from napari_n5zarr.errors import InvalidArgumentError
    from napari_n5zarr.write.convert.convert import NothingToConvertError, convert
    from napari_n5zarr.write.export.plan import block_edge_problem

    too_small = block_edge_problem(args.chunks)  # the export widget's rule, before anything is read
    if too_small:
        raise InvalidArgumentError(f"--chunks: {too_small}")
    compression: Any = args.compression
    if args.to == "dual" and isinstance(compression, str) and compression != "default":
        try:
            compression = compression_arg(compression)
        except argparse.ArgumentTypeError as e:
            raise InvalidArgumentError(f"--compression: {e}") from None
    elif args.to != "dual" and isinstance(compression, dict):
        raise InvalidArgumentError(
            "--compression: with --to ome-zarr one of zstd, gzip, blosc, raw (name:level sets a level)"
        )
    try:
        report = convert(
            args.src,
            args.dest,
            compression=compression,
            chunks=args.chunks,
            levels=args.levels,
            boundary=args.boundary,
            overwrite=args.overwrite,
            n5_only=args.n5_only,
            scheduler=args.scheduler,
            progress=progress_bar(unit="shards" if args.shards else "blocks"),
            worker_timeout=args.worker_timeout or None,
            region=args.region,
            level=args.level,
            to=args.to,
            shards=args.shards,
            resume=args.resume,
        )
    except NothingToConvertError as e:
        for problem in e.skipped:
            _print(f"! skipped {problem}")
        return _error(str(e), ExitCode.INVALID_DATA)
    for problem in report.skipped:
        _print(f"! skipped {problem}")
    for image in report.images:
        _print(
            f"wrote {image.target} ({'labels' if image.is_labels else 'image'}, from {image.convention})"
        )
    return 1 if report.skipped else 0


# -- add-zarr-metadata ----------------------------------------------------------------


def cmd_add_zarr_metadata(args: argparse.Namespace) -> int:
    """Write zarr.json beside every attributes.json (and for implicit groups); blocks and
    attributes.json are never touched."""
    from napari_n5zarr.write.convert.zarr_metadata import add_zarr_metadata

    report = add_zarr_metadata(args.path, dry_run=args.dry_run)
    for step in report.steps:
        if step.kind == "written":
            _print(
                f"{'would write' if report.dry_run else ('updated' if step.replaced else 'wrote')} {step.path}"
            )
        elif step.kind == "skipped":
            _print(f"cannot express {step.path or '/'}: {step.reason}")
    verb = "would write" if args.dry_run else "wrote"
    _print(
        f"{verb} {len(report.written)} zarr.json, {len(report.unchanged)} already up to date, "
        f"{len(report.skipped)} node(s) cannot be expressed in Zarr v3"
    )
    if not args.dry_run and report.written:
        _print("note: z5py 3 refuses folders holding both attributes.json and zarr.json")
    return 1 if report.skipped else 0


# -- view -----------------------------------------------------------------------------


def cmd_view(args: argparse.Namespace) -> int:
    """Open PATH (default: the sample) in napari with this plugin's reader and widgets."""
    if args.reset_sample:
        if args.path is not None:
            return _error(
                "--reset-sample rebuilds and opens the bundled sample: give no PATH with it"
            )
        from napari_n5zarr._napari.sample import make_sample

        make_sample(reset=True)
    if args.path is not None:  # fail here, in one line, not in an empty viewer
        from napari_n5zarr.access import open as open_node
        from napari_n5zarr.read.locate import require

        target = require(
            args.path
        ).target  # a BigDataViewer XML's N5 folder, a metadata file's folder
        for name in METADATA_FILES:  # (a URL's too)
            target = target[: -len(name) - 1] if target.endswith("/" + name) else target
        open_node(target)
    from napari_n5zarr._napari.viewer_launch import read_first

    found = (
        None if args.path is None else read_first(args.path)
    )  # nothing to show: one line (exit 3), no empty napari
    try:
        from napari_n5zarr._napari.viewer_launch import view

        view(args.path, screenshot=args.screenshot, found=found)
    except ModuleNotFoundError as e:
        if e.name not in ("napari", "qtpy"):
            raise
        what = f"cannot show {args.path}: " if args.path is not None else ""
        return _error(f"{what}'n5zarr view' needs napari with a Qt binding ({e.name} is missing): pip install 'napari-n5zarr[qt]'",
                      ExitCode.MISSING_PACKAGE)  # fmt: skip
    return 0


# -- arguments ------------------------------------------------------------------------


def chunks_arg(text: str) -> int | tuple[int, ...]:
    """``--chunks``: one positive int (every spatial axis) or a comma-separated z,y,x list."""
    parts = [p.strip() for p in text.split(",")]
    if not all(p.isdigit() and int(p) > 0 for p in parts):
        raise argparse.ArgumentTypeError(
            f"expected a positive whole number or a list like 64,64,64, got {text!r}"
        )
    values = tuple(int(p) for p in parts)
    return values[0] if len(values) == 1 else values


def levels_arg(text: str) -> int | Literal["auto"]:
    """``--levels``: ``auto`` or a positive number of levels."""
    if text.strip() == "auto":
        return "auto"
    if not text.strip().isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(
            f"expected 'auto' or a positive whole number, got {text!r}"
        )
    return int(text)


def compression_arg(text: str) -> dict[str, Any]:
    """``--compression``: an N5 type, ``type:level`` or N5 JSON, checked against the table."""
    from napari_n5zarr.write.export.exporter import parse_compression

    name, colon, level = text.partition(":")
    if colon and not text.lstrip().startswith("{") and not level.strip().lstrip("-").isdigit():
        raise argparse.ArgumentTypeError(
            f"the level in {text!r} must be a whole number, as in {name}:5"
        )
    try:
        return parse_compression(text)
    except (ValueError, TypeError) as e:  # N5FormatError and json's errors are ValueErrors
        raise argparse.ArgumentTypeError(_one_line(e)) from None


def convert_compression_arg(text: str) -> str | dict[str, Any]:
    """``convert --compression``: a standard Zarr codec name for ``--to ome-zarr`` (``zstd``,
    ``gzip``, ``blosc``, ``raw``, ``:level``), kept as text; else as :func:`compression_arg`."""
    name, colon, level = text.strip().lower().partition(":")
    if text == "default" or (
        name in ("zstd", "gzip", "blosc", "raw")
        and (not colon or level.strip().lstrip("-").isdigit())
    ):
        return text
    return compression_arg(text)


def shards_arg(text: str) -> str:
    """``--shards``: blocks per shard, N or z,y,x (whole numbers >= 1)."""
    parts = [p.strip() for p in text.split(",")]
    if not all(p.isdigit() and int(p) >= 1 for p in parts):
        raise argparse.ArgumentTypeError(
            f"expected blocks per shard, N or z,y,x (whole numbers >= 1), got {text!r}"
        )
    return text


def scheduler_arg(text: str) -> str:
    """``--scheduler``: a dask scheduler name or a dask.distributed address (``host:port``)."""
    from napari_n5zarr.write.convert.convert import NAMED_SCHEDULERS

    if text in NAMED_SCHEDULERS or ":" in text:
        return text
    raise argparse.ArgumentTypeError(
        f"expected {', '.join(NAMED_SCHEDULERS)} or a dask.distributed scheduler address (tcp://HOST:PORT), got {text!r}"
    )


def storage_options_arg(text: str) -> dict[str, Any]:
    """``--storage-options``: a JSON object, passed to fsspec for every URL of the command."""
    try:
        value = json.loads(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(f"not valid JSON ({e}): {text!r}") from None
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError(
            f"expected a JSON object such as '{{\"anon\": true}}', got {type(value).__name__} {text!r}"
        )
    return value


def _add_storage_options(p: Any, what: str = "PATH") -> None:
    p.add_argument(
        "--storage-options",
        type=storage_options_arg,
        default=None,
        metavar="JSON",
        help=f"fsspec options for {what} (URLs only), a JSON object: "
        '\'{"anon": true}\', \'{"endpoint_url": "http://host:9000"}\', \'{"headers": {...}}\'',
    )


class _ArgumentParser(argparse.ArgumentParser):
    """Usage errors in the CLI's one-line form (exit status 2, no usage dump, no traceback)."""

    def error(self, message: str) -> Any:  # argparse declares NoReturn
        self.exit(2, f"n5zarr: error: {' '.join(message.split())} (see '{self.prog} --help')\n")


LOCATION_HELP = (
    "an N5 or Zarr folder, a .zip, a BigDataViewer .xml, or a URL (s3://, http://, https://); "
    "a group or dataset inside by its path (data.n5/raw/s0)"
)


class _WhenShown:
    """A help value looked up when the help is shown: building the parser must not import
    the writer (dask: ~1 s), which ``n5zarr tree`` never needs."""

    def __init__(self, get: Callable[[], object]) -> None:
        self.get = get

    def __str__(self) -> str:
        return str(self.get())


def build_parser() -> argparse.ArgumentParser:
    parser = _ArgumentParser(prog="n5zarr", description="N5 as Zarr v3: inspect, convert, view.")
    parser.add_argument(
        "-v",
        "--verbose",
        action="count",
        default=0,
        help="log more to stderr: -v this package's debug log, -vv every library's",
    )
    parser.add_argument(
        "-q",
        "--quiet",
        action="count",
        default=0,
        help="log less: -q errors only (no warnings), -qq nothing",
    )
    sub = parser.add_subparsers(dest="command", required=True)

    _add_inspect_commands(sub)
    _add_convert(sub)
    _add_other_commands(sub)
    return parser


def _add_inspect_commands(sub: Any) -> None:
    """``tree`` and ``info``."""
    p = sub.add_parser(
        "tree",
        help="print the hierarchy as it is read: shape (z, y, x), dtype, blocks, compression, sizes",
    )
    p.add_argument("path", help=LOCATION_HELP)
    p.add_argument(
        "--json", action="store_true", help="one JSON object per node and line (JSON Lines)"
    )
    _add_storage_options(p)
    p.set_defaults(func=cmd_tree)

    p = sub.add_parser(
        "info",
        help="one node in full, and its image/labels pyramids (levels, scale, translate, units)",
    )
    p.add_argument("path", help=LOCATION_HELP)
    p.add_argument("--json", action="store_true", help="one JSON document")
    _add_storage_options(p)
    p.set_defaults(func=cmd_info)


def _add_convert(sub: Any) -> None:
    from napari_n5zarr.n5.compression import N5_TYPES

    p = sub.add_parser("convert", help="any N5 / Zarr source -> a dual N5 + Zarr v3 pyramid")
    p.add_argument("src", help=LOCATION_HELP)
    p.add_argument(
        "dest",
        help="the new container: a folder (or a URL such as s3://bucket/out.n5) that must not exist, see --overwrite",
    )
    p.add_argument(
        "--to",
        choices=("dual", "ome-zarr"),
        default="dual",
        help="dual N5 + Zarr v3 (default) or a standard OME-Zarr (Zarr v3, OME-NGFF 0.5)",
    )
    p.add_argument("--compression", type=convert_compression_arg, default="default", help=f"dual: {', '.join(N5_TYPES)} (default gzip); 'zstd:5' sets a level; or N5 JSON. "
                   "ome-zarr: zstd (default), gzip, blosc, raw")  # fmt: skip
    p.add_argument(
        "--shards",
        type=shards_arg,
        default=None,
        metavar="N|Z,Y,X",
        help="with --to ome-zarr: blocks per shard (sharding_indexed); default none",
    )
    p.add_argument(
        "--levels",
        type=levels_arg,
        default=None,
        help="'auto' (until one block) or a number; default: the source's levels",
    )
    chunks = p.add_argument("--chunks", type=chunks_arg, default=None,
                            help="block size: one int (spatial axes) or a z,y,x list, at least %(min_block)s (1 for a channel or time axis); default: the source's")  # fmt: skip
    chunks.min_block = _WhenShown(
        lambda: __import__("napari_n5zarr.write.export.plan", fromlist=["MIN_BLOCK"]).MIN_BLOCK
    )
    _add_convert_options(p)
    _add_storage_options(p, "SRC and DEST")
    p.set_defaults(func=cmd_convert)


def _add_convert_options(p: Any) -> None:
    """``convert``'s options beyond what and how to write: scheduling, replacing, a region."""
    p.add_argument(
        "--boundary",
        choices=("truncate", "pad"),
        default="truncate",
        help="edge blocks clipped or padded",
    )
    p.add_argument(
        "--scheduler",
        type=scheduler_arg,
        default=None,
        help="dask.distributed scheduler ADDRESS, or threads / synchronous / processes",
    )
    p.add_argument(
        "--worker-timeout",
        type=float,
        default=60.0,
        metavar="SECONDS",
        help="with a cluster --scheduler: fail after this long without any worker (default 60; 0 waits forever)",
    )
    p.add_argument("--overwrite", action="store_true", help="replace an existing N5/Zarr DEST")
    p.add_argument(
        "--resume",
        action="store_true",
        help="with --to ome-zarr into a local folder: finish a killed or interrupted convert "
        "(the same command again); shards already written are kept",
    )
    p.add_argument("--n5-only", action="store_true", help="write attributes.json only (for z5py 3)")
    p.add_argument(
        "--region",
        default=None,
        metavar="Z0:Z1,Y0:Y1,X0:X1",
        help="check out just this region (level-0 voxels, napari order): a pyramid that overlays the source",
    )
    p.add_argument(
        "--level",
        type=int,
        default=0,
        metavar="N",
        help="with --region: crop level N of the source (default 0)",
    )


def _add_other_commands(sub: Any) -> None:
    """``add-zarr-metadata`` and ``view``."""
    p = sub.add_parser(
        "add-zarr-metadata",
        help="make an N5 container readable as Zarr v3 in place (writes zarr.json only)",
    )
    p.add_argument(
        "path",
        help="an N5 container, changed in place: a folder, a .zip, a BigDataViewer .xml (its N5 folder), or a URL the store can write (s3://)",
    )
    p.add_argument("--dry-run", action="store_true", help="report what would be written")
    _add_storage_options(p)
    p.set_defaults(func=cmd_add_zarr_metadata)

    p = sub.add_parser("view", help="open PATH (default: the bundled sample) in napari")
    p.add_argument(
        "path", nargs="?", default=None, help=LOCATION_HELP + "; default: the bundled sample"
    )
    p.add_argument(
        "--screenshot",
        default=None,
        metavar="PNG",
        help="save a screenshot of the viewer to PNG and exit",
    )
    p.add_argument(
        "--reset-sample",
        action="store_true",
        help="rebuild the bundled sample first (undoes every edit saved into it)",
    )
    _add_storage_options(p)
    p.set_defaults(func=cmd_view)


def _document_exit_codes(parser: argparse.ArgumentParser) -> None:
    """The same exit status rule in every command's --help."""
    parser.epilog = EXIT_CODES
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                sub.epilog = EXIT_CODES
                sub.formatter_class = argparse.RawDescriptionHelpFormatter


def _silence_stdout() -> None:
    """After a broken pipe (``n5zarr tree ... | head``): no more output, no error at exit."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass


class _StderrHandler(logging.StreamHandler):
    """Writes to the current ``sys.stderr`` (replaced by pytest's capture, a redirect)."""

    @property
    def stream(self) -> Any:
        return sys.stderr

    @stream.setter
    def stream(self, value: Any) -> None:
        pass


@contextlib.contextmanager
def logging_to_stderr(verbose: int = 0, quiet: int = 0) -> Iterator[None]:
    """Log this package to stderr for one command, as ``-v``/``-q`` ask (as ome-zarr's CLI).

    Default: warnings and errors. ``-v``: also this package's debug log; ``-vv``: every
    library's (zarr, fsspec, aiohttp: the remote calls). ``-q``: errors only, Python warnings
    silenced; ``-qq``: nothing. The previous logging setup is restored afterwards."""
    package = logging.getLogger("napari_n5zarr")
    level = min(
        max(logging.WARNING - 20 * verbose + 10 * quiet, logging.DEBUG), logging.CRITICAL + 10
    )
    handler = _StderrHandler()
    handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    saved = package.level, package.propagate, root.level
    package.setLevel(level)
    package.addHandler(handler)
    package.propagate = verbose < 2  # -vv: the root handler below shows everything once
    if verbose >= 2:
        root.addHandler(handler)
        root.setLevel(logging.DEBUG)
    try:
        with warnings.catch_warnings():
            if quiet:
                warnings.simplefilter("ignore")
            yield
    finally:
        package.removeHandler(handler)
        root.removeHandler(handler)
        package.setLevel(saved[0])
        package.propagate = saved[1]
        root.setLevel(saved[2])


def _storage_options(args: argparse.Namespace) -> contextlib.AbstractContextManager[None]:
    """``--storage-options`` for every URL the command opens (none given: nothing changes)."""
    options = getattr(args, "storage_options", None)
    if options is None:
        return contextlib.nullcontext()
    from napari_n5zarr.storage.remote import default_storage_options

    return default_storage_options(options)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``n5zarr`` console script (exit status: see :data:`EXIT_CODES`).

    Ordinary mistakes (a missing path, a bad option value, a missing extra, unreadable
    metadata, a remote fault) end with one line on stderr, never a traceback;
    ``N5ZARR_DEBUG=1`` shows the traceback of an unexpected error."""
    from napari_n5zarr.environment import check_environment
    from napari_n5zarr.extras import describe, missing_extra

    parser = build_parser()
    _document_exit_codes(parser)
    args = parser.parse_args(argv)
    try:
        with logging_to_stderr(args.verbose, args.quiet), _storage_options(args):
            check_environment()  # a bad N5ZARR_* value is a usage error naming it, before anything is read
            return int(args.func(args) or 0)
    except BrokenPipeError:
        _silence_stdout()
        return 0
    except KeyboardInterrupt:
        print("n5zarr: interrupted", file=sys.stderr, flush=True)  # noqa: T201
        return ExitCode.INTERRUPTED
    except ImportError as e:
        if missing_extra(e) is None and os.environ.get("N5ZARR_DEBUG"):
            raise
        return _error(_cli_wording(_one_line_text(describe(e))), ExitCode.MISSING_PACKAGE)
    except (
        OSError,
        ValueError,
        KeyError,
        TypeError,
    ) as e:  # includes N5FormatError, FileNotFoundError
        if os.environ.get("N5ZARR_DEBUG"):
            raise
        return _error(_cli_wording(_one_line(e)), exit_code(e))
    except Exception as e:
        if os.environ.get("N5ZARR_DEBUG"):
            raise
        return _error(
            f"{type(e).__name__}: {_one_line(e)} (N5ZARR_DEBUG=1 shows where)", ExitCode.UNEXPECTED
        )


def _cli_wording(text: str) -> str:
    """The library speaks Python (``overwrite=True``, ``src``); here the CLI's names (``--overwrite``, ``SRC``)."""
    text = text.replace("pass overwrite=True", "add --overwrite").replace(
        "overwrite=True", "--overwrite"
    )
    text = text.replace("src and dest overlap", "SRC and DEST overlap")
    text = text.replace("(worker_timeout)", "(--worker-timeout)")
    text = text.replace("resume=True", "--resume").replace(
        "resume and --overwrite", "--resume and --overwrite"
    )
    text = text.replace(", or auto)", ", or leave --chunks out: the source's blocks)")
    return text.replace("the scheduler address ", "--scheduler ")


def _one_line(exc: BaseException) -> str:
    """The error's message on one line, without Python's ``[Errno N]`` and quotes: an OSError
    carrying this package's own sentence shows it as it is, a system one ``PATH: reason``."""
    if isinstance(exc, OSError) and exc.errno is not None and exc.strerror:
        own = exc.strerror != os.strerror(exc.errno)
        text = (
            exc.strerror
            if own or exc.filename is None
            else f"{os.fsdecode(exc.filename)}: {exc.strerror}"
        )
    else:
        text = str(exc.args[0]) if isinstance(exc, KeyError) and exc.args else str(exc)
    return _one_line_text(text) or type(exc).__name__


def _one_line_text(text: str) -> str:
    return " ".join(text.split())


if __name__ == "__main__":
    sys.exit(main())
