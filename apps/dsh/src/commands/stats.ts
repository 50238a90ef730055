import { reportSessionStats, type SessionStatsReport, totalTokens } from '@dsh/session-stats'
import { type CommandIo, onePositional, type ParsedCommand } from '../command.js'
import { withReadHost } from '../host-access.js'
import { printJson, table } from '../output.js'
import { PRICES_ENV, priceTableOf } from '../prices.js'
import { safe } from '../terminal.js'

/**
 * Usage, timing and cost of a session — with `--descendants`, summed over
 * every session below it. Read-only. Values come through the catalog's
 * ladder (live, checkpoint cache, one body read per cold session without a
 * checkpoint); a session whose value cannot be had is listed as a gap, never
 * skipped. Cost needs a price table (`--prices FILE` or `DSH_PRICES`).
 * `--json` prints the report `GET /api/sessions/:id/stats` answers.
 */
export async function run(command: ParsedCommand, io: CommandIo): Promise<number> {
  const id = onePositional(command, 'session id')
  const descendants = command.flag('descendants')
  const prices = await priceTableOf(command, io)
  const entries = await withReadHost(
    command,
    (host) => host.subagents.treeSnapshots(id, ['sessionStats', 'sessionTitle'], { descendants }),
    {},
    io,
  )
  const output = reportSessionStats(id, descendants ? 'descendants' : 'session', entries, prices)
  if (command.json) {
    printJson(output, io.out)
    return 0
  }
  writeText(output, io)
  return 0
}

const seconds = (ms: number): string => `${(ms / 1000).toFixed(1)}s`

function writeText(output: SessionStatsReport, io: CommandIo): void {
  const { totals, sessions, gaps } = output.rollup
  io.out.write(safe`session ${output.id}${output.title === null ? '' : `  ${output.title}`}\n`)
  const scope = output.scope === 'descendants' ? `${sessions} session(s) with descendants` : '1 session'
  io.out.write(safe`  ${scope}${gaps.length > 0 ? `, ${gaps.length} missing (totals are a lower bound)` : ''}\n`)
  io.out.write(safe`  turns ${totals.turns}, steps ${totals.steps}, tool calls ${totals.toolCalls} (${totals.toolErrors} failed)\n`)
  const first = totals.firstToken.meanMs === null ? '-' : `${Math.round(totals.firstToken.meanMs)} ms`
  io.out.write(
    safe`  time: turns ${seconds(totals.turnMs)}, model ${seconds(totals.modelMs)}, tools ${seconds(totals.toolMs)}; first token ${first}\n`,
  )
  const t = totals.tokens
  io.out.write(
    safe`  tokens: input ${t.input}, output ${t.output}, cache read ${t.cacheRead}, cache write ${t.cacheWrite}, reasoning ${t.reasoning} (total ${totalTokens(t)})\n`,
  )
  io.out.write(safe`  cost: ${costText(output)}\n`)
  if (totals.byModel.length > 0) {
    io.out.write('\n')
    io.out.write(
      `${table(
        ['provider', 'model', 'calls', 'tokens'],
        totals.byModel.map((m) => [m.provider ?? '-', m.model ?? '-', String(m.calls), String(totalTokens(m.tokens))]),
      )}\n`,
    )
  }
  if (totals.tools.length > 0) {
    io.out.write('\n')
    io.out.write(
      `${table(
        ['tool', 'calls', 'errors', 'time'],
        totals.tools.map((tool) => [tool.name, String(tool.calls), String(tool.errors), seconds(tool.ms)]),
      )}\n`,
    )
  }
  const skipped = Object.entries(totals.skipped).filter(([, n]) => n > 0)
  if (skipped.length > 0) io.out.write(safe`\n  skipped inputs: ${skipped.map(([reason, n]) => `${reason} ${n}`).join(', ')}\n`)
  for (const gap of gaps)
    io.out.write(safe`  missing ${gap.id}: ${gap.status}${gap.problem === undefined ? '' : ` (${gap.problem.message})`}\n`)
}

function costText(output: SessionStatsReport): string {
  const cost = output.cost
  if (cost === null) return `unknown: no price table (--prices FILE or ${PRICES_ENV})`
  if (cost.usd !== null) return `$${cost.usd.toFixed(6)}`
  return `unknown: ${cost.reason} (priced part $${cost.pricedUsd.toFixed(6)})`
}
