"""One napari window, timed: open + first frame, a far z jump, scrolling 64 z-planes.

``--path`` may be a URL for ``--impl ours`` (a remote pyramid); ``--planes N`` scrolls N
planes instead of one block slab's 64. ``--impl numpy`` reads the pyramid into memory before the clock: the same window with no
reader at all, the floor napari's own slicing and drawing (llvmpipe here) put under each row.

Run by ``speed.py`` in a fresh process under Xvfb (``QT_QPA_PLATFORM=xcb``); prints one JSON
line. Not meant to be run by hand, but it can be:

    xvfb-run -a python benchmarks/napari_window.py --impl ours --path /tmp/x/pyramid.n5 --levels 4

What "drawn" means here: after the change (``viewer.open`` / ``add_image``, or
``viewer.dims.set_current_step``) the loop runs ``processEvents`` until every layer reports
``loaded`` and then until the vispy canvas has emitted one more ``draw`` event (the frame
with the new slice has been rendered by Mesa's llvmpipe; the buffer swap to the X server is
not waited for). The open row ends instead when the first frame showing the data has been
drawn, even inside ``viewer.open`` / ``add_image`` (napari processes events there, e.g. for
``viewer.open``'s progress bar, so no later draw may follow: waiting for one counted 0.5 s
of idling). With napari's default synchronous slicing the slice is read inside
``set_current_step``; with async slicing (``experimental.async_``) it is read in a thread
and ``layer.loaded`` turns True when it arrives. The JSON says which mode was in force.
"""

from __future__ import annotations

import argparse
import json
import os
import time

t_start = time.perf_counter()
import napari  # noqa: E402 (timed on purpose: the import is part of the open row)
from qtpy.QtWidgets import QApplication  # noqa: E402

BLOCK = 64


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument(
        "--impl",
        choices=["ours", "tensorstore", "numpy"],
        required=True,
        help="numpy: the levels read into memory before the clock (napari's own floor)",
    )
    ap.add_argument("--path", required=True, help="the pyramid folder (s0, s1, ... inside)")
    ap.add_argument("--levels", type=int, required=True)
    ap.add_argument("--timeout", type=float, default=120.0)
    ap.add_argument(
        "--planes", type=int, default=BLOCK, help="planes scrolled, from the second block slab"
    )
    args = ap.parse_args()

    viewer = napari.Viewer(show=True)
    viewer.window._qt_window.resize(1100, 900)
    app = QApplication.instance()
    canvas = viewer.window._qt_viewer.canvas._scene_canvas
    draws = [0]
    canvas.events.draw.connect(lambda _e: draws.__setitem__(0, draws[0] + 1))
    shown: list[float] = []  # ends of the draws in which every layer's data was on screen
    canvas.events.draw.connect(
        lambda _e: shown.append(time.perf_counter()) if _data_drawn(viewer) else None,
        position="last",
    )
    t_end = time.perf_counter() + 1.0
    while time.perf_counter() < t_end:  # let the empty window settle
        app.processEvents()

    def wait_frame() -> None:
        """processEvents until all layers are loaded and one frame has been drawn after that."""
        deadline = time.perf_counter() + args.timeout
        loaded_at = (
            draws[0] if viewer.layers and all(layer.loaded for layer in viewer.layers) else None
        )
        nudged = False
        t_loaded = time.perf_counter()
        while True:
            app.processEvents()
            if loaded_at is None and viewer.layers and all(layer.loaded for layer in viewer.layers):
                loaded_at = draws[0]
                t_loaded = time.perf_counter()
            if loaded_at is not None and draws[0] > loaded_at:
                return
            if loaded_at is not None and not nudged and time.perf_counter() - t_loaded > 0.5:
                canvas.update()  # nothing scheduled a redraw: ask for one (counted in the time)
                nudged = True
            if time.perf_counter() > deadline:
                raise TimeoutError("no frame drawn")

    in_memory = None
    if args.impl == "numpy":  # napari alone: no reader on the clock, only slicing and drawing
        in_memory = [level.read().result() for level in ts_levels(args.path, args.levels)]

    # -- open + first frame -------------------------------------------------------------
    t0 = time.perf_counter()
    if in_memory is not None:
        viewer.add_image(in_memory, multiscale=True, name="pyramid")
    elif args.impl == "ours":
        viewer.open(args.path, plugin="napari-n5zarr")
    else:
        viewer.add_image(ts_levels(args.path, args.levels), multiscale=True, name="pyramid")
    wait_frame()
    open_s = min((t for t in shown if t > t0), default=time.perf_counter()) - t0
    layer = viewer.layers[0]
    scene = getattr(viewer, "scene", None)  # napari >= 0.9 (viewer.camera is deprecated there)
    camera = scene.camera if scene is not None else viewer.camera

    # -- zoom until napari shows level 0 --------------------------------------------------
    for _ in range(8):
        if layer.data_level == 0:
            break
        camera.zoom *= 2
        wait_frame()
    nz = layer.level_shapes[0][0]
    nslab = nz // BLOCK

    def goto(z: int) -> float:
        t = time.perf_counter()
        viewer.dims.set_current_step(0, z)
        wait_frame()
        return time.perf_counter() - t

    # Slabs of 64 planes never visited before (nor next to one, in case of prefetch):
    # open shows the middle slab; scroll through slab 1, then jump to the last slab.
    scroll_start = BLOCK * 1
    planes = max(1, min(args.planes, nz - scroll_start - BLOCK))  # never into the jump's slab
    t_scroll = sum(goto(z) for z in range(scroll_start, scroll_start + planes))
    jump_z = BLOCK * (nslab - 1) + BLOCK // 2
    t_jump = goto(jump_z)
    try:
        tile = list(layer._slice.image.raw.shape)
    except Exception:  # napari internals moved: report nothing rather than fail
        tile = None
    from napari.settings import get_settings

    print(
        json.dumps(
            {
                "impl": args.impl,
                "open_s": open_s,
                "jump_s": t_jump,
                "scroll_s_per_plane": t_scroll / planes,
                "planes": planes,
                "data_level": layer.data_level,
                "zoom": camera.zoom,
                "tile": tile,
                "async_slicing": bool(get_settings().experimental.async_),
                "napari_import_s": t0 - t_start,
            }
        ),
        flush=True,
    )
    viewer.close()


def ts_levels(path: str, n: int) -> list:
    """The pyramid's levels opened by tensorstore, in napari's axis order (``.T``)."""
    import tensorstore as ts

    return [
        ts.open(
            {"driver": "n5", "kvstore": {"driver": "file", "path": os.path.join(path, f"s{k}")}}
        )
        .result()
        .T
        for k in range(n)
    ]


def _data_drawn(viewer: napari.Viewer) -> bool:
    """Every layer loaded and its vispy node holding data (napari internals: False if moved)."""
    try:
        visuals = viewer.window._qt_viewer.canvas.layer_to_visual
        return bool(viewer.layers) and all(
            layer.loaded and visuals[layer].node._data is not None for layer in viewer.layers
        )
    except Exception:
        return False


if __name__ == "__main__":
    main()
