"""New labels for an image in napari (issue 31, item 1): the Save labels widget's button and
the layer context menu create metadata-only labels that overlay the image, open editable and
are selected."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import napari_n5zarr
from napari_n5zarr._napari import new_labels
from napari_n5zarr._napari.proofread import SaveLabelsWidget
from napari_n5zarr.write.edit.editable import EditableLevel


@pytest.fixture
def image_in_viewer(make_napari_viewer, tmp_path: Path):
    a = (np.arange(12 * 40 * 50).reshape(12, 40, 50) % 200).astype("uint8")
    napari_n5zarr.export(
        a, tmp_path / "em.n5", chunks=16, scale=(3.0, 1.0, 1.0), translate=(6.0, 2.0, 0.0)
    )
    viewer = make_napari_viewer()
    (image,) = viewer.open(str(tmp_path / "em.n5"), plugin="napari-n5zarr")
    return viewer, image


def _check_new_layer(viewer, image, layer, where: Path) -> None:
    assert layer is not None
    assert viewer.layers.selection.active is layer
    assert isinstance(layer.data, EditableLevel)  # editable at once
    assert layer.data.shape == image.data[0].shape if image.multiscale else image.data.shape
    np.testing.assert_allclose(layer.scale, image.scale)
    np.testing.assert_allclose(layer.translate, image.translate)
    assert all(f.name.endswith(".json") for f in where.rglob("*") if f.is_file())


def test_button_creates_selected_editable_labels(
    image_in_viewer, tmp_path: Path, monkeypatch
) -> None:
    viewer, image = image_in_viewer
    monkeypatch.setattr(new_labels, "ask_destination", lambda layer: tmp_path / "em-labels.n5")
    widget = SaveLabelsWidget(viewer)
    viewer.layers.selection.active = image
    widget.new_button.clicked.emit()
    layer = viewer.layers[-1]
    _check_new_layer(viewer, image, layer, tmp_path / "em-labels.n5")
    layer.data[2, 3:6, 3:6] = 5  # paint, then save as every labels layer saves
    assert "saved" in widget.save()
    assert int(napari_n5zarr.open(tmp_path / "em-labels.n5/s0")[4, 4, 2]) == 5


def test_layer_context_menu_entry(image_in_viewer, tmp_path: Path, monkeypatch) -> None:
    from napari._app_model import get_app_model

    viewer, image = image_in_viewer
    monkeypatch.setattr(new_labels, "ask_destination", lambda layer: tmp_path / "ctx.n5")
    app = get_app_model()
    entries = [
        getattr(getattr(item, "command", None), "id", None)
        for item in app.menus.get_menu("napari/layers/context")
    ]
    assert new_labels.CONTEXT_ACTION in entries  # registered when the reader opened the image
    viewer.layers.selection.active = image
    app.commands.execute_command(new_labels.CONTEXT_ACTION).result()
    _check_new_layer(viewer, image, viewer.layers[-1], tmp_path / "ctx.n5")


def test_layers_annotate_menu_entry(make_napari_viewer) -> None:
    from napari._app_model import get_app_model

    make_napari_viewer()
    entries = [
        getattr(getattr(item, "command", None), "id", None)
        for item in get_app_model().menus.get_menu("napari/layers/annotate")
    ]
    assert "napari-n5zarr.new_labels" in entries


def test_not_an_image_is_refused_with_a_notice(image_in_viewer, monkeypatch) -> None:
    viewer, _ = image_in_viewer
    told: list[str] = []
    monkeypatch.setattr("napari.utils.notifications.show_warning", told.append)
    points = viewer.add_points([[1, 2, 3]])
    viewer.layers.selection.active = points
    assert new_labels.new_labels_for(viewer, points) is None
    assert told == ["New labels for this image: select an image layer first"]


def test_default_destination_is_beside_the_source_and_never_taken(
    image_in_viewer, tmp_path: Path
) -> None:
    _, image = image_in_viewer
    first = new_labels.default_destination(image)
    assert first == tmp_path / f"{image.name}-labels.n5"
    first.mkdir()
    assert new_labels.default_destination(image) == tmp_path / f"{image.name}-labels-2.n5"
