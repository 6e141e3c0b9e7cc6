"""``ToolCard``: a tool's name, kind, description, parameter table and the exact JSON schema
the model sees, with a switch between the OpenAI, OpenAI strict, Anthropic, Gemini and MCP
exports. Its mimebundle also carries a static HTML card (each format in a ``<details>``) for
front ends without widgets.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import ipywidgets as W  # type: ignore[import-untyped]

from kode_nb.ui.tool_html import FORMATS, schema_block_html, tool_html, tool_summary_html, tool_text

if TYPE_CHECKING:
    from kode_nb.tools._model import Tool

__all__ = ["ToolCard"]


class ToolCard(W.VBox):  # type: ignore[misc]
    """The card of one tool; ``format`` switches the schema shown."""

    def __init__(self, tool: Tool, *, fmt: str = "openai") -> None:
        self.tool = tool
        options = [(label, f) for f, label in FORMATS.items()]
        self.format = W.ToggleButtons(options=options, value=fmt, style={"button_width": "auto"})
        self.schema = W.HTML(schema_block_html(tool, fmt))
        self.format.observe(self._switch, names="value")
        schema_box = W.Accordion(
            children=[W.VBox([self.format, self.schema])],
            titles=("JSON schema the model sees",),
            selected_index=None,
        )
        super().__init__(
            [W.HTML(tool_summary_html(tool)), schema_box],
            layout=W.Layout(border="1px solid #ccc", padding="2px 6px", margin="2px 0"),
        )

    def _switch(self, change: dict[str, Any]) -> None:
        self.schema.value = schema_block_html(self.tool, change["new"])

    def _repr_mimebundle_(self, **kwargs: Any) -> dict[str, Any]:
        data: dict[str, Any] = super()._repr_mimebundle_(**kwargs) or {}
        data["text/html"] = tool_html(self.tool)
        data["text/plain"] = tool_text(self.tool)
        return data
