import { textWithin } from '@dsh/context'
import { type Attributes, ROOT_CONTEXT, type Span, type SpanContext, SpanKind, TraceFlags, trace } from '@opentelemetry/api'
import { millisToHrTime } from '@opentelemetry/core'
import { defaultResource, resourceFromAttributes } from '@opentelemetry/resources'
import { AlwaysOnSampler, BasicTracerProvider, type IdGenerator, type SpanProcessor } from '@opentelemetry/sdk-trace-base'
import { ATTR_SERVICE_NAME } from '@opentelemetry/semantic-conventions'

/** The instrumentation scope spans are reported under. */
export const TRACER_NAME = '@dsh/session-telemetry-otel'

/**
 * Most characters of a span's name, of a string attribute and of a status
 * message. Names, labels, tool calls and errors come from the log, where a
 * model's output can put megabytes; a span carries at most this much of each
 * (an id up to the protocol's 1024 characters is kept whole), so a queued
 * span and an export request stay small.
 */
export const MAX_SPAN_TEXT = 1024

/** `text` cut to `MAX_SPAN_TEXT` characters, ending with `…` when cut (never splitting a surrogate pair). */
export function capText(text: string): string {
  return textWithin(text, MAX_SPAN_TEXT)
}

/** One span to open: its ids are decided by the caller (see ids.ts), its parent is a span context or nothing (a new trace). */
export interface SpanSpec {
  readonly name: string
  readonly kind: SpanKind
  readonly spanId: string
  /** Used only when there is no parent. */
  readonly traceId: string
  readonly parent: SpanContext | undefined
  /** Epoch ms, as the log records it. */
  readonly startTime: number
  readonly attributes: Attributes
}

/**
 * The SDK's tracer with ids chosen by the caller: the id generator hands out
 * the ids set for the span being started, so the SDK builds, samples, limits
 * and exports spans as always while their ids stay a function of the log.
 */
class ChosenIds implements IdGenerator {
  traceId = ''
  spanId = ''
  generateTraceId(): string {
    return this.traceId
  }
  generateSpanId(): string {
    return this.spanId
  }
}

export class SpanWriter {
  readonly #ids = new ChosenIds()
  readonly #provider: BasicTracerProvider
  readonly #tracer

  constructor(processor: SpanProcessor, serviceName: string) {
    this.#provider = new BasicTracerProvider({
      resource: defaultResource().merge(resourceFromAttributes({ [ATTR_SERVICE_NAME]: serviceName })),
      idGenerator: this.#ids,
      // Every span is kept: what to sample is the collector's decision.
      sampler: new AlwaysOnSampler(),
      spanLimits: { attributeValueLengthLimit: MAX_SPAN_TEXT },
      spanProcessors: [processor],
    })
    this.#tracer = this.#provider.getTracer(TRACER_NAME)
  }

  start(spec: SpanSpec): Span {
    this.#ids.traceId = spec.traceId
    this.#ids.spanId = spec.spanId
    const parent = spec.parent === undefined ? ROOT_CONTEXT : trace.setSpanContext(ROOT_CONTEXT, spec.parent)
    return this.#tracer.startSpan(
      capText(spec.name),
      { kind: spec.kind, startTime: millisToHrTime(spec.startTime), attributes: spec.attributes },
      parent,
    )
  }

  /** Ends `span` at `time` (epoch ms). */
  static end(span: Span, time: number): void {
    span.end(millisToHrTime(time))
  }

  shutdown(): Promise<void> {
    return this.#provider.shutdown()
  }
}

/** A span context for a remote parent (one recorded in a log). */
export function remoteContext(traceId: string, spanId: string): SpanContext {
  return { traceId, spanId, traceFlags: TraceFlags.SAMPLED, isRemote: true }
}

export { SpanKind }
