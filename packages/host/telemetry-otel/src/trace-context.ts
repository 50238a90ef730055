import { defaultTextMapGetter, defaultTextMapSetter, ROOT_CONTEXT, type SpanContext, trace } from '@opentelemetry/api'
import { W3CTraceContextPropagator } from '@opentelemetry/core'

/**
 * The event that carries a W3C trace context into a child's log:
 * `telemetry/trace-context {traceparent, tracestate?}`. It names the span
 * the child's next runs belong under (the parent's tool call that started
 * them), so a child run in another process, or replayed later, joins its
 * parent's trace. It is written right before the child's `subagent/start`,
 * never into its descriptor.
 */
export const TRACE_CONTEXT_EVENT = 'telemetry/trace-context'

export interface TraceContextData {
  readonly traceparent: string
  readonly tracestate?: string
}

declare module '@dsh/session' {
  interface SessionEventMap {
    'telemetry/trace-context': TraceContextData
  }
}

const propagator = new W3CTraceContextPropagator()

/** The W3C headers of `context`, as the event records them. */
export function traceContextData(context: SpanContext): TraceContextData {
  const carrier: Record<string, string> = {}
  propagator.inject(trace.setSpanContext(ROOT_CONTEXT, context), carrier, defaultTextMapSetter)
  return {
    traceparent: carrier.traceparent ?? '',
    ...(carrier.tracestate === undefined ? {} : { tracestate: carrier.tracestate }),
  }
}

/** The span context an event records; `undefined` for anything that is not a valid W3C trace context (it is ignored). */
export function parseTraceContext(data: unknown): SpanContext | undefined {
  if (data === null || typeof data !== 'object') return undefined
  const { traceparent, tracestate } = data as { traceparent?: unknown; tracestate?: unknown }
  if (typeof traceparent !== 'string') return undefined
  const carrier: Record<string, string> = { traceparent, ...(typeof tracestate === 'string' ? { tracestate } : {}) }
  const context = trace.getSpanContext(propagator.extract(ROOT_CONTEXT, carrier, defaultTextMapGetter))
  return context !== undefined && trace.isSpanContextValid(context) ? context : undefined
}
