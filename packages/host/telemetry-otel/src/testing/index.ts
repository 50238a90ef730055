/**
 * `@dsh/session-telemetry-otel/testing` — for tests only: a real OTLP/HTTP
 * receiver (JSON encoding) that decodes what an exporter sends, and a
 * helper that draws the received spans as a tree.
 */
export type { OtlpReceiver, ReceivedSpan } from './otlp-receiver.js'
export { spanTree, startOtlpReceiver } from './otlp-receiver.js'
