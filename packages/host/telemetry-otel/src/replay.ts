import { consoleLogger } from '@dsh/context'
import type { StoredSessionEvent } from '@dsh/session'
import { SessionTelemetryError } from './errors.js'
import { createPipeline, otlpExporter } from './exporter.js'
import { checkOptions, type SessionTelemetryOptions } from './options.js'
import type { TelemetryStats } from './processor.js'
import { SessionTrace } from './session-trace.js'

/** A stored session as persistence returns it (`SessionPersistence.load`). */
export interface StoredSessionLog {
  readonly header: { readonly id: string; readonly parentSession?: string; readonly delegationDepth: number }
  readonly inheritedEventCount: number
  readonly events: readonly StoredSessionEvent[]
}

export interface ReplayResult {
  /** The traces the sessions' turns belong to, in order of first appearance. */
  readonly traceIds: readonly string[]
  readonly stats: TelemetryStats
  /** Why spans were first lost (the queue was full, or an export failed and how); absent when `stats.dropped` is 0. */
  readonly dropReason?: string
}

/**
 * Exports the spans of stored sessions, as the live plugin would have: the
 * same span model and the same ids, so a child whose log records a trace
 * context joins its parent's trace, and a replay of a session exported live
 * repeats its spans rather than inventing new ones. A turn the log leaves
 * open ends as unfinished at its last event. Resolves once every export has
 * ended; spans the collector did not take are counted in `stats.dropped`
 * (why the first were lost in `dropReason`), and the logger gets one warning
 * when the first are lost.
 * Needs `otlp` or `exporter` (`SESSION_TELEMETRY_INVALID_OPTIONS` otherwise).
 */
export async function replaySessionTraces(
  logs: Iterable<StoredSessionLog> | AsyncIterable<StoredSessionLog>,
  options: SessionTelemetryOptions,
): Promise<ReplayResult> {
  const { otlp } = checkOptions(options)
  const exporter = options.exporter ?? (otlp === undefined ? undefined : otlpExporter(otlp))
  if (exporter === undefined) {
    throw new SessionTelemetryError(
      'SESSION_TELEMETRY_INVALID_OPTIONS',
      'A replay needs somewhere to send spans: give `otlp` or `exporter`.',
    )
  }
  const pipeline = createPipeline(options, otlp, exporter, () => options.logger ?? consoleLogger, 'replay')
  const traceIds = new Set<string>()
  try {
    for await (const log of logs) {
      const { header } = log
      const trace = new SessionTrace(
        pipeline.writer,
        {
          id: header.id,
          inheritedEventCount: log.inheritedEventCount,
          delegationDepth: header.delegationDepth,
          ...(header.parentSession === undefined ? {} : { parentSession: header.parentSession }),
        },
        pipeline.defaults,
        (traceId) => traceIds.add(traceId),
      )
      for (const event of log.events) {
        trace.consume(event)
        // A stored log can hold more spans than the queue: wait for the collector rather than drop them.
        const room = pipeline.processor.waitForRoom()
        if (room !== undefined) await room
      }
      trace.close('the log ends inside this turn')
    }
  } finally {
    await pipeline.writer.shutdown()
  }
  const dropReason = pipeline.firstLoss()
  return { traceIds: [...traceIds], stats: pipeline.processor.stats(), ...(dropReason === undefined ? {} : { dropReason }) }
}
