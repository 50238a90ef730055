import type { Script, ScriptStep } from '@dsh/subagent'

/**
 * The demo's scripted "agents": no model is called. Each child's script is
 * chosen by its label; `hold` keeps a child's turn open until the demo lets
 * it finish, so the live listing sees it running.
 */
export function demoScript(hold: PromiseLike<unknown>): Script {
  return (run) => {
    const label = run.identity?.label ?? 'anonymous'
    const held: ScriptStep = { kind: 'until', promise: hold }
    switch (label) {
      case 'log-summarizer':
        return [
          { kind: 'tool', name: 'read_file', arguments: { path: 'build.log' }, result: '3 warnings, 0 errors' },
          { kind: 'chunk', text: 'The build log has ' },
          { kind: 'chunk', text: 'three warnings and no errors.' },
          { kind: 'message', text: 'The build log has three warnings and no errors.', usage: { input: 812, output: 14 } },
        ]
      case 'migration-runner':
        // Holds its turn open forever: the demo kills its process mid-turn.
        return [
          { kind: 'chunk', text: 'Applying migration 0042 ' },
          { kind: 'tool', name: 'run_sql', arguments: { file: '0042_add_index.sql' }, result: 'ok' },
          { kind: 'until', promise: new Promise(() => {}) },
        ]
      case 'researcher':
        return [
          { kind: 'tool', name: 'search_docs', arguments: { q: 'zstd skippable frames' }, result: ['RFC 8878 §3.1.2'] },
          { kind: 'message', text: 'Skippable frames carry metadata that decoders ignore.' },
          held,
        ]
      case 'reviewer':
        return [{ kind: 'message', text: 'Reviewed the plan inherited from the parent: looks sound.' }, held]
      case 'fact-checker':
        return [{ kind: 'message', text: 'Checked 4 claims; all hold.' }, held]
      default:
        return [{ kind: 'chunk', text: 'Planning the release ' }, { kind: 'message', text: `Plan ready (${label}).` }, held]
    }
  }
}
