"""Errors raised by the N5 format library."""

from __future__ import annotations


class N5FormatError(ValueError):
    """Data or metadata that is not valid N5, or that this library cannot represent."""


class N5MetadataError(N5FormatError, KeyError):
    """An ``attributes.json`` that cannot be translated to Zarr v3 metadata.

    It is also a ``KeyError`` on purpose: zarr-python skips a group member whose metadata
    raises ``KeyError`` with a warning that carries this message, so one unreadable child
    is reported without hiding its siblings.
    """

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0]) if self.args else ""


class N5BlockError(N5FormatError):
    """A block that cannot be decoded (unsupported mode, bad header, wrong size)."""


BLOCK_NAME_ATTR = "_n5_block_name"
"""Attribute an :class:`~napari_n5zarr.n5.stores.N5DefaultStore` sets on each block buffer it
returns ("N5 block s0/0/1 in /data/x.n5"), so the codec, which never sees keys, can name
the block in its errors."""


def located(error: N5BlockError, where: str | None) -> N5BlockError:
    """``error`` with the block's name in front: ``"N5 block s0/3/2/1 in /data/x.n5: ..."``."""
    message = str(error)
    if where and message.startswith(where):
        return error
    return type(error)(f"{where or 'N5 block'}: {message}")


class N5StoreError(OSError):
    """A key that cannot be read from its store: a remote fault or timeout (after retries),
    or a local entry that is not a regular file. The message names the path or URL.

    Deliberately not a ``FileNotFoundError``: a 500 or a timeout is not a missing key, and
    must never read as "no such node" or as a fill-value block.
    """
