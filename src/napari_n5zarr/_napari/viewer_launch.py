"""``n5zarr view``: napari on an N5 path or URL (or the sample), read by this plugin."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import napari


def add_to_viewer(viewer: napari.Viewer, path: str | None = None) -> list:
    """Add the layers of ``path`` (default: the blobs sample) to ``viewer``, through this
    plugin's reader whatever napari's reader preferences say. Returns the new layers."""
    from napari_n5zarr._napari import layers
    from napari_n5zarr._napari.reader import read_path
    from napari_n5zarr._napari.sample import make_sample

    return layers.add_to_viewer(viewer, read_path(path or make_sample()))


def add_widgets(viewer: napari.Viewer, path: str | None = None, reveal: str | None = None) -> list:
    """Dock this plugin's widgets: the N5 browser (showing ``path``, with the node at
    ``reveal`` selected once listed) and the exporter."""
    from napari_n5zarr._napari.browser import dock_browser
    from napari_n5zarr._napari.export_widget import ExportWidget

    browser = dock_browser(viewer)
    if path:
        browser.location.setText(str(path))
        browser.load()
        if reveal is not None:
            browser.reveal(reveal)
    exporter = ExportWidget(viewer)
    # a tab beside the browser: stacked under it, in a 720 px tall window neither had room
    viewer.window.add_dock_widget(
        exporter, name="Export as N5 + Zarr v3", area="right", tabify=True
    )
    show_first(viewer, browser)
    return [browser, exporter]


def show_first(viewer: napari.Viewer, widget: Any) -> None:
    """Bring ``widget``'s dock to the front of its tabs and give the right docks the width
    the widget asks for (napari gives them less in a 1280 px window)."""
    from qtpy.QtCore import Qt, QTimer
    from qtpy.QtWidgets import QDockWidget

    dock = widget.parent()
    while dock is not None and not isinstance(dock, QDockWidget):
        dock = dock.parent()
    if dock is None:
        return
    dock.raise_()
    QTimer.singleShot(0, dock.raise_)  # napari shows a newly tabified dock once it is laid out
    width = widget.sizeHint().width() + dock.width() - dock.contentsRect().width()
    dock.window().resizeDocks([dock], [width], Qt.Orientation.Horizontal)


def fit_after_layout(viewer: napari.Viewer) -> None:
    """Fit the data to the canvas as it is once the docks took their room (napari fits
    each new layer to the canvas of that moment: before the docks, most was cut off)."""
    from qtpy.QtCore import QTimer
    from qtpy.QtWidgets import QApplication

    from napari_n5zarr._napari.browser import DOCK_NAME

    window = viewer.window._qt_window
    if not window.isVisible():
        window.show()  # lay out the docks (an offscreen window for --screenshot)
    QApplication.processEvents()
    browser = dict(viewer.window.dock_widgets).get(DOCK_NAME)
    if browser is not None:
        show_first(viewer, browser)  # the docks' width, now that the window has its size
        QApplication.processEvents()
    viewer.reset_view()
    QTimer.singleShot(0, viewer.reset_view)  # once more after the first paint settles the sizes


def _settle(browser: Any, timeout: float = 15.0) -> None:
    """Run the event loop until the browser has listed its location (or ``timeout`` s),
    so that a screenshot shows the tree rather than its "loading…" row."""
    import time

    from qtpy.QtWidgets import QApplication

    end = time.monotonic() + timeout
    while browser.busy and time.monotonic() < end:
        QApplication.processEvents()
        time.sleep(0.01)
    QApplication.processEvents()


def first_screen(viewer: napari.Viewer, location: str, found: Any = None) -> Any:
    """What ``n5zarr view`` shows: the layers of ``location`` (``found``, else read now),
    napari's scale bar on (in the data's unit), the browser on ``location`` with the first
    layer's pyramid selected (its voxel size and scale table in the details) and the
    exporter; fitted once the docks took their room. Returns the browser."""
    from napari_n5zarr._napari import layers as layer_data

    found = read_first(location) if found is None else found
    added = layer_data.add_to_viewer(
        viewer, layer_data.images_layers(found, layer_data.notify_napari, too_many=_listed_instead)
    )
    scale_bar(
        viewer
    ).visible = True  # physical size at first sight (napari takes the unit from the layers)
    browser, _ = add_widgets(viewer, location, reveal=first_pyramid(added))
    fit_after_layout(viewer)
    return browser


def read_first(location: str) -> Any:
    """The images at ``location`` (:func:`~napari_n5zarr.read.images.open_images`), read
    before any window opens. Raises :class:`~napari_n5zarr.errors.NodeNotFoundError` (exit 3:
    not found) when it holds no N5 or Zarr v3 data at all: no empty viewer."""
    from napari_n5zarr._napari.layers import MAX_LAYERS, notify_napari, open_in_napari
    from napari_n5zarr.errors import NodeNotFoundError

    found = open_in_napari(location, MAX_LAYERS, notify_napari)
    if (
        found.error is None
        and found.too_many is None
        and not (found.images or found.hidden or found.problems)
    ):
        raise NodeNotFoundError(f"no N5 or Zarr v3 data in {location}")
    return found


def scale_bar(viewer: napari.Viewer) -> Any:
    """napari's scale bar overlay (``viewer.canvas.overlays`` from napari 0.9, before it
    ``viewer.scale_bar``)."""
    overlays = getattr(getattr(viewer, "canvas", None), "overlays", None)
    return overlays["scale_bar"] if overlays is not None else viewer.scale_bar


def first_pyramid(layers: list) -> str | None:
    """The node path (in its container) of the first layer's level 0, if it has one."""
    meta = (getattr(layers[0], "metadata", None) or {}).get("napari_n5zarr") if layers else None
    paths = (meta or {}).get("paths") or []
    return str(paths[0]) if paths else None


def view(
    path: str | None = None, *, block: bool = True, screenshot: str | None = None, found: Any = None
) -> napari.Viewer:
    """Open napari on ``path`` (default: the sample) with this plugin's widgets docked
    (see :func:`first_screen`); ``found``: what :func:`read_first` read there already.

    Runs the event loop if ``block``; with ``screenshot``, saves the window to that PNG
    and closes instead (headless checks, documentation). A location holding no N5 or Zarr
    v3 data raises :class:`~napari_n5zarr.errors.NodeNotFoundError` before napari opens.
    """
    import napari

    from napari_n5zarr._napari.sample import make_sample

    location = str(path or make_sample())
    found = read_first(location) if found is None else found
    viewer = napari.Viewer(title=f"napari-n5zarr: {path or 'sample'}", show=screenshot is None)
    if screenshot is not None:  # the first screen the README describes (1280x720), not Qt's default
        viewer.window._qt_window.resize(1280, 720)
    browser = first_screen(viewer, location, found)
    if screenshot is not None:
        _settle(browser)
        viewer.screenshot(screenshot, canvas_only=False)
        viewer.close()
        return viewer
    if block:
        napari.run()
    return viewer


def _listed_instead(location: str, what: str, notify: Any) -> list:
    """Too much to open as layers: ``view`` lists it in the browser it docks anyway."""
    from napari_n5zarr._napari.layers import too_many_message

    notify("warning", too_many_message(location, what, browser_open=True))
    return []
