/**
 * cudaassert's patch renderer for JupyterLab 4 and Notebook 7 (issue #26, the frontend side).
 *
 * `%cudaassert fix` displays a proposal under PATCH_MIME; this renders its diff with two buttons. A click
 * checks the notebook (writable, the cell still holds the old code), asks the kernel to apply the patch to
 * its history by running the magic itself, silently (`%cudaassert fix apply --choose N [--restart]
 * --in-notebook`: one code path for the magic and the buttons), and, when the kernel answers with the
 * applied request, edits the cell through its shared model: an ordinary edit the notebook's undo reverts.
 * A file patch (the script's module, Ultralytics' data YAML: `path` set) changes no cell: the kernel writes the
 * file on disk, only over the text the patch was derived from, and the status names the file.
 * Nothing in an output runs code: only a click does, and the kernel decides what is applied.
 */
import { JupyterFrontEnd, JupyterFrontEndPlugin } from '@jupyterlab/application';
import { INotebookTracker, NotebookPanel } from '@jupyterlab/notebook';
import { IRenderMimeRegistry } from '@jupyterlab/rendermime';
import { IRenderMime } from '@jupyterlab/rendermime-interfaces';
import { Widget } from '@lumino/widgets';

export const PATCH_MIME = 'application/vnd.cudaassert.patch+json';

/** `Patch.request()` in cudaassert_ipy/fix/model.py. */
interface IApplied {
  kind: 'applied';
  version: number;
  cell_id: string | null;
  execution_count: number | null;
  old_source: string;
  new_source: string;
  diff: string;
  path: string | null;
}

/** `ProposedFix.proposal()` in cudaassert_ipy/fix/model.py. */
interface IProposal {
  kind: 'proposal';
  version: number;
  safety: string;
  why: string;
  culprit: string;
  alternatives: {
    choose: number;
    default: boolean;
    title: string;
    evidence: string;
    no_patch: string;
    patch: IApplied | null;
  }[];
}

const cellName = (p: IApplied): string =>
  p.execution_count !== null ? `cell [${p.execution_count}]` : 'the cell';

const MSG = {
  readOnly: 'This notebook is read-only: nothing was applied (copy the patched cell into a writable notebook).',
  noNotebook: 'This output is not in an open notebook: run `%cudaassert fix apply` and copy the patched cell.',
  fileApplied: 'Patched {path} on disk (no cell of this notebook changes): run the training again to check.',
  fileRestarting:
    'Patched {path} on disk (no cell of this notebook changes); the kernel restarts: the next training run reads it.',
  filePatched: '{path} is patched on disk: no cell of this notebook changes.',
  notFound: '{cell} is not in this notebook: run `%cudaassert fix apply` and copy the patched cell.',
  edited: '{cell} was edited since the patch was proposed: nothing was applied; run `%cudaassert fix` again.',
  cellReadOnly: '{cell} is read-only (its "editable" metadata is false): nothing was applied.',
  noKernel: 'No kernel is connected to this notebook: nothing was applied.',
  refused: 'The kernel did not apply the patch: {why}',
  differs: 'The kernel applied a different patch than shown here: run `%cudaassert fix` again.',
  applied: 'Applied: {cell} edited (Undo reverts it); the kernel replays the patched code after a restart.',
  restarting: 'Applied: {cell} edited (Undo reverts it); the kernel restarts: run a cell to replay and verify.',
  edit: 'Edited {cell} (Undo reverts it).'
};

/** One line of the status: the template filled, starting with a capital ("Cell [2] was edited ..."). */
function fill(template: string, values: Record<string, string>): string {
  const line = template.replace(/\{(\w+)\}/g, (_, k: string) => values[k] ?? '');
  return line.charAt(0).toUpperCase() + line.slice(1);
}

/** Where a check refuses: the one line to show, or null when the edit may go ahead. */
type Refusal = string | null;

class Target {
  constructor(
    readonly panel: NotebookPanel,
    readonly cell: any // ICellModel: the notebook's own model of the cell; null for a file patch
  ) {}

  static find(tracker: INotebookTracker, node: HTMLElement, p: IApplied): Target | string {
    const panel = tracker.find(w => w.node.contains(node));
    if (!panel || !panel.content.model) {
      return MSG.noNotebook;
    }
    if (p.path) {
      return new Target(panel, null); // a file patch: the kernel writes the file, no cell is edited
    }
    const model: any = panel.context.model;
    const writable = panel.context.contentsModel?.writable;
    if (model.readOnly === true || writable === false || panel.content.model.readOnly) {
      return MSG.readOnly;
    }
    const cells = panel.content.model.cells;
    for (let i = 0; i < cells.length; i++) {
      const cell = cells.get(i);
      if (p.cell_id && cell.id === p.cell_id) {
        return new Target(panel, cell);
      }
    }
    return fill(MSG.notFound, { cell: cellName(p) });
  }

  check(p: IApplied): Refusal {
    if (p.path) {
      return null; // the kernel refuses a file changed since the patch was proposed
    }
    if (this.cell.getMetadata?.('editable') === false) {
      return fill(MSG.cellReadOnly, { cell: cellName(p) });
    }
    if (this.cell.sharedModel.getSource() !== p.old_source) {
      return fill(MSG.edited, { cell: cellName(p) });
    }
    return null;
  }

  /** Only the changed span is replaced, in one transaction of the cell's shared model (one undo step). */
  edit(p: IApplied): void {
    if (p.path) {
      return;
    }
    const old = p.old_source;
    const neu = p.new_source;
    let start = 0;
    while (start < old.length && start < neu.length && old[start] === neu[start]) {
      start++;
    }
    let end = 0;
    while (
      end < old.length - start &&
      end < neu.length - start &&
      old[old.length - 1 - end] === neu[neu.length - 1 - end]
    ) {
      end++;
    }
    this.cell.sharedModel.updateSource(start, old.length - end, neu.slice(start, neu.length - end));
  }
}

function firstLine(text: string): string {
  const lines = text
    .split('\n')
    .map(l => l.trim())
    .filter(l => l);
  return lines.length ? lines[lines.length - 1] : '';
}

export class PatchRenderer extends Widget implements IRenderMime.IRenderer {
  constructor(private tracker: INotebookTracker) {
    super();
    this.addClass('cudaassert-fix');
  }

  async renderModel(model: IRenderMime.IMimeModel): Promise<void> {
    const data = model.data[PATCH_MIME] as unknown as IProposal | IApplied;
    this.node.textContent = '';
    if (data.kind === 'proposal') {
      this.line('cudaassert-fix-why', `Proposed fix for ${data.culprit} (${data.safety}): ${data.why}.`);
      for (const alt of data.alternatives) {
        const box = this.box();
        this.line('cudaassert-fix-title', `[${alt.choose}]${alt.default ? ' (default)' : ''} ${alt.title}`, box);
        if (alt.evidence) {
          this.line('cudaassert-fix-evidence', `evidence: ${alt.evidence}`, box);
        }
        if (alt.patch) {
          this.diff(alt.patch.diff, box);
          const status = this.line('cudaassert-fix-status', '', box);
          const patch = alt.patch;
          const buttons = this.buttons(box, [
            ['cudaassert-fix-apply', 'Apply', false],
            ['cudaassert-fix-apply-restart', 'Apply, Restart & replay', true]
          ]);
          buttons.forEach(([button, restart]) => {
            button.onclick = () => void this.apply(patch, alt.choose, restart, buttons, status);
          });
        } else {
          this.line('cudaassert-fix-evidence', `no patch: ${alt.no_patch}`, box);
        }
      }
    } else {
      // `%cudaassert fix apply` typed in a cell: the kernel applied it; the notebook's cell is one click away
      const box = this.box();
      this.diff(data.diff, box);
      if (data.path) {
        this.line('cudaassert-fix-status', fill(MSG.filePatched, { path: data.path }), box);
        return;
      }
      const status = this.line('cudaassert-fix-status', '', box);
      const buttons = this.buttons(box, [['cudaassert-fix-edit', `Edit ${cellName(data)} in the notebook`, false]]);
      buttons[0][0].onclick = () => {
        const target = Target.find(this.tracker, this.node, data);
        const refusal = typeof target === 'string' ? target : target.check(data);
        if (refusal !== null || typeof target === 'string') {
          status.textContent = refusal ?? '';
          return;
        }
        target.edit(data);
        buttons[0][0].disabled = true;
        status.textContent = fill(MSG.edit, { cell: cellName(data) });
      };
    }
  }

  private async apply(
    shown: IApplied,
    choose: number,
    restart: boolean,
    buttons: [HTMLButtonElement, boolean][],
    status: HTMLElement
  ): Promise<void> {
    const target = Target.find(this.tracker, this.node, shown);
    const refusal = typeof target === 'string' ? target : target.check(shown);
    if (refusal !== null || typeof target === 'string') {
      status.textContent = refusal ?? '';
      return;
    }
    const kernel = target.panel.sessionContext.session?.kernel;
    if (!kernel) {
      status.textContent = MSG.noKernel;
      return;
    }
    buttons.forEach(([b]) => (b.disabled = true));
    status.textContent = 'Applying…';
    let applied = false;
    let said = '';
    const code = `%cudaassert fix apply --choose ${choose}${restart ? ' --restart' : ''} --in-notebook`;
    // allow_stdin as a cell's own request: the kernel takes a client that refuses input() for a headless run
    // (nbclient), where nothing could restart it; the magic never reads input
    const future = kernel.requestExecute({ code, silent: true, store_history: false, allow_stdin: true });
    future.onIOPub = msg => {
      const content: any = msg.content;
      const type = msg.header.msg_type;
      if ((type === 'display_data' || type === 'execute_result') && content.data?.[PATCH_MIME]) {
        const request = content.data[PATCH_MIME] as IApplied;
        if (request.kind !== 'applied' || applied) {
          return;
        }
        applied = true;
        // what the kernel applied is what its replay runs: edit that, still only over the old code
        const same = request.old_source === shown.old_source && request.new_source === shown.new_source;
        const now = same ? target.check(request) : MSG.differs;
        if (now !== null) {
          status.textContent = now;
          return;
        }
        target.edit(request);
        status.textContent = request.path
          ? fill(restart ? MSG.fileRestarting : MSG.fileApplied, { path: request.path })
          : fill(restart ? MSG.restarting : MSG.applied, { cell: cellName(request) });
      } else if (type === 'stream' && content.name === 'stderr') {
        said += content.text;
      } else if (type === 'error') {
        said += `${content.ename}: ${content.evalue}\n`;
      }
    };
    try {
      const reply: any = await future.done;
      if (!applied) {
        const why = firstLine(said) || reply?.content?.evalue || 'no answer';
        status.textContent = fill(MSG.refused, { why });
        buttons.forEach(([b]) => (b.disabled = false));
      }
    } catch {
      // the kernel restarted before it answered: expected after Restart & replay once it applied
      if (!applied) {
        status.textContent = fill(MSG.refused, { why: firstLine(said) || 'the kernel went away' });
        buttons.forEach(([b]) => (b.disabled = false));
      }
    }
  }

  private box(): HTMLElement {
    const box = document.createElement('div');
    box.className = 'cudaassert-fix-alternative';
    this.node.appendChild(box);
    return box;
  }

  private line(cls: string, text: string, parent: HTMLElement = this.node): HTMLElement {
    const div = document.createElement('div');
    div.className = cls;
    div.textContent = text;
    parent.appendChild(div);
    return div;
  }

  private diff(text: string, parent: HTMLElement): void {
    const pre = document.createElement('pre');
    pre.className = 'cudaassert-fix-diff';
    for (const l of text.replace(/\n$/, '').split('\n')) {
      const span = document.createElement('span');
      span.className = l.startsWith('+') && !l.startsWith('+++') ? 'cudaassert-fix-add'
        : l.startsWith('-') && !l.startsWith('---') ? 'cudaassert-fix-del' : '';
      span.textContent = l + '\n';
      pre.appendChild(span);
    }
    parent.appendChild(pre);
  }

  private buttons(parent: HTMLElement, specs: [string, string, boolean][]): [HTMLButtonElement, boolean][] {
    const row = document.createElement('div');
    row.className = 'cudaassert-fix-buttons';
    parent.appendChild(row);
    return specs.map(([cls, label, restart]) => {
      const b = document.createElement('button');
      b.className = `jp-Button jp-mod-styled ${restart ? 'jp-mod-warn' : 'jp-mod-accept'} ${cls}`;
      b.textContent = label;
      row.appendChild(b);
      return [b, restart];
    });
  }
}

const plugin: JupyterFrontEndPlugin<void> = {
  id: 'cudaassert-ipy:patch',
  description: "Renders cudaassert's patch with Apply buttons that edit the notebook's cell (undoable).",
  autoStart: true,
  requires: [IRenderMimeRegistry, INotebookTracker],
  activate: (_app: JupyterFrontEnd, rendermime: IRenderMimeRegistry, tracker: INotebookTracker) => {
    // not `safe`: an untrusted notebook shows the patch as text, without buttons
    rendermime.addFactory(
      { safe: false, mimeTypes: [PATCH_MIME], createRenderer: () => new PatchRenderer(tracker) },
      0
    );
  }
};

export default plugin;
