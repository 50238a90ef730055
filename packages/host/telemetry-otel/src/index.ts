export { OTLP_TRACES_PATH, parseOtlpEndpoint } from './endpoint.js'
export type { SessionTelemetryErrorCode } from './errors.js'
export { SessionTelemetryError } from './errors.js'
export type { OtlpOptions, SessionTelemetryOptions } from './options.js'
export {
  DEFAULT_EXPORT_DELAY_MS,
  DEFAULT_EXPORT_TIMEOUT_MS,
  DEFAULT_MAX_BATCH_SIZE,
  DEFAULT_MAX_QUEUE_SIZE,
} from './options.js'
export type { SessionTelemetry } from './plugin.js'
export { sessionTelemetryPlugin } from './plugin.js'
export type { TelemetryStats } from './processor.js'
export type { ReplayResult, StoredSessionLog } from './replay.js'
export { replaySessionTraces } from './replay.js'
export type { TraceContextData } from './trace-context.js'
export { TRACE_CONTEXT_EVENT } from './trace-context.js'
