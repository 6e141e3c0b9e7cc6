/**
 * kode_nb MIME renderers for JupyterLab 4 and Notebook 7: application/vnd.kode-nb.{trace,run,
 * call,card,table,divergence,eval}+json (docs/RECORDS.md). The evaluation record's grades are
 * written back into its own output (IMimeModel.setData), so the notebook saves them. All are safe (they build DOM with textContent and
 * render markdown through the sanitizing rendermime path), so they work in untrusted notebooks
 * and with no kernel.
 */

import { renderMarkdown } from '@jupyterlab/rendermime';
import { IRenderMime } from '@jupyterlab/rendermime-interfaces';
import { Widget } from '@lumino/widgets';

import { errorBox } from './dom';
import { renderDivergence } from './divergence';
import { GradeWriter, renderEval } from './eval';
import { gradedText, withGrade } from './core/eval';
import { parseTrace, RecordError } from './core/trace';
import { MarkdownRenderer, renderCall, renderCard, renderRun, renderTable } from './records';
import { TraceViewer } from './viewer';

export const MIME = {
  trace: 'application/vnd.kode-nb.trace+json',
  run: 'application/vnd.kode-nb.run+json',
  call: 'application/vnd.kode-nb.call+json',
  card: 'application/vnd.kode-nb.card+json',
  table: 'application/vnd.kode-nb.table+json',
  divergence: 'application/vnd.kode-nb.divergence+json',
  eval: 'application/vnd.kode-nb.eval+json'
} as const;

type Kind = keyof typeof MIME;

export class KodeRecordWidget extends Widget implements IRenderMime.IRenderer {
  constructor(options: IRenderMime.IRendererOptions, kind: Kind) {
    super();
    this.options = options;
    this.kind = kind;
    this.addClass('kode-nb-record');
    this.addClass(`kode-nb-record-${kind}`);
  }

  async renderModel(model: IRenderMime.IMimeModel): Promise<void> {
    const data = model.data[this.options.mimeType];
    this.model = model;
    this.viewer?.dispose();
    this.viewer = null;
    this.evalViewers?.().forEach(v => v.dispose());
    this.evalViewers = null;
    try {
      await this.render(data);
    } catch (error) {
      const message =
        error instanceof RecordError
          ? error.message
          : `kode_nb ${this.kind} record could not be shown: ${String(error)}`;
      this.node.replaceChildren(errorBox(message));
    }
  }

  private async render(data: unknown): Promise<void> {
    switch (this.kind) {
      case 'trace': {
        this.viewer = new TraceViewer(parseTrace(data));
        this.node.replaceChildren(this.viewer.node);
        return;
      }
      case 'run': {
        const rendered = renderRun(data, this.markdown);
        this.viewer = rendered.viewer;
        this.node.replaceChildren(rendered.node);
        await rendered.done;
        return;
      }
      case 'call':
        this.node.replaceChildren(renderCall(data));
        return;
      case 'card':
        this.node.replaceChildren(renderCard(data));
        return;
      case 'table':
        this.node.replaceChildren(renderTable(data));
        return;
      case 'divergence':
        this.node.replaceChildren(renderDivergence(data));
        return;
      case 'eval': {
        const rendered = renderEval(data, this.grade);
        this.evalViewers = rendered.viewers;
        this.node.replaceChildren(rendered.node);
        return;
      }
    }
  }

  /** A grade given in the evaluation record: written into the record itself (its JSON and its
   * text/plain line), so the notebook saves it; the output is then drawn again. */
  private grade: GradeWriter = (caseId, passed, note) => {
    const model = this.model;
    if (!model) {
      return;
    }
    const mime = this.options.mimeType;
    const data = withGrade(model.data[mime], caseId, passed, note);
    const text = model.data['text/plain'];
    model.setData({
      data: {
        ...model.data,
        [mime]: data as never,
        ...(typeof text === 'string' ? { 'text/plain': gradedText(text, data) } : {})
      }
    });
  };

  private markdown: MarkdownRenderer = (host, source) =>
    renderMarkdown({
      host,
      source,
      trusted: false,
      sanitizer: this.options.sanitizer,
      resolver: this.options.resolver,
      linkHandler: this.options.linkHandler,
      latexTypesetter: this.options.latexTypesetter,
      markdownParser: this.options.markdownParser ?? null,
      shouldTypeset: this.isAttached,
      translator: this.options.translator
    });

  dispose(): void {
    this.viewer?.dispose();
    this.evalViewers?.().forEach(v => v.dispose());
    super.dispose();
  }

  private options: IRenderMime.IRendererOptions;
  private kind: Kind;
  private viewer: TraceViewer | null = null;
  private evalViewers: (() => TraceViewer[]) | null = null;
  private model: IRenderMime.IMimeModel | null = null;
}

function factory(kind: Kind): IRenderMime.IRendererFactory {
  return {
    safe: true,
    mimeTypes: [MIME[kind]],
    defaultRank: 40,
    createRenderer: options => new KodeRecordWidget(options, kind)
  };
}

const extensions: IRenderMime.IExtension[] = (Object.keys(MIME) as Kind[]).map(kind => ({
  id: `kode-nb:${kind}`,
  description: `Renders kode_nb ${kind} records (${MIME[kind]}).`,
  rendererFactory: factory(kind),
  rank: 40,
  dataType: 'json'
}));

export default extensions;
