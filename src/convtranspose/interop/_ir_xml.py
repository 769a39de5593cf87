"""Reading an OpenVINO IR's ``.xml`` with its size bounded as it is parsed."""

from __future__ import annotations

import os

from ._safety import InteropError, format_bytes, open_regular

__all__ = ["parse_bounded"]


#: What one parsed XML element costs in memory, at least: an empty element took 80 to
#: 100 bytes (3 000 000 of them, 290 MB peak), so the ``.xml`` may hold ``max_bytes``
#: divided by this many elements ...
_BYTES_PER_ELEMENT = 128
#: ... or this many, whichever is more (13 MB of tree): a limit of a few kilobytes,
#: meant for the constants, still reads a model's structure.
_MIN_ELEMENTS = 100_000


def parse_bounded(element_tree, xml_path: str, max_bytes: int):
    """The root of the ``.xml``, parsed incrementally with DTDs forbidden; refused as
    soon as it has more elements than ``max_bytes`` allows (:data:`_BYTES_PER_ELEMENT`,
    :data:`_MIN_ELEMENTS`) rather than after the whole tree is built."""
    limit = max(_MIN_ELEMENTS, max_bytes // _BYTES_PER_ELEMENT)
    root, count = None, 0
    with open_regular(xml_path, "model file") as file:
        for _, element in element_tree.iterparse(file, events=("start",), forbid_dtd=True):
            count += 1
            if root is None:
                root = element
            if count > limit:
                raise InteropError(
                    f"{os.path.basename(xml_path)} has more than {limit} XML elements, over"
                    f" what the limit of {format_bytes(max_bytes)} allows (about"
                    f" {_BYTES_PER_ELEMENT} bytes each); raise it with --max-bytes if this"
                    " is intended")
    if root is None:
        raise InteropError(f"{os.path.basename(xml_path)} is not well-formed XML: no element")
    return root
