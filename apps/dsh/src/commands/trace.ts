import { SessionId } from '@dsh/session'
import { type CommandIo, onePositional, type ParsedCommand } from '../command.js'
import { CliError } from '../errors.js'
import { terminalLogger, withReadHost } from '../host-access.js'
import { otlpEndpoint } from '../otlp.js'
import { printJson } from '../output.js'
import { safe } from '../terminal.js'

/**
 * `dsh trace <id> --otlp URL [--descendants] [--model M]`: exports a stored
 * session's turns, model steps and tool calls as OpenTelemetry spans over
 * OTLP/HTTP (read-only). With `--descendants` its whole subagent tree goes
 * too; a child whose log records a trace context (a run exported live)
 * joins its parent's trace, as it did live. `--model` names the model of
 * steps whose log does not (a top-level session's log records none; `dsh
 * run --otlp` gives the live export its `--model`). Prints the trace ids.
 * A span the collector did not take (an error answer, a collector down or
 * silent) makes it fail with `CLI_TRACE_UNDELIVERED` once every session is
 * replayed: how many were exported and dropped, and why, in the error.
 */
export async function run(command: ParsedCommand, io: CommandIo): Promise<number> {
  const id = onePositional(command, 'session id')
  const otlpFlag = command.string('otlp')
  if (otlpFlag === undefined)
    throw new CliError('CLI_USAGE', `'dsh trace' needs --otlp URL (the collector's traces endpoint, e.g. http://127.0.0.1:4318/v1/traces).`)
  const { parseOtlpEndpoint, replaySessionTraces } = await import('@dsh/session-telemetry-otel')
  const otlp = otlpEndpoint(otlpFlag, parseOtlpEndpoint)
  const logger = terminalLogger(io)
  const { ids, result } = await withReadHost(
    command,
    async (host) => {
      const ids = [id]
      if (command.flag('descendants')) for (const entry of await host.subagents.explainDescendants(id)) ids.push(entry.row.id)
      const logs = (async function* () {
        for (const each of ids) yield await host.persistence.inspect(SessionId(each))
      })()
      const model = command.string('model')
      return { ids, result: await replaySessionTraces(logs, { otlp, logger, ...(model === undefined ? {} : { model }) }) }
    },
    {},
    io,
  )
  const { stats, traceIds, dropReason } = result
  if (stats.dropped > 0) {
    const total = stats.exported + stats.dropped
    throw new CliError(
      'CLI_TRACE_UNDELIVERED',
      safe`${stats.dropped} of ${total} spans of ${ids.length} session(s) could not be delivered to ${otlp} (${dropReason ?? 'no reason given'}); ${stats.exported} were. The root is unchanged: check that the collector is up and takes OTLP/HTTP JSON, then run dsh trace again.`,
      { details: { sessions: ids, traces: traceIds, exported: stats.exported, dropped: stats.dropped, endpoint: otlp } },
    )
  }
  if (command.json) printJson({ sessions: ids, traces: traceIds, exported: stats.exported, dropped: stats.dropped }, io.out)
  else {
    for (const trace of traceIds) io.out.write(`trace ${trace}\n`)
    io.out.write(safe`${stats.exported} spans of ${ids.length} session(s) exported to ${otlp}\n`)
  }
  return 0
}
