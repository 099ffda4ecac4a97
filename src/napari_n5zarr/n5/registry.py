"""Registering this package's codecs with zarr (entry points do it too, lazily).

Its own module, below both the metadata translator and :mod:`napari_n5zarr.access`, which
both need the codecs registered (importing it from ``access`` made a cycle).
"""

from __future__ import annotations


def ensure_codecs_registered() -> None:
    """Register this package's codecs with zarr (also done by entry points) and pin
    ``n5_default`` to ours if another package registers the same name."""
    import zarr
    from zarr.registry import register_codec

    from napari_n5zarr.n5.codec import CODEC_NAME, N5DefaultCodec
    from napari_n5zarr.n5.lz4block import LZ4BlockCodec
    from napari_n5zarr.n5.lz4stream import CODEC_NAME as LZ4_NAME
    from napari_n5zarr.zarr_internals import codec_registry

    register_codec(CODEC_NAME, N5DefaultCodec)
    register_codec(LZ4_NAME, LZ4BlockCodec)
    registry = codec_registry(CODEC_NAME)
    registry.lazy_load()
    if len(registry) > 1 and zarr.config.get(f"codecs.{CODEC_NAME}", None) is None:
        zarr.config.set({f"codecs.{CODEC_NAME}": f"{N5DefaultCodec.__module__}.{N5DefaultCodec.__qualname__}"})
