"""The notebook UI: live call views, approval prompts, tool cards and rich displays.

This package is the only place that imports ``ipywidgets`` / ``anywidget``, and only in the
modules that need them (:mod:`~kode_nb.ui.call_view`, :mod:`~kode_nb.ui.approval`,
:mod:`~kode_nb.ui.stream`). Every rich display of a core object (tools, results, events,
runs, traces, divergences, many runs and their inbox) is registered from one module,
:mod:`~kode_nb.ui.formatters`, when the extension loads; :mod:`~kode_nb.ui.html` renders plain
HTML and text for front ends without widgets (nbconvert, GitHub, VS Code without the widget
manager, terminal IPython). A view once final becomes a static record
(:mod:`~kode_nb.ui.records`): no widget, so a saved notebook reopened without a kernel shows it;
tool cards and listings are records from the start. The ``kode_nb.notebook`` comm with the
JupyterLab extension (:mod:`~kode_nb.ui.notebook_comm`, its trace requests in
:mod:`~kode_nb.ui.trace_ops`) and the served-tools panel of ``%mcp serve``
(:mod:`~kode_nb.ui.mcp_serving`) live here too. Nothing is imported here, so ``import
kode_nb.ui.html`` stays cheap.

May import: the core. Never the magics or the extension entry point (kode_nb/_extension.py).
"""

__all__: list[str] = []  # import from the modules named above
