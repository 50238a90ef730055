import { validateHeaderName, validateHeaderValue } from 'node:http'
import { type Logger, textWithin } from '@dsh/context'
import type { SpanExporter } from '@opentelemetry/sdk-trace-base'
import { parseOtlpEndpoint } from './endpoint.js'
import { SessionTelemetryError } from './errors.js'

export const DEFAULT_MAX_QUEUE_SIZE = 2048
export const DEFAULT_MAX_BATCH_SIZE = 512
export const DEFAULT_EXPORT_DELAY_MS = 1000
export const DEFAULT_EXPORT_TIMEOUT_MS = 5000

/** Where spans go over OTLP/HTTP (JSON encoding). */
export interface OtlpOptions {
  /** The traces URL (`http://collector:4318/v1/traces`; a bare origin gets `/v1/traces`). */
  readonly url: string
  readonly headers?: Readonly<Record<string, string>>
  /** How long one export may take, retries included, ms (default 5000). */
  readonly timeoutMs?: number
}

export interface SessionTelemetryOptions {
  /**
   * Export over OTLP/HTTP: a traces URL or the full options. With neither
   * `otlp` nor `exporter` the plugin does nothing at all (no listener, no
   * span): telemetry that is not exported costs nothing.
   */
  readonly otlp?: string | OtlpOptions
  /** Any SDK span exporter instead of OTLP/HTTP. */
  readonly exporter?: SpanExporter
  /** `service.name` of the resource (default `dsh`). */
  readonly serviceName?: string
  /** `gen_ai.agent.name` of a top-level session's turns (default `dsh`). */
  readonly agentName?: string
  /** The model a top-level session's steps request (`gen_ai.request.model`) when its log does not name one. */
  readonly model?: string
  /** `gen_ai.provider.name` when the log does not name one (a child's descriptor does). */
  readonly provider?: string
  /** Most finished spans waiting for export (default 2048); past it spans are dropped and counted. */
  readonly maxQueueSize?: number
  /** Most spans in one export (default 512). */
  readonly maxBatchSize?: number
  /** How long a partial batch waits, ms (default 1000). */
  readonly exportDelayMs?: number
  /** Where the one warning about lost spans goes (default: the context's `logger` service, then the console). */
  readonly logger?: Logger
}

/** The options checked, with the endpoint parsed: `SESSION_TELEMETRY_INVALID_OPTIONS` / `_INVALID_ENDPOINT` otherwise. */
export function checkOptions(options: SessionTelemetryOptions): { otlp: OtlpOptions | undefined } {
  if (options.otlp !== undefined && options.exporter !== undefined) {
    throw new SessionTelemetryError(
      'SESSION_TELEMETRY_INVALID_OPTIONS',
      'Give either `otlp` or `exporter`, not both: spans go to one place.',
    )
  }
  for (const key of ['maxQueueSize', 'maxBatchSize', 'exportDelayMs'] as const) {
    const value = options[key]
    if (value !== undefined && !(Number.isSafeInteger(value) && value > 0)) {
      throw new SessionTelemetryError(
        'SESSION_TELEMETRY_INVALID_OPTIONS',
        `\`${key}\` must be a positive integer, got ${JSON.stringify(value)}.`,
      )
    }
  }
  const raw = options.otlp as unknown
  if (raw === undefined) return { otlp: undefined }
  const otlp = (typeof raw === 'string' ? { url: raw } : raw) as OtlpOptions
  if (otlp === null || typeof otlp !== 'object' || typeof otlp.url !== 'string') {
    throw new SessionTelemetryError(
      'SESSION_TELEMETRY_INVALID_OPTIONS',
      '`otlp` must be the traces URL or `{ url, headers?, timeoutMs? }` with `url` a string.',
    )
  }
  checkHeaders(otlp.headers)
  const timeoutMs = otlp.timeoutMs
  if (timeoutMs !== undefined && !(Number.isSafeInteger(timeoutMs) && timeoutMs > 0)) {
    throw new SessionTelemetryError(
      'SESSION_TELEMETRY_INVALID_OPTIONS',
      `\`otlp.timeoutMs\` must be a positive integer, got ${JSON.stringify(timeoutMs)}.`,
    )
  }
  return { otlp: { ...otlp, url: parseOtlpEndpoint(otlp.url) } }
}

/** Header names and values an HTTP request can carry; a value is never quoted back (it may be a credential). */
function checkHeaders(headers: unknown): void {
  if (headers === undefined) return
  if (headers === null || typeof headers !== 'object' || Array.isArray(headers)) {
    throw new SessionTelemetryError(
      'SESSION_TELEMETRY_INVALID_OPTIONS',
      '`otlp.headers` must be an object of header names to string values.',
    )
  }
  for (const [name, value] of Object.entries(headers)) {
    let why: string | undefined
    try {
      validateHeaderName(name)
    } catch {
      why = 'is not a valid header name'
    }
    if (why === undefined && typeof value !== 'string') why = 'has a value that is not a string'
    else if (why === undefined) {
      try {
        validateHeaderValue(name, value)
      } catch {
        why = 'has a value with characters a header cannot carry (a line break, NUL, …)'
      }
    }
    if (why !== undefined) {
      const shown = textWithin(name, 100)
      throw new SessionTelemetryError('SESSION_TELEMETRY_INVALID_OPTIONS', `The OTLP header ${JSON.stringify(shown)} ${why}.`)
    }
  }
}
