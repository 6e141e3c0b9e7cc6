"""``%%agent``, ``%agent``, ``%%ask`` and ``%model``: agents and subagents from the notebook.

* ``%%agent NAME`` registers a subagent (:func:`kode_nb.agents.register_subagent`). The cell
  starts with YAML front matter between ``---`` lines; the rest is the system prompt (a
  template over the inputs: ``{objective}``; write ``{{`` and ``}}`` for literal braces)::

      %%agent investigator
      ---
      description: Investigates the codebase to answer one question.   # required
      inputs: $Investigation      # a pydantic model in a variable, or the inputConfig form:
      #   objective: {type: string, description: What to find out, required: true}
      tools: [list_files, read_file]                # the allowlist (names and selectors)
      model: $make_model          # a model name, or $var: a Model, or a zero-arg factory
      max_turns: 4                # also: time_limit, max_depth, label, tool_choice, reask
      ---
      You investigate code. Objective: {objective}

  Without ``inputs`` the agent takes one string input, ``task``. Without ``model`` it uses
  the model of the agent that calls it (and ``%model``'s default when run directly).
* ``%agent NAME key=value ...`` (or ``{JSON}``) runs a registered agent on those inputs.
* ``%%ask [--agent NAME] [--model M] [--tools T,...] [--max-turns N] [--out VAR]`` runs an
  agent on the cell's text: a general agent with the listed tools (default: every tool the
  policy allows), or agent NAME with the text as its one text input; ``--out h`` also puts
  the handle in ``h``.
* ``--step`` (``%%ask --step``, ``%agent NAME --step ...``) steps through the run: it pauses
  before each model request and each tool call, with Next / Edit / Give result / Run to end /
  Stop buttons in the live view (:mod:`kode_nb.ui.step_view`) and ``h.step`` (a
  :class:`~kode_nb.debug.Stepper`) to decide from a cell. Subagent runs pause too;
  ``--step top`` (``--step=top`` for ``%agent``) lets them run through.
* ``%model [NAME | $var]`` shows or sets the session's default model.

A model given as ``$var`` (or a bare variable name) is a notebook variable holding a
:class:`~kode_nb.models.Model` — shared by every run, so a ``ScriptedModel`` plays its script
once — or a zero-argument function returning one, called for each run (a fresh script each
time: what a subagent called twice needs). ``scripted`` alone has no script: put
``ScriptedModel([...])`` in a variable.

Runs start as a task on the kernel's loop and the cell returns at once with an
:class:`~kode_nb.ui.agent_handle.AgentHandle` and the live view
(:mod:`kode_nb.ui.agent_view`); tool calls go through the session's executor (policy,
approval prompts inside the view, timeouts). Bad input is a ``UsageError`` saying what to fix.
"""

from __future__ import annotations

import asyncio
import contextlib
import difflib
import json
import re
import secrets
import weakref
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from IPython.core.error import UsageError

from kode_nb.magics.agent_spec import (
    FRONT_MATTER_KEYS,
    choice_options,
    inputs_option,
    model_object,
    number_option,
    parse_front_matter,
    resolve_model_spec,
    tools_option,
)

if TYPE_CHECKING:
    from kode_nb.agents import Agent, AgentDefinition
    from kode_nb.magics.session import KodeSession
    from kode_nb.tools._model import Tool
    from kode_nb.ui.agent_handle import AgentHandle

__all__ = [
    "FRONT_MATTER_KEYS",
    "agent_cell",
    "agent_line",
    "ask_cell",
    "model_line",
    "parse_front_matter",
    "resolve_model_spec",
    "start_run",
]


@dataclass
class AgentSettings:
    """Per-session agent settings (``%model``)."""

    model: Any = None
    """The default model spec: a name, a Model, or a factory; ``None``: none set."""
    label: str = ""
    """How the default was given (``openai:gpt-4.1-mini``, ``$make_model``)."""


_SETTINGS: weakref.WeakKeyDictionary[Any, AgentSettings] = weakref.WeakKeyDictionary()


def settings_of(session: KodeSession) -> AgentSettings:
    """The agent settings of ``session`` (created on first use)."""
    found = _SETTINGS.get(session)
    if found is None:
        found = _SETTINGS[session] = AgentSettings()
    return found


# --------------------------------------------------------------------------- %%agent


def agent_cell(session: KodeSession, shell: Any, line: str, cell: str) -> Tool:
    """``%%agent NAME``: build the definition, register it (replacing the old one), show it."""
    from kode_nb.agents import AgentDefinition, register_subagent
    from kode_nb.errors import KodeUsageError

    parts = line.split()
    if len(parts) != 1:
        raise UsageError(
            "%%agent takes one name: %%agent NAME, then the front matter and the system prompt"
            + (f" (got {line.strip()!r})" if line.strip() else "")
        )
    name = parts[0]
    where = f"%%agent {name}"
    meta, body = parse_front_matter(cell, where)
    ns = shell.user_ns
    description = meta.get("description")
    if not isinstance(description, str) or not description.strip():
        raise UsageError(
            f"{where}: the front matter needs 'description:' (what it does, when to use it)"
        )
    options: dict[str, Any] = {
        "name": name,
        "description": description,
        "system_prompt": body,
        "tools": tools_option(meta.get("tools"), where),
        **inputs_option(meta.get("inputs"), ns, where),
        **number_option(meta, "max_turns", where, int),
        **number_option(meta, "max_depth", where, int),
        **number_option(meta, "time_limit", where, float),
        **choice_options(meta, where),
    }
    label = ""
    if meta.get("model") is not None:
        options["model"], label = resolve_model_spec(meta["model"], ns, where)
    if "label" in meta:
        options["label"] = str(meta["label"])
    existing = session.registry.get(name)
    if existing is not None and "subagent" not in (existing.metadata or {}):
        raise UsageError(
            f"{where}: a tool named {name!r} exists and is not an agent; pick another name"
        )
    try:
        defn = AgentDefinition(**options)
        tool = register_subagent(
            defn, registry=session.registry, executor=session.executor, replace=True
        )
    except KodeUsageError as exc:
        raise UsageError(f"{where}: {exc}") from None
    _show_definition(defn, label)
    return tool


def _input_names(defn: AgentDefinition) -> list[str]:
    return list(defn.input_fields())


def _show_definition(defn: AgentDefinition, model_label: str) -> None:
    from IPython.display import display

    from kode_nb.ui.html import BOX, esc, kind_badge

    inputs = ", ".join(_input_names(defn)) or "none"
    tools = ", ".join(defn.tools) or "none"
    model = model_label or "the calling agent's"
    text = (
        f"Agent {defn.name!r} registered (a think tool): inputs {inputs}; tools {tools}; "
        f"model {model}; max_turns {defn.max_turns}"
    )
    rows = "".join(
        f"<tr><td><b>{k}</b></td><td><code>{esc(v)}</code></td></tr>"
        for k, v in (
            ("inputs", inputs),
            ("tools", tools),
            ("model", model),
            ("max_turns", defn.max_turns),
        )
    )
    html = (
        f'<div style="{BOX}">Agent <b>{esc(defn.name)}</b> {kind_badge("think")} registered'
        f"<div>{esc(defn.description)}</div><table>{rows}</table></div>"
    )
    display({"text/html": html, "text/plain": text}, raw=True)


# --------------------------------------------------------------------------- runs


def _definition(session: KodeSession, name: str, where: str) -> tuple[Tool, AgentDefinition]:
    tool = session.registry.get(name)
    defn = (tool.metadata or {}).get("subagent") if tool is not None else None
    if tool is None or defn is None:
        agents = [t.name for t in session.registry.list() if "subagent" in (t.metadata or {})]
        close = difflib.get_close_matches(name, agents, n=1)
        hint = f" Did you mean {close[0]!r}?" if close else ""
        what = (
            "is a tool, not an agent (call it with %tool)" if tool is not None else "is not defined"
        )
        raise UsageError(
            f"{where}: agent {name!r} {what}.{hint} Agents: {', '.join(agents) or 'none (define one with %%agent NAME)'}"
        )
    return tool, defn


def _direct_agent(
    session: KodeSession, defn: AgentDefinition, arguments: Any, where: str
) -> tuple[Agent, str, Any]:
    """A top-level Agent running ``defn`` on validated ``arguments``: (agent, prompt, executor)."""
    from kode_nb.agents import Agent, NarrowedPolicy
    from kode_nb.agents._inputs import input_validator
    from kode_nb.agents._toolset import derive_executor
    from kode_nb.errors import KodeUsageError, ToolValidationError

    validator = input_validator(defn.input_model, defn.input_config, where)
    try:
        validated = validator.validate(arguments, tool=defn.name)
    except ToolValidationError as exc:
        issues = "\n".join(f"  - {i.render()}" for i in exc.issues)
        raise UsageError(f"{where}: invalid inputs:\n{issues}") from None
    if defn.input_model is not None:
        instance = validated["inputs"]
        values, inputs = dict(instance), instance.model_dump(mode="json")
    else:
        inputs = dict(validated)
        values = {n: validated.get(n) for n in defn.input_fields()}
    system = defn.system_prompt.format(**{k: "" if v is None else v for k, v in values.items()})
    spec = defn.model if defn.model is not None else settings_of(session).model
    if spec is None:
        raise UsageError(
            f"{where}: agent {defn.name!r} has no model of its own and no default is set: "
            "add 'model:' to its front matter or run %model NAME|$var"
        )
    model = model_object(spec, where)
    executor = derive_executor(
        session.executor, policy=NarrowedPolicy(session.policy, defn.tools, owner=defn.name)
    )
    try:
        agent = Agent(
            defn.name,
            model=model,
            system_prompt=system,
            tools=defn.tools,
            max_turns=defn.max_turns,
            time_limit=defn.time_limit,
            output_model=defn.output_model,
            executor=executor,
            tool_choice=defn.tool_choice,
            reask=defn.reask,
        )
    except KodeUsageError as exc:
        executor.close()
        raise UsageError(f"{where}: {exc}") from None
    prompt = "Your inputs:\n" + json.dumps(inputs, indent=2, ensure_ascii=False, default=str)
    return agent, prompt, executor


def agent_line(session: KodeSession, shell: Any, line: str) -> AgentHandle:
    """``%agent NAME key=value ...``: run a registered agent directly."""
    from kode_nb.magics.call_line import parse_call_arguments

    parts = line.strip().split(None, 1)
    if not parts:
        raise UsageError(
            "%agent needs an agent name: %agent NAME key=value ... To define one use the cell "
            "magic %%agent NAME (two percent signs)."
        )
    name, rest = parts[0], parts[1] if len(parts) > 1 else ""
    where = f"%agent {name}"
    rest, step = _step_flag(rest, where)
    tool, defn = _definition(session, name, where)
    try:
        arguments = parse_call_arguments(rest, tool.parameters, shell.user_ns)
    except UsageError as exc:
        raise UsageError(str(exc).replace("%tool:", f"{where}:", 1)) from None
    agent, prompt, executor = _direct_agent(session, defn, arguments, where)
    return start_run(session, agent, prompt, close=executor, step=step)


_STEP_FLAG = re.compile(r"(?:^|\s)--step(?:=(\S*))?(?=\s|$)")


def _step_flag(rest: str, where: str) -> tuple[str, str | None]:
    """``--step`` / ``--step=top`` taken out of ``%agent``'s arguments: (the rest, the mode)."""
    found = list(_STEP_FLAG.finditer(rest))
    if not found:
        return rest, None
    if len(found) > 1:
        raise UsageError(f"{where}: give --step once")
    mode = found[0].group(1) or "all"
    if mode not in ("all", "top"):
        raise UsageError(f"{where}: --step takes all or top (--step=top), got {mode!r}")
    return (rest[: found[0].start()] + " " + rest[found[0].end() :]).strip(), mode


def _text_input(defn: AgentDefinition, where: str) -> str:
    """The one input ``%%ask --agent`` fills with the cell's text."""
    props = (defn.input_model.model_json_schema() if defn.input_model is not None else None) or {}
    if defn.input_config is not None:
        from kode_nb.tools._raw_schema import input_config_schema

        props = input_config_schema(defn.input_config)
    schema_props = props.get("properties") or {}
    required = list(props.get("required") or [])
    texts = [
        n for n, p in schema_props.items() if isinstance(p, Mapping) and p.get("type") == "string"
    ]
    candidates = [n for n in texts if n in required] or texts
    if len(candidates) == 1 and set(required) <= {candidates[0]}:
        return str(candidates[0])
    raise UsageError(
        f"{where}: agent {defn.name!r} takes inputs {', '.join(schema_props) or 'none'}, not one "
        f"text: run it with %agent {defn.name} key=value ..."
    )


def ask_cell(session: KodeSession, shell: Any, args: Any, cell: str) -> AgentHandle:
    """``%%ask [--agent NAME] [--model M] [--tools ...] [--max-turns N] [--out VAR]``: run an
    agent on the cell's text (see the module docstring); ``--out`` also stores the handle."""
    if args.out is not None and not str(args.out).isidentifier():
        raise UsageError(f"%%ask: --out needs a variable name, got {args.out!r}")
    handle = _ask(session, shell, args, cell)
    if args.out:
        shell.user_ns[args.out] = handle
    return handle


def _ask(session: KodeSession, shell: Any, args: Any, cell: str) -> AgentHandle:
    from kode_nb.agents import Agent
    from kode_nb.errors import KodeUsageError

    where = "%%ask"
    prompt = cell.strip()
    if not prompt:
        raise UsageError("%%ask: the cell is empty; write the request below the %%ask line")
    ns = shell.user_ns
    if args.max_turns is not None and args.max_turns < 1:
        raise UsageError(f"%%ask: --max-turns must be >= 1, got {args.max_turns}")
    if args.agent:
        if args.tools:
            raise UsageError(
                "%%ask: --tools does not go with --agent (the agent has its allowlist)"
            )
        where = f"%%ask --agent {args.agent}"
        _tool, defn = _definition(session, args.agent, where)
        if args.model:
            import dataclasses

            defn = dataclasses.replace(defn, model=resolve_model_spec(args.model, ns, where)[0])
        if args.max_turns:
            import dataclasses

            defn = dataclasses.replace(defn, max_turns=args.max_turns)
        if args.tool_choice or args.reask:
            import dataclasses

            defn = dataclasses.replace(
                defn,
                tool_choice=args.tool_choice or defn.tool_choice,
                reask=args.reask or defn.reask,
            )
        agent, text, executor = _direct_agent(
            session, defn, {_text_input(defn, where): prompt}, where
        )
        return start_run(session, agent, text, close=executor, step=getattr(args, "step", None))
    if args.model:
        spec = resolve_model_spec(args.model, ns, where)[0]
    else:
        spec = settings_of(session).model
        if spec is None:
            raise UsageError(
                "%%ask: no model: give --model NAME|$var, or set a default with %model"
            )
    tools = tools_option(args.tools, where) if args.tools else ("*",)
    try:
        agent = Agent(
            "main",
            model=model_object(spec, where),
            tools=tools,
            max_turns=args.max_turns or 10,
            executor=session.executor,
            tool_choice=args.tool_choice,
            reask=bool(args.reask),
        )
    except KodeUsageError as exc:
        raise UsageError(f"{where}: {exc}") from None
    return start_run(session, agent, prompt, step=getattr(args, "step", None))


def model_line(session: KodeSession, shell: Any, line: str) -> None:
    """``%model``: show the default model; ``%model NAME|$var``: set it; ``%model none``: clear."""
    settings = settings_of(session)
    text = line.strip()
    if not text:
        shown = _described(settings.model, settings.label) if settings.label else ""
        print(f"Default model: {shown or 'none (set one with %model NAME or %model $var)'}")
        return
    if text.lower() == "none":
        settings.model, settings.label = None, ""
        print("Default model: none")
        return
    settings.model, settings.label = resolve_model_spec(text, shell.user_ns, "%model")
    print(f"Default model: {_described(settings.model, settings.label)}")


def _described(model: Any, label: str) -> str:
    """``label``, and for a ``$variable`` what it holds: the model's name, or that a function
    makes one for each run."""
    if not label.startswith("$"):
        return label
    if isinstance(model, str):  # a variable holding a model name
        return f"{label} ({model})"
    name = getattr(model, "name", None)
    if isinstance(name, str) and name and hasattr(model, "stream"):
        return f"{label} ({name})"
    return f"{label} (a function called for a fresh model at each run)"


# --------------------------------------------------------------------------- starting a run


def start_run(
    session: KodeSession, agent: Agent, prompt: str, *, close: Any = None, step: str | None = None
) -> AgentHandle:
    """Start ``agent`` on ``prompt`` as a task on the kernel's loop; the handle comes back at
    once (without a running loop, as in terminal IPython, the run completes first).
    ``close``: an executor to close when the run ends. ``step``: ``"all"`` or ``"top"`` to step
    through the run (:mod:`kode_nb.stepping._step`; the pauses show buttons in the live view,
    and ``h.step`` drives them from a cell)."""
    from kode_nb.debug import Stepper
    from kode_nb.ui._run_views import make_run_view
    from kode_nb.ui.agent_handle import AgentHandle

    run_id = f"run_{secrets.token_hex(6)}"
    try:
        loop: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
    except RuntimeError:
        loop = None
    style = session.style if loop is not None else "text"
    view = make_run_view(session, agent, run_id, style, loop or session._loop())
    stepper = None
    if step is not None:
        if loop is None:
            raise UsageError("--step needs a running event loop (a Jupyter kernel)")
        stepper = Stepper(
            nested="top" if step == "top" else "all", on_pause=getattr(view, "on_step", None)
        )
    handle = AgentHandle(agent=agent, run_id=run_id, view=view, shell=session.shell, step=stepper)
    session.runs.add(handle)
    view.show()
    session.remember(view)
    subscription = session.bus.subscribe(view.on_update, types=("update",))

    async def run() -> Any:
        result = None
        error: BaseException | None = None
        try:
            result = await agent.run(prompt, run_id=run_id, on_event=view.on_event, step=stepper)
            return result
        except asyncio.CancelledError:
            result = agent.last_result
            raise
        except Exception as exc:  # the run could not even start (a missing API key...)
            error = exc
            raise
        finally:
            subscription.close()
            if close is not None:
                close.close()
            handle._set_result(result, error if result is None else None)
            message = (
                None
                if result is not None
                else f"{type(error).__name__}: {error}"
                if error
                else "cancelled"
            )
            view.finish(result, message)
            session.shell.user_ns["_kode_run"] = result

    if loop is not None:
        task = loop.create_task(run(), name=f"kode_nb agent {agent.name} {run_id}")
        task.add_done_callback(_consume)
        handle.task = task
    else:
        with contextlib.suppress(Exception):  # shown in the view, kept in handle.exception
            session._loop().run_until_complete(run())
    return handle


def _consume(task: asyncio.Task[Any]) -> None:
    if not task.cancelled():
        task.exception()  # retrieved: kept in handle.exception and shown in the view
