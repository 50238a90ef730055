import type { Logger } from '@dsh/context'
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-http'
import type { SpanExporter } from '@opentelemetry/sdk-trace-base'
import {
  DEFAULT_EXPORT_DELAY_MS,
  DEFAULT_EXPORT_TIMEOUT_MS,
  DEFAULT_MAX_BATCH_SIZE,
  DEFAULT_MAX_QUEUE_SIZE,
  type OtlpOptions,
  type SessionTelemetryOptions,
} from './options.js'
import { BoundedExportProcessor } from './processor.js'
import type { TraceDefaults } from './session-trace.js'
import { SpanWriter } from './writer.js'

/** The pieces a trace is written with: the SDK tracer over the bounded processor over the exporter. */
export interface TelemetryPipeline {
  readonly writer: SpanWriter
  readonly processor: BoundedExportProcessor
  readonly defaults: TraceDefaults
  /** Where the spans go, for messages (`an exporter` when it is not OTLP). */
  readonly destination: string
  /** Why spans were first lost (`undefined` while none was). */
  firstLoss(): string | undefined
}

/**
 * What the one warning about lost spans says comes next: a live export goes
 * on for the process's lifetime and counts in `stats()`; a replay goes on to
 * its end and counts every lost span in its result.
 */
const AFTER_LOSS = {
  live: 'This warning is shown once; the count keeps growing in the telemetry stats.',
  replay: 'The replay goes on to its end and then reports how many spans it could not deliver.',
} as const

export function createPipeline(
  options: SessionTelemetryOptions,
  otlp: OtlpOptions | undefined,
  exporter: SpanExporter,
  logger: () => Logger,
  kind: keyof typeof AFTER_LOSS = 'live',
): TelemetryPipeline {
  const destination = otlp?.url ?? 'the configured exporter'
  let firstLoss: string | undefined
  const processor = new BoundedExportProcessor(exporter, {
    maxQueueSize: options.maxQueueSize ?? DEFAULT_MAX_QUEUE_SIZE,
    maxBatchSize: options.maxBatchSize ?? DEFAULT_MAX_BATCH_SIZE,
    delayMs: options.exportDelayMs ?? DEFAULT_EXPORT_DELAY_MS,
    timeoutMs: otlp?.timeoutMs ?? DEFAULT_EXPORT_TIMEOUT_MS,
    onDrop: (count, why) => {
      if (firstLoss !== undefined) return
      firstLoss = why
      logger().warn(
        `dsh: OpenTelemetry spans are being dropped (${count} so far: ${why}) on the way to ${destination}; sessions are unaffected. ${AFTER_LOSS[kind]}`,
      )
    },
  })
  return {
    writer: new SpanWriter(processor, options.serviceName ?? 'dsh'),
    processor,
    destination,
    firstLoss: () => firstLoss,
    defaults: {
      agentName: options.agentName ?? 'dsh',
      ...(options.model === undefined ? {} : { model: options.model }),
      ...(options.provider === undefined ? {} : { provider: options.provider }),
    },
  }
}

/** The OTLP/HTTP exporter (JSON encoding) for `otlp`. */
export function otlpExporter(otlp: OtlpOptions): SpanExporter {
  return new OTLPTraceExporter({
    url: otlp.url,
    timeoutMillis: otlp.timeoutMs ?? DEFAULT_EXPORT_TIMEOUT_MS,
    ...(otlp.headers === undefined ? {} : { headers: { ...otlp.headers } }),
  })
}
