/**
 * How a trace viewer asks for a notebook command. The viewer is a MIME renderer: it has no
 * application, notebook or kernel, so its buttons dispatch a bubbling `kode-nb-command` DOM event;
 * the notebook plugin (src/plugin.ts) listens on the document, runs the command for the cell that
 * holds the viewer, and hands back the outcome on the event. With no listener (no plugin, e.g. a
 * page that renders outputs only) the viewer says so instead of doing nothing.
 */

export const COMMAND_EVENT = 'kode-nb-command';

/** What a command reports: shown in the viewer (or as a notification from the palette). */
export interface CommandOutcome {
  ok: boolean;
  message: string;
  notes?: string[];
}

export interface CommandRequest {
  command: string;
  args: Record<string, unknown>;
  /** Set by the listener: the running command's outcome. */
  result: Promise<CommandOutcome> | null;
}

/** Ask for `command` from the element `from`; null when nothing listens. */
export function requestCommand(
  from: EventTarget,
  command: string,
  args: Record<string, unknown>
): Promise<CommandOutcome> | null {
  const detail: CommandRequest = { command, args, result: null };
  from.dispatchEvent(new CustomEvent(COMMAND_EVENT, { bubbles: true, cancelable: true, detail }));
  return detail.result;
}

/** Answer the requests made under `target`; returns the function that stops listening. */
export function listenForCommands(
  target: EventTarget,
  run: (request: CommandRequest, origin: EventTarget) => Promise<CommandOutcome>
): () => void {
  const handler = (event: Event) => {
    const detail = (event as CustomEvent<CommandRequest>).detail;
    if (!detail || typeof detail.command !== 'string' || !event.target || detail.result) {
      return;
    }
    event.preventDefault();
    detail.result = run(detail, event.target);
  };
  target.addEventListener(COMMAND_EVENT, handler);
  return () => target.removeEventListener(COMMAND_EVENT, handler);
}
