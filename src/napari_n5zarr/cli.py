"""``n5zarr``: tree | info | convert | add-zarr-metadata | view.

Imports napari only for ``view``; the other commands need zarr, dask and this package.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import zarr
    from zarr.abc.store import Store

    from napari_n5zarr.spatial import Multiscale


def _print(*args: Any) -> None:
    print(*args, flush=True)  # noqa: T201


def _error(message: str) -> int:
    print(f"n5zarr: error: {message}", file=sys.stderr, flush=True)  # noqa: T201
    return 2


# -- tree -----------------------------------------------------------------------------


def _tree_line(node: Any, name: str | None = None) -> str:
    """One node of ``n5zarr tree``: the browser's columns, napari order (z, y, x)."""
    row = {**node.row(), **({"name": name} if name is not None else {})}
    if node.kind == "error":
        return f"{row['name']}  ! unreadable: {node.error}"
    marker = "  (N5 only)" if node.n5 and not node.zarr else ""
    if node.kind == "group":
        return f"{row['name']}/{marker}"
    parts = [row["shape"], row["dtype"], f"blocks {row['blocks']}", row["compression"], row["voxel"], row["size"]]
    head = f"{row['name']}/  [{row['kind']}]" if node.kind == "pyramid" else row["name"]
    text = "  ".join([head, *[p for p in parts if p]]) + marker
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
    from napari_n5zarr.read.tree import open_tree

    tree = open_tree(args.path)
    counts: dict[str, int] = {}
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


def _multiscales(node: zarr.Array | zarr.Group, problems: list[str]) -> list[Multiscale]:
    from napari_n5zarr import spatial

    return spatial.detect(node, on_error=lambda path, exc: problems.append(f"{path or '/'}: {exc}"))


def _axis_text(names: Sequence[str], values: Sequence[Any]) -> str:
    return " ".join(f"{n}={v:g}" if isinstance(v, float) else f"{n}={v}" for n, v in zip(names, values, strict=True))


def _multiscale_json(ms: Multiscale) -> dict[str, Any]:
    """A pyramid as the reader sees it, napari order (slowest axis first)."""
    return {
        "name": ms.name,
        "kind": "labels" if ms.is_labels else "image",
        "convention": ms.convention,
        "dtype": ms.dtype,
        "axes": list(ms.axes[::-1]),
        "scale": list(ms.scale[::-1]),
        "translate": list(ms.translate[::-1]),
        "units": list(ms.units[::-1]),
        "levels": [{"path": p, "shape": list(s[::-1])} for p, s in zip(ms.paths, ms.shapes, strict=True)],
    }


def cmd_info(args: argparse.Namespace) -> int:
    """One node in full (fields, attributes, blocks on disk) and the image/labels pyramids
    the reader finds under it: levels, scale, translate, units."""
    from napari_n5zarr.access import base_store
    from napari_n5zarr.write.blocks import store_get
    from napari_n5zarr.write.exporter import INCOMPLETE_MARKER
    from napari_n5zarr.read.tree import open_tree

    as_json = getattr(args, "json", False)
    incomplete = store_get(base_store(args.path, "r"), INCOMPLETE_MARKER) is not None
    if incomplete and not as_json:
        _print(f"{args.path}: INCOMPLETE export (interrupted before its metadata was written)")
    tree = open_tree(args.path)
    root = tree.root
    if root.kind == "error":  # nothing to show (a 500, bad metadata): fatal, one line
        error = " ".join(str(root.error).split())
        return _error(error if args.path.rstrip("/") in error else f"{args.path}: {error}")
    problems: list[str] = []
    found: list[Multiscale] = []
    blocks: tuple[int, int, bool] | None = None
    if root.kind != "error":
        found = _multiscales(tree.zarr_root(), problems)
        if root.kind in ("array", "pyramid"):
            try:
                blocks = tree.block_count(root)
            except Exception as e:
                problems.append(f"{root.path or '/'}: cannot count blocks ({e})")
    if as_json:
        doc = {**root.to_json(), "location": args.path, "incomplete": incomplete, "attributes": root.attributes,
               "zarr_json": root.zarr_doc, "multiscales": [_multiscale_json(ms) for ms in found], "problems": problems}  # fmt: skip
        if blocks is not None:
            doc["blocks_on_disk"], doc["blocks_expected"], doc["blocks_counted_partially"] = blocks
        _print(json.dumps(doc, indent=2, default=str))
        return 1 if problems else 0
    row = root.row()
    _print(f"{args.path}: {row['kind']}" + (f", {'N5' if root.n5 else ''}{' + ' if root.n5 and root.zarr else ''}{'Zarr v3' if root.zarr else ''}" if root.n5 or root.zarr else ""))
    for label in ("shape", "dtype", "blocks", "compression", "voxel", "size"):
        if row[label]:
            _print(f"  {label:<11}{row[label]}")
    if blocks is not None:
        on_disk, expected, partial = blocks
        more = "+" if partial else ""
        sparse = " (sparse: missing blocks read as 0)" if not partial and on_disk < expected else ""
        _print(f"  {'on disk':<11}{on_disk}{more} of {expected} blocks{sparse}")
    if root.reason:
        _print(f"  cannot open: {root.reason}")
    user = {k: v for k, v in root.attributes.items() if k not in ("dimensions", "blockSize", "dataType", "compression", "compressionType")}
    if user:
        _print("  attributes " + json.dumps(user, default=str)[:2000])
    for ms in found:
        kind = "labels" if ms.is_labels else "image"
        _print(f"{ms.name or '/'}: {kind} {ms.dtype}, {len(ms.paths)} level(s), convention {ms.convention}")
        _print(f"  scale      {_axis_text(ms.axes, ms.scale)}")
        _print(f"  translate  {_axis_text(ms.axes, ms.translate)}")
        _print(f"  units      {_axis_text(ms.axes, [u or '-' for u in ms.units])}")
        for path, shape, factors in zip(ms.paths, ms.shapes, ms.downsampling, strict=True):
            shape_text = " x ".join(str(s) for s in shape)
            _print(f"  {path or '.':<10} {shape_text:<24} factors {[round(f, 3) for f in factors]}")
    for problem in problems:
        _print(f"! {problem}")
    if not found and root.kind != "error":
        _print(f"{args.path}: no image or labels arrays found")
    return 1 if problems else 0


# -- convert --------------------------------------------------------------------------


def _n5_order(array: zarr.Array) -> bool:
    """True for ``n5_default`` arrays (shape in N5 order); plain Zarr arrays are C order."""
    codecs = getattr(array.metadata, "codecs", ())
    return bool(codecs) and codecs[0].to_dict().get("name") == "n5_default"


def _levels(node: zarr.Array | zarr.Group, ms: Multiscale) -> list[Any]:
    """Dask arrays of every level, napari order (BigDataViewer time points stacked as t).

    The Multiscale's per-axis lists are the reverse of napari's order either way."""
    import dask.array as da

    def level(path: str) -> da.Array:
        array = node if path == "" else node[path]
        data = da.from_zarr(array)
        return data.T if _n5_order(array) else data

    if ms.time_paths:
        per_time = [[level(p) for p in paths] for paths in ms.time_paths]
        return [da.stack([t[k] for t in per_time], axis=0) for k in range(len(ms.paths))]
    return [level(p) for p in ms.paths]


def _local_path(text: str) -> str | None:
    if "://" in text and not text.startswith("file://"):
        return None
    return os.path.realpath(os.path.expanduser(text.removeprefix("file://")))


def _overlap(src: str, dest: str) -> bool:
    a, b = _local_path(src), _local_path(dest)
    if a is None or b is None:
        return src.rstrip("/") == dest.rstrip("/")
    return a == b or a.startswith(b + os.sep) or b.startswith(a + os.sep)


def _progress_printer(label: str) -> Any:
    if not sys.stderr.isatty():
        return None

    def report(done: int, total: int) -> None:
        end = "\n" if done >= total else ""
        print(f"\r{label}: {done}/{total} blocks", end=end, file=sys.stderr, flush=True)  # noqa: T201

    return report


def _scheduler(value: str | None) -> tuple[Any, Any]:
    """(scheduler for dask, client to close): a named scheduler or a distributed address."""
    if value is None or value in ("threads", "threading", "sync", "synchronous", "single-threaded", "processes"):
        return value, None
    try:
        from distributed import Client
    except ModuleNotFoundError:
        raise ValueError("--scheduler ADDRESS needs dask.distributed: pip install 'napari-n5zarr[distributed]'") from None
    client = Client(value)
    return client, client


def cmd_convert(args: argparse.Namespace) -> int:
    """Any N5 / Zarr source -> a dual N5 + Zarr v3 pyramid (one per image in the source)."""
    from napari_n5zarr.write.exporter import export
    from napari_n5zarr.access import open as open_node

    if _overlap(args.src, args.dest):
        return _error("SRC and DEST overlap; convert into a separate folder")
    node = open_node(args.src)
    problems: list[str] = []
    found = _multiscales(node, problems)
    for problem in problems:
        _print(f"! skipped {problem}")
    if not found:
        return _error(f"{args.src}: no image or labels arrays to convert")
    chunks = [int(c) for c in args.chunks.split(",")] if args.chunks else None
    chunks_arg = chunks[0] if chunks and len(chunks) == 1 else chunks
    names = [ms.name or "" for ms in found] if len(found) > 1 else [""]
    scheduler, client = _scheduler(args.scheduler)
    try:
        for ms, name in zip(found, names, strict=True):
            levels = _levels(node, ms)
            keep = args.levels is None and len(levels) > 1
            source_blocks = tuple(levels[0].chunksize)  # the source's blocks, napari order
            order = slice(None, None, -1)  # N5 order -> napari order
            export(
                levels if keep else levels[0],
                args.dest,
                path=name.replace("/", "_") if name else "",
                scale=list(ms.scale[order]),
                translate=list(ms.translate[order]),
                units=[u or "pixel" for u in ms.units[order]],
                axis_labels=list(ms.axes[order]),
                compression=args.compression,
                chunks=chunks_arg if chunks_arg is not None else source_blocks,
                levels=_levels_arg(args.levels),
                boundary=args.boundary,
                overwrite=args.overwrite,
                labels=ms.is_labels,
                zarr_json=not args.n5_only,
                progress=_progress_printer(name or "export"),
                scheduler=scheduler,
            )
            target = f"{args.dest.rstrip('/')}/{name}" if name else args.dest
            _print(f"wrote {target} ({'labels' if ms.is_labels else 'image'}, from {ms.convention})")
    finally:
        if client is not None:
            client.close()
    return 1 if problems else 0


def _levels_arg(value: str | None) -> Any:
    if value is None or value == "auto":
        return "auto"
    return int(value)


# -- add-zarr-metadata ----------------------------------------------------------------


def _list_dir(store: Store, prefix: str) -> list[str]:
    from zarr.core.sync import sync

    async def names() -> list[str]:
        return [k async for k in store.list_dir(prefix)]

    return sorted(sync(names()))


def _first_block_mode(store: Store, prefix: str, ndim: int) -> int | None:
    """Mode of the first block found (None if the dataset has no blocks)."""
    from napari_n5zarr.write.blocks import store_get
    from napari_n5zarr.n5.header import parse_header

    path = prefix.rstrip("/")
    for _ in range(ndim):
        entries = [e for e in _list_dir(store, path) if e.isdigit()]
        if not entries:
            return None
        path = f"{path}/{entries[0]}" if path else entries[0]
    raw = store_get(store, path)
    return None if raw is None else parse_header(raw).mode


class _Report:
    def __init__(self, dry_run: bool) -> None:
        self.dry_run = dry_run
        self.written = self.unchanged = 0
        self.refused: list[str] = []

    def write(self, store: Store, prefix: str, doc: dict[str, Any]) -> None:
        from napari_n5zarr.write.blocks import store_get, store_set

        key = f"{prefix}zarr.json"
        text = json.dumps(doc, indent=2)
        existing = store_get(store, key)
        if existing is not None and _same_json(existing, doc):
            self.unchanged += 1
            return
        verb = "would write" if self.dry_run else ("updated" if existing is not None else "wrote")
        if not self.dry_run:
            store_set(store, key, text.encode())
        self.written += 1
        _print(f"{verb} {key}")

    def refuse(self, where: str, reason: str) -> None:
        self.refused.append(where)
        _print(f"cannot express {where or '/'}: {reason}")


def _same_json(raw: bytes, doc: dict[str, Any]) -> bool:
    from napari_n5zarr.errors import N5FormatError
    from napari_n5zarr.n5.metadata import parse_document

    try:
        return parse_document(raw, None) == doc
    except N5FormatError:  # an unreadable zarr.json is rewritten
        return False


def _add_metadata(store: Store, prefix: str, report: _Report, depth: int = 0) -> bool:
    """Walk one folder; True if it holds N5 content (then it gets a zarr.json)."""
    from napari_n5zarr.write.blocks import store_get
    from napari_n5zarr.errors import N5FormatError
    from napari_n5zarr.n5.header import MODE_NAMES
    from napari_n5zarr.n5.describe import store_location
    from napari_n5zarr.n5.metadata import GROUP_DOC, attributes_to_zarr, parse_document
    from napari_n5zarr.n5.model import is_dataset

    where = prefix.rstrip("/")
    key = f"{prefix}attributes.json"
    try:
        raw = store_get(store, key)
    except OSError as e:  # unreadable (permissions, a FIFO, a remote fault): report it in place
        report.refuse(where, _one_line(e))
        return True
    attrs: Any = None
    if raw is not None:
        try:  # the library's one parser: size cap, nesting limit, the file named
            attrs = parse_document(raw, store_location(store, key))
        except N5FormatError as e:
            report.refuse(where, _one_line(e))
            return True
    if isinstance(attrs, dict) and is_dataset(attrs):
        try:
            doc = attributes_to_zarr(attrs, path=where or "/")
        except N5FormatError as e:
            report.refuse(where, str(e))
            return True
        mode = _first_block_mode(store, prefix, len(doc["shape"]))
        if mode not in (None, 0):
            report.refuse(where, f"its blocks are in {MODE_NAMES.get(mode, mode)} mode; Zarr reads default-mode blocks only")
            return True
        report.write(store, prefix, doc)
        return True
    holds_n5 = raw is not None
    if depth < 64:
        for name in _list_dir(store, where):
            if name in ("attributes.json", "zarr.json") or name.startswith("."):
                continue
            holds_n5 |= _add_metadata(store, f"{prefix}{name}/", report, depth + 1)
    if holds_n5:
        if attrs is not None and not isinstance(attrs, dict):
            report.refuse(where, "attributes.json does not hold a JSON object")
        else:
            try:
                doc = attributes_to_zarr(attrs, path=where or "/") if attrs is not None else dict(GROUP_DOC)
            except N5FormatError as e:
                report.refuse(where, str(e))
                return True
            report.write(store, prefix, doc)
    return holds_n5


def cmd_add_zarr_metadata(args: argparse.Namespace) -> int:
    """Write zarr.json beside every attributes.json (and for implicit groups); blocks and
    attributes.json are never touched."""
    from napari_n5zarr.access import base_store

    store = base_store(args.path, "r" if args.dry_run else "r+")
    report = _Report(args.dry_run)
    if not _add_metadata(store, "", report):
        return _error(f"{args.path}: no N5 attributes.json found")
    verb = "would write" if args.dry_run else "wrote"
    _print(
        f"{verb} {report.written} zarr.json, {report.unchanged} already up to date, "
        f"{len(report.refused)} node(s) cannot be expressed in Zarr v3"
    )
    if not args.dry_run and report.written:
        _print("note: z5py 3 refuses folders holding both attributes.json and zarr.json")
    return 1 if report.refused else 0


# -- view -----------------------------------------------------------------------------


def cmd_view(args: argparse.Namespace) -> int:
    """Open PATH (default: the sample) in napari with this plugin's reader and widgets."""
    if args.path is not None:  # fail here, in one line, not in an empty viewer
        from napari_n5zarr._napari.reader import bdv_xml_target
        from napari_n5zarr.access import open as open_node

        target = args.path
        if target.lower().endswith(".xml") and "://" not in target:
            from pathlib import Path

            if not Path(target).is_file():
                raise FileNotFoundError(f"no such file: {target}")
            found = bdv_xml_target(Path(target))
            if found is None:
                raise ValueError(f"{target} is not a BigDataViewer N5 XML")
            target = found[0]
        for name in ("attributes.json", "zarr.json"):
            target = target[: -len(name) - 1] if target.endswith("/" + name) else target
        open_node(target)
    try:
        from napari_n5zarr._napari.viewer_launch import view

        view(args.path, screenshot=args.screenshot)
    except ModuleNotFoundError as e:
        if e.name not in ("napari", "qtpy"):
            raise
        return _error(f"'n5zarr view' needs napari with a Qt binding ({e.name} is missing): pip install 'napari-n5zarr[qt]'")
    return 0


# -- main -----------------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    from napari_n5zarr.n5.compression import N5_TYPES

    parser = argparse.ArgumentParser(prog="n5zarr", description="N5 as Zarr v3: inspect, convert, view.")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("tree", help="print the hierarchy as it is read: shape (z, y, x), dtype, blocks, compression, sizes")
    p.add_argument("path")
    p.add_argument("--json", action="store_true", help="one JSON object per node and line (JSON Lines)")
    p.set_defaults(func=cmd_tree)

    p = sub.add_parser("info", help="one node in full, and its image/labels pyramids (levels, scale, translate, units)")
    p.add_argument("path")
    p.add_argument("--json", action="store_true", help="one JSON document")
    p.set_defaults(func=cmd_info)

    p = sub.add_parser("convert", help="any N5 / Zarr source -> a dual N5 + Zarr v3 pyramid")
    p.add_argument("src")
    p.add_argument("dest")
    p.add_argument("--compression", default="gzip", help=f"{', '.join(N5_TYPES)}; 'zstd:5' sets a level; or N5 JSON")
    p.add_argument("--levels", default=None, help="'auto' (until one block) or a number; default: the source's levels")
    p.add_argument("--chunks", default=None, help="block size: one int (spatial axes) or a z,y,x list; default: the source's")
    p.add_argument("--boundary", choices=("truncate", "pad"), default="truncate", help="edge blocks clipped or padded")
    p.add_argument("--scheduler", default=None, help="dask.distributed scheduler ADDRESS, or threads / synchronous / processes")
    p.add_argument("--overwrite", action="store_true", help="replace an existing N5/Zarr DEST")
    p.add_argument("--n5-only", action="store_true", help="write attributes.json only (for z5py 3)")
    p.set_defaults(func=cmd_convert)

    p = sub.add_parser("add-zarr-metadata", help="make an N5 container readable as Zarr v3 in place (writes zarr.json only)")
    p.add_argument("path")
    p.add_argument("--dry-run", action="store_true", help="report what would be written")
    p.set_defaults(func=cmd_add_zarr_metadata)

    p = sub.add_parser("view", help="open PATH (default: the bundled sample) in napari")
    p.add_argument("path", nargs="?", default=None)
    p.add_argument("--screenshot", default=None, metavar="PNG", help="save a screenshot of the viewer to PNG and exit")
    p.set_defaults(func=cmd_view)
    return parser


EXIT_CODES = """exit status:
  0  all good
  1  done, but something was skipped or unreadable (listed in the output)
  2  usage error or fatal error (one line on stderr: what and why)"""


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


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``n5zarr`` console script (exit status: see :data:`EXIT_CODES`).

    Ordinary mistakes (a missing path, a bad option value, a missing extra, unreadable
    metadata, a remote fault) end with one line on stderr, never a traceback;
    ``N5ZARR_DEBUG=1`` shows the traceback of an unexpected error."""
    from napari_n5zarr.extras import describe, missing_extra

    parser = build_parser()
    _document_exit_codes(parser)
    args = parser.parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except BrokenPipeError:
        _silence_stdout()
        return 0
    except KeyboardInterrupt:
        print("n5zarr: interrupted", file=sys.stderr, flush=True)  # noqa: T201
        return 130
    except ImportError as e:
        if missing_extra(e) is None and os.environ.get("N5ZARR_DEBUG"):
            raise
        return _error(describe(e))
    except (OSError, ValueError, KeyError, TypeError) as e:  # includes N5FormatError, FileNotFoundError
        if os.environ.get("N5ZARR_DEBUG"):
            raise
        return _error(_cli_wording(_one_line(e)))
    except Exception as e:
        if os.environ.get("N5ZARR_DEBUG"):
            raise
        return _error(f"{type(e).__name__}: {_one_line(e)} (N5ZARR_DEBUG=1 shows where)")


def _cli_wording(text: str) -> str:
    """The library speaks Python (``overwrite=True``); here the option is ``--overwrite``."""
    return text.replace("pass overwrite=True", "add --overwrite").replace("overwrite=True", "--overwrite")


def _one_line(exc: BaseException) -> str:
    text = str(exc.args[0]) if isinstance(exc, KeyError) and exc.args else str(exc)
    return " ".join(text.split()) or type(exc).__name__


if __name__ == "__main__":
    sys.exit(main())
