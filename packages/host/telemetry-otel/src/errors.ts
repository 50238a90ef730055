import { DshError } from '@dsh/context'

/**
 * - `SESSION_TELEMETRY_INVALID_ENDPOINT`: the OTLP endpoint is not an
 *   `http:` or `https:` URL (or has credentials in it). Give the collector's
 *   traces URL, e.g. `http://127.0.0.1:4318/v1/traces`.
 * - `SESSION_TELEMETRY_INVALID_OPTIONS`: an option the plugin cannot use (both
 *   `otlp` and `exporter`, a queue or batch size that is not a positive
 *   integer, an `otlp` of the wrong shape, or a header a request cannot
 *   carry). Fix the call.
 */
export type SessionTelemetryErrorCode = 'SESSION_TELEMETRY_INVALID_ENDPOINT' | 'SESSION_TELEMETRY_INVALID_OPTIONS'

export class SessionTelemetryError extends DshError<SessionTelemetryErrorCode> {}
