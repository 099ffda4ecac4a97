"""The N5 format library: codecs, metadata translation and stores.

Knows zarr, numpy and numcodecs; never Qt or napari.
"""
