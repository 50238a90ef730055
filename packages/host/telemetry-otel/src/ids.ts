import { createHash } from 'node:crypto'

/**
 * Span and trace ids derived from where a span begins in a log: the session
 * id, the seq of the event that opens the span, and what the span is. The
 * same log gives the same ids live and in a replay, so a child's recorded
 * trace context (which names its parent's tool-call span) joins a trace
 * exported by another process or at another time.
 */
export type SpanRole = 'turn' | 'step' | 'tool' | 'compaction'

export function spanIdFor(session: string, seq: number, role: SpanRole): string {
  return nonZero(digest(`span\0${role}\0${session}\0${seq}`).slice(0, 16))
}

/** The trace of a turn that has no recorded parent: one trace per top-level turn. */
export function traceIdFor(session: string, seq: number): string {
  return nonZero(digest(`trace\0${session}\0${seq}`).slice(0, 32))
}

function digest(text: string): string {
  return createHash('sha256').update(text).digest('hex')
}

/** An all-zero id is invalid in W3C trace context; the chance is 2^-64, and the fix keeps ids deterministic. */
function nonZero(hex: string): string {
  return /^0+$/.test(hex) ? `${hex.slice(0, -1)}1` : hex
}
