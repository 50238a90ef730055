import { consoleLogger, definePlugin } from '@dsh/context'
import { createPipeline, otlpExporter } from './exporter.js'
import { LiveTraces } from './live.js'
import { checkOptions, type SessionTelemetryOptions } from './options.js'
import type { TelemetryStats } from './processor.js'

/** Service `sessionTelemetry`: what the plugin has exported so far. */
export interface SessionTelemetry {
  /** False when no exporter was configured (the plugin then does nothing). */
  readonly enabled: boolean
  stats(): TelemetryStats
  /** Exports what is queued; resolves when those exports have ended (accepted or counted as dropped). */
  flush(): Promise<void>
}

declare module '@dsh/context' {
  interface Services {
    sessionTelemetry: SessionTelemetry
  }
}

const NOTHING: TelemetryStats = Object.freeze({ exported: 0, dropped: 0, failedExports: 0, pending: 0 })
const INERT: SessionTelemetry = Object.freeze({ enabled: false, stats: () => NOTHING, flush: () => Promise.resolve() })

/**
 * Provides service `sessionTelemetry` and, when an exporter is configured,
 * turns every live session's events into OpenTelemetry spans as they are
 * appended (see `SessionTrace` for the span model). Activate it on a host's
 * context (`host.ctx.activate(sessionTelemetryPlugin({ otlp }))`); it requires
 * `sessions`. Options are checked when the plugin is made, so a bad endpoint
 * fails before anything is opened.
 *
 * An append never waits for the collector: spans queue (bounded) and export
 * in the background; spans the queue cannot take or an export loses are
 * counted in `stats().dropped`, with one warning to the logger. On disposal
 * the spans of turns still open end as unfinished and the queue is flushed
 * (each export bounded by `otlp.timeoutMs`).
 */
export function sessionTelemetryPlugin(options: SessionTelemetryOptions = {}) {
  const { otlp } = checkOptions(options)
  return definePlugin({
    name: 'sessionTelemetry',
    inject: { required: ['sessions'] },
    activate(ctx) {
      const exporter = options.exporter ?? (otlp === undefined ? undefined : otlpExporter(otlp))
      if (exporter === undefined) {
        ctx.provide('sessionTelemetry', INERT)
        return
      }
      const pipeline = createPipeline(options, otlp, exporter, () => options.logger ?? ctx.get('logger') ?? consoleLogger)
      const live = new LiveTraces(pipeline, ctx.sessions)
      const unsubscribe = [
        ctx.on('session/event', (session, event) => live.event(session, event)),
        ctx.on('session/disposed', (session) => live.disposed(session)),
        ctx.on('subagent/run-start', (child, run) => live.runStart(child, run.kind)),
      ]
      ctx.provide('sessionTelemetry', {
        enabled: true,
        stats: () => pipeline.processor.stats(),
        flush: () => pipeline.processor.forceFlush(),
      })
      ctx.onDispose(async () => {
        for (const off of unsubscribe) off()
        live.closeAll('the host was disposed while the turn ran')
        await pipeline.writer.shutdown()
      })
    },
  })
}
