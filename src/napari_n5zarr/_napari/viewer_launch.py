"""``n5zarr view``: napari on an N5 path or URL (or the sample), read by this plugin."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import napari


def add_to_viewer(viewer: napari.Viewer, path: str | None = None) -> list:
    """Add the layers of ``path`` (default: the blobs sample) to ``viewer``, through this
    plugin's reader whatever napari's reader preferences say. Returns the new layers."""
    from napari_n5zarr._napari.reader import read_path
    from napari_n5zarr._napari.sample import make_sample

    layers = []
    for data, kwargs, kind in (t for t in read_path(path or make_sample()) if len(t) == 3):
        added = getattr(viewer, f"add_{kind}")(data, **kwargs)
        layers.extend(added if isinstance(added, list) else [added])
    return layers


def view(path: str | None = None, *, block: bool = True) -> napari.Viewer:
    """Open napari on ``path`` (default: the sample) and run its event loop if ``block``."""
    import napari

    viewer = napari.Viewer(title=f"napari-n5zarr: {path or 'sample'}")
    add_to_viewer(viewer, path)
    if block:
        napari.run()
    return viewer
