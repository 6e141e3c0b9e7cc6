"""Content blocks as text, for providers (or message slots) that take text only."""

from __future__ import annotations

import json
from collections.abc import Iterable

from kode_nb.types import ContentBlock, ImageBlock, JsonBlock, TextBlock


def image_placeholder(block: ImageBlock) -> str:
    """``[image: image/png, 1234 bytes]`` for a model that cannot see the image."""
    data = block.data.strip()
    size = len(data) * 3 // 4 - (len(data) - len(data.rstrip("=")))
    return f"[image: {block.mime_type}, {size} bytes]"


def block_text(block: ContentBlock) -> str:
    """The text a model sees for one block (JSON serialized, images as a placeholder)."""
    if isinstance(block, TextBlock):
        return block.text
    if isinstance(block, JsonBlock):
        return json.dumps(block.data, ensure_ascii=False, default=str)
    return image_placeholder(block)


def content_text(blocks: Iterable[ContentBlock]) -> str:
    """All blocks as text, joined by newlines."""
    return "\n".join(block_text(b) for b in blocks)
