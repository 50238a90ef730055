import { resolve } from 'node:path'
import { postgresLocation } from '@dsh/host'
import { type CommandIo, noPositionals, type ParsedCommand } from '../command.js'
import { type DemoRow, runDemo } from '../demo/run-demo.js'
import { terminalLogger } from '../host-open.js'
import { printJson, table } from '../output.js'
import { safe } from '../terminal.js'

export const DEFAULT_DEMO_ROOT = './.dsh-demo'

const RUNG_TEXT = { 1: 'rung 1 (live watermark)', 2: 'rung 2 (checkpoint cache)', 3: 'rung 3 (one body read + fold)' } as const

export async function run(command: ParsedCommand, io: CommandIo): Promise<number> {
  noPositionals(command, '; use --root DIR or --store URL')
  const json = command.json
  const log = json ? () => {} : (line: string) => io.err.write(safe`${line}\n`)
  const store = command.store
  const logger = terminalLogger(io)
  const result = await runDemo(
    store === undefined
      ? { root: resolve(command.root ?? DEFAULT_DEMO_ROOT), log, logger }
      : { store: { connectionString: store, location: postgresLocation({ connectionString: store }) }, log, logger },
  )
  const where = store === undefined ? `--root ${result.root}` : '--store <the same URL>'
  if (json) {
    printJson({ root: result.root, listings: result.listings }, io.out)
    return result.agree ? 0 : 1
  }
  const { live, coldCached, coldUncached } = result.listings
  io.out.write(safe`\n${store === undefined ? 'Session root' : 'Store'}: ${result.root}\nCatalog of ${result.parent} (descendants):\n`)
  io.out.write(render('1. live (children running in this process)', live))
  io.out.write(render('2. cold, after a restart, with the checkpoint cache', coldCached))
  io.out.write(render(`3. cold, after deleting the ${store === undefined ? 'cache file' : 'checkpoint rows'}`, coldUncached))
  io.out.write(
    result.agree
      ? '\nThe three listings agree (apart from activity and the rung that served each row).\n'
      : '\nThe three listings DISAGREE: this is a bug.\n',
  )
  io.out.write(
    safe`\nCrash repair: ${result.crashRepair.id} was killed mid-turn; load() ${result.crashRepair.repaired ? 'closed its open turn with' : 'found'} ${JSON.stringify(result.crashRepair.lastEvent)}\n`,
  )
  io.out.write(safe`Corruption: one byte flipped in ${result.corruptedLog}\n`)
  io.out.write(
    safe`\nTry next:\n  npm run dsh -- agents ${result.parent} --descendants ${where}\n  npm run dsh -- verify ${where}     (exits 1 and names the corrupt child)\n  npm run dsh -- serve ${where}\n`,
  )
  return result.agree ? 0 : 1
}

function render(title: string, rows: readonly DemoRow[]): string {
  const body = table(
    ['id', 'kind', 'mode', 'label / reason', 'activity', 'served by'],
    rows.map((r) => [
      `${'  '.repeat(Math.max(0, r.depth - 1))}${r.id}`,
      r.kind,
      r.kind === 'diagnostic' ? '-' : r.mode,
      r.kind === 'diagnostic' ? r.reason : (r.label ?? '(no label)'),
      r.kind === 'diagnostic' ? '-' : r.activity,
      RUNG_TEXT[r.rung],
    ]),
  )
  return `\n${title}\n${body}\n`
}
