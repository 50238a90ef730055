import type { StoredSessionEvent } from '@dsh/session'
import { type Attributes, type Span, type SpanContext, SpanKind, SpanStatusCode } from '@opentelemetry/api'
import { DSH, ERROR_TYPE, GEN_AI, OPERATION } from './attributes.js'
import { spanIdFor, traceIdFor } from './ids.js'
import { parseTraceContext, TRACE_CONTEXT_EVENT } from './trace-context.js'
import { capText, SpanWriter } from './writer.js'

/** What a session's spans are labelled with beyond its own log. */
export interface TraceDefaults {
  /** `gen_ai.agent.name` of a top-level session (a child's is its label). */
  readonly agentName: string
  /** The model a top-level session's steps request, when the log does not say. */
  readonly model?: string
  /** The provider (`gen_ai.provider.name`) when the log does not say. */
  readonly provider?: string
}

/** The header fields a trace needs. */
export interface TracedSession {
  readonly id: string
  readonly inheritedEventCount: number
  readonly parentSession?: string
  readonly delegationDepth: number
}

interface Tokens {
  input: number
  output: number
  cacheRead: number
  cacheWrite: number
  reasoning: number
}

interface OpenTurn {
  readonly span: Span
  /** Usage of the turn's `assistant/message` events, summed. */
  readonly messages: Tokens & { seen: boolean }
  /** Usage of the turn's `step/end` events, summed (preferred when any step reported one). */
  readonly steps: Tokens & { seen: boolean }
  /** Usage of the summarizing model calls of compactions inside the turn, added to either. */
  readonly compactions: Tokens & { seen: boolean }
  failed: boolean
}

/** A compaction begun (`compaction/start`) whose summary or end has not come yet. */
interface OpenCompaction {
  readonly id: string | undefined
  readonly seq: number
  readonly time: number
  readonly reason: string | undefined
  /** The turn's span when it began inside one (its span goes under the turn), else the recorded trace context. */
  readonly parent: SpanContext | undefined
  readonly inTurn: boolean
}

interface OpenStep {
  readonly span: Span
  /** Opened by `step/start` (ended by `step/end`), not inferred from model output and tool calls. */
  readonly explicit: boolean
  lastTime: number
  calls: number
  results: number
  ended: boolean
}

/** Model output: each of these belongs to a model step. */
const STEP_OUTPUT = new Set(['assistant/chunk', 'assistant/reasoning', 'assistant/message', 'assistant/error'])

/**
 * The spans of one session, built event by event (live or from a stored log):
 *
 * - a turn (`turn/start` … `turn/end`) is an `invoke_agent` span, the root of
 *   a trace for a top-level session, or a child of the span its latest
 *   `telemetry/trace-context` names (the parent's tool call that started the
 *   run);
 * - a model step is a `chat` span under its turn: opened by `step/start` and
 *   closed by `step/end` when the log has them; otherwise a step is the model
 *   output up to the tool calls it asked for, and ends when their results are
 *   in (the next output opens the next step);
 * - a tool call (`tool/call` … `tool/result`) is an `execute_tool` span under
 *   its step; an error result sets the span's status to the tool's error;
 * - a compaction's summarizing model call (`compaction/start` …
 *   `compaction/summary` with the usage or model it reports) is a `chat`
 *   span with its usage, under the turn it ran in (a budget compaction), or
 *   a trace of its own outside any turn (`dsh compact`, the HTTP API). A
 *   compaction that failed (`compaction/end {error}`) is such a span with
 *   status ERROR; a summary that reports neither usage nor model called no
 *   model and makes no span.
 *
 * Span ids are a function of the session id and the seq of the event that
 * opens the span (ids.ts), so a replay yields the same ids as the live run.
 * Only the session's own events count (a fork's inherited prefix is its
 * parent's work).
 */
export class SessionTrace {
  readonly #writer: SpanWriter
  readonly #session: TracedSession
  #agentName: string
  #model: string | undefined
  #provider: string | undefined
  #remote: SpanContext | undefined
  #turn: OpenTurn | undefined
  #step: OpenStep | undefined
  /** When the next inferred step begins: the turn's start or the last tool result. */
  #stepStart = 0
  readonly #tools = new Map<string, Span>()
  #compaction: OpenCompaction | undefined
  #lastTime = 0
  readonly #onTrace: ((traceId: string) => void) | undefined

  /** `onTrace` hears the trace id of every turn (a replay reports them; the live side keeps nothing per turn). */
  constructor(writer: SpanWriter, session: TracedSession, defaults: TraceDefaults, onTrace?: (traceId: string) => void) {
    this.#writer = writer
    this.#onTrace = onTrace
    this.#session = session
    this.#agentName = session.parentSession === undefined ? defaults.agentName : 'subagent'
    this.#model = defaults.model
    this.#provider = defaults.provider
  }

  /** Reads what labels later spans (descriptor, options, trace context) from events already in the log, without emitting spans. */
  prime(events: readonly StoredSessionEvent[]): void {
    for (const event of events) if (event.seq >= this.#session.inheritedEventCount) this.#label(event)
  }

  /**
   * The span of the tool call running now: drivers log all of a step's calls
   * first, then run them in order, each ending with its result, so the
   * running one is the earliest call without a result.
   */
  runningToolCall(): SpanContext | undefined {
    for (const span of this.#tools.values()) return span.spanContext()
    return undefined
  }

  consume(event: StoredSessionEvent): void {
    if (event.seq < this.#session.inheritedEventCount) return
    if (Number.isFinite(event.time)) this.#lastTime = event.time
    const data = (event.data ?? {}) as Record<string, unknown>
    if (this.#label(event)) return
    switch (event.type) {
      case 'turn/start':
        this.#startTurn(event, data)
        return
      case 'turn/end':
        this.#endTurn(data)
        return
      case 'step/start':
        this.#startStep(event, data)
        return
      case 'step/end':
        this.#endStep(data)
        return
      case 'tool/call':
        this.#startTool(event, data)
        return
      case 'tool/result':
        this.#endTool(data)
        return
      case 'compaction/start':
        this.#startCompaction(event, data)
        return
      case 'compaction/summary':
        this.#compactionSummary(event, data)
        return
      case 'compaction/end':
        this.#endCompaction(data)
        return
    }
    if (!STEP_OUTPUT.has(event.type) || this.#turn === undefined) return
    const step = this.#stepFor(event, false)
    step.lastTime = this.#lastTime
    if (event.type === 'assistant/message') addUsage(this.#turn.messages, data.usage)
    if (event.type === 'assistant/error') {
      const code = typeof data.code === 'string' ? data.code : 'error'
      const message = capText(`${code}: ${typeof data.message === 'string' ? data.message : ''}`)
      for (const span of [step.span, this.#turn.span]) {
        span.setAttribute(ERROR_TYPE, code)
        span.setStatus({ code: SpanStatusCode.ERROR, message })
      }
      this.#turn.failed = true
    }
  }

  /** Ends every open span at the last event's time, marked unfinished (`why`): the log ended or the session went away mid-turn. */
  close(why: string): void {
    const compaction = this.#compaction
    if (compaction !== undefined) {
      this.#compaction = undefined
      unfinished(this.#compactionSpan(compaction, compaction.time, undefined, undefined), why, this.#lastTime)
    }
    for (const span of this.#tools.values()) unfinished(span, why, this.#lastTime)
    this.#tools.clear()
    const step = this.#step
    if (step !== undefined && !step.ended) {
      step.ended = true
      unfinished(step.span, why, step.lastTime)
    }
    this.#step = undefined
    if (this.#turn !== undefined) {
      unfinished(this.#turn.span, why, this.#lastTime)
      this.#turn = undefined
    }
  }

  /** Events that only label later spans; true when `event` was one. */
  #label(event: StoredSessionEvent): boolean {
    const data = (event.data ?? {}) as Record<string, unknown>
    switch (event.type) {
      case TRACE_CONTEXT_EVENT:
        this.#remote = parseTraceContext(data) ?? this.#remote
        return true
      case 'subagent/descriptor':
        if (typeof data.label === 'string') this.#agentName = data.label
        if (typeof data.provider === 'string') this.#provider = data.provider
        if (typeof data.agentModel === 'string') this.#model = data.agentModel
        return true
      case 'subagent/options':
        if (typeof data.model === 'string') this.#model = data.model
        else if (typeof data.agentModel === 'string') this.#model = data.agentModel
        return true
      default:
        return false
    }
  }

  #startTurn(event: StoredSessionEvent, data: Record<string, unknown>): void {
    if (this.#turn !== undefined) this.close('a new turn started before this one ended')
    const id = this.#session.id
    const attributes: Attributes = {
      [GEN_AI.operation]: OPERATION.invokeAgent,
      [GEN_AI.agentId]: id,
      [GEN_AI.agentName]: this.#agentName,
      [GEN_AI.conversationId]: id,
      [DSH.sessionId]: id,
      [DSH.depth]: this.#session.delegationDepth,
      ...(typeof data.turn === 'number' ? { [DSH.turn]: data.turn } : {}),
      ...(this.#session.parentSession === undefined ? {} : { [DSH.parentSession]: this.#session.parentSession }),
      ...this.#modelAttributes(undefined, undefined),
    }
    const span = this.#writer.start({
      name: `${OPERATION.invokeAgent} ${this.#agentName}`,
      kind: SpanKind.INTERNAL,
      spanId: spanIdFor(id, event.seq, 'turn'),
      traceId: traceIdFor(id, event.seq),
      parent: this.#remote,
      startTime: event.time,
      attributes,
    })
    this.#onTrace?.(span.spanContext().traceId)
    this.#turn = { span, messages: noTokens(), steps: noTokens(), compactions: noTokens(), failed: false }
    this.#stepStart = event.time
  }

  #endTurn(data: Record<string, unknown>): void {
    const turn = this.#turn
    if (turn === undefined) return
    for (const span of this.#tools.values()) unfinished(span, 'the turn ended before the tool returned', this.#lastTime)
    this.#tools.clear()
    this.#closeStep()
    const model = turn.steps.seen ? turn.steps : turn.messages.seen ? turn.messages : undefined
    const usage = turn.compactions.seen ? addTokens(model ?? noTokens(), turn.compactions) : model
    if (usage !== undefined) turn.span.setAttributes(usageAttributes(usage))
    const reason = typeof data.reason === 'string' ? data.reason : 'unknown'
    turn.span.setAttribute(DSH.turnEndReason, reason)
    if (reason === 'error' && !turn.failed) turn.span.setStatus({ code: SpanStatusCode.ERROR, message: 'the turn ended with an error' })
    SpanWriter.end(turn.span, this.#lastTime)
    this.#turn = undefined
  }

  #startStep(event: StoredSessionEvent, data: Record<string, unknown>): void {
    if (this.#turn === undefined) return
    this.#closeStep()
    const model = typeof data.model === 'string' ? data.model : undefined
    const provider = typeof data.provider === 'string' ? data.provider : undefined
    this.#step = this.#openStep(event.seq, event.time, true, model, provider)
  }

  #endStep(data: Record<string, unknown>): void {
    const step = this.#step
    if (step === undefined || this.#turn === undefined) return
    if (addUsage(this.#turn.steps, data.usage)) {
      const tokens = noTokens()
      addUsage(tokens, data.usage)
      step.span.setAttributes(usageAttributes(tokens))
    }
    if (typeof data.finish === 'string') step.span.setAttribute(GEN_AI.finishReasons, [data.finish])
    if (typeof data.model === 'string') step.span.setAttribute(GEN_AI.responseModel, data.model)
    step.lastTime = this.#lastTime
    // Tool calls the step asked for may follow its end: the step stays their parent.
    this.#finishStep(step)
  }

  /** The step `event` belongs to: the open one, or a new inferred one when the previous step's tool calls are done. */
  #stepFor(event: StoredSessionEvent, isCall: boolean): OpenStep {
    const step = this.#step
    if (step !== undefined && (step.explicit || !(isCall ? step.results > 0 : step.calls > 0))) return step
    this.#closeStep()
    this.#step = this.#openStep(event.seq, this.#stepStart, false, undefined, undefined)
    return this.#step
  }

  #openStep(seq: number, time: number, explicit: boolean, model: string | undefined, provider: string | undefined): OpenStep {
    const turn = this.#turn!
    const name = model ?? this.#model
    const span = this.#writer.start({
      name: name === undefined ? OPERATION.chat : `${OPERATION.chat} ${name}`,
      kind: SpanKind.CLIENT,
      spanId: spanIdFor(this.#session.id, seq, 'step'),
      traceId: turn.span.spanContext().traceId,
      parent: turn.span.spanContext(),
      startTime: time,
      attributes: {
        [GEN_AI.operation]: OPERATION.chat,
        [GEN_AI.conversationId]: this.#session.id,
        ...this.#modelAttributes(model, provider),
      },
    })
    return { span, explicit, lastTime: time, calls: 0, results: 0, ended: false }
  }

  #closeStep(): void {
    const step = this.#step
    if (step === undefined) return
    if (!step.explicit && !step.ended) step.span.setAttribute(GEN_AI.finishReasons, [step.calls > 0 ? 'tool_calls' : 'stop'])
    this.#finishStep(step)
    this.#step = undefined
  }

  #finishStep(step: OpenStep): void {
    if (step.ended) return
    step.ended = true
    SpanWriter.end(step.span, step.lastTime)
  }

  #startTool(event: StoredSessionEvent, data: Record<string, unknown>): void {
    if (this.#turn === undefined) return
    const step = this.#stepFor(event, true)
    step.calls++
    step.lastTime = event.time
    const name = typeof data.name === 'string' ? data.name : 'unknown'
    const callId = typeof data.callId === 'string' ? data.callId : String(event.seq)
    const parent = step.span.spanContext()
    const span = this.#writer.start({
      name: `${OPERATION.executeTool} ${name}`,
      kind: SpanKind.INTERNAL,
      spanId: spanIdFor(this.#session.id, event.seq, 'tool'),
      traceId: parent.traceId,
      parent,
      startTime: event.time,
      attributes: {
        [GEN_AI.operation]: OPERATION.executeTool,
        [GEN_AI.toolName]: name,
        [GEN_AI.toolCallId]: callId,
        [GEN_AI.toolType]: 'function',
      },
    })
    this.#tools.delete(callId)
    this.#tools.set(callId, span)
  }

  #endTool(data: Record<string, unknown>): void {
    const callId = typeof data.callId === 'string' ? data.callId : undefined
    const span = callId === undefined ? undefined : this.#tools.get(callId)
    if (span === undefined || callId === undefined) return
    this.#tools.delete(callId)
    if (data.isError === true) {
      const { code, message } = toolError(data.content)
      span.setAttribute(ERROR_TYPE, code)
      span.setStatus({ code: SpanStatusCode.ERROR, message })
    }
    SpanWriter.end(span, this.#lastTime)
    if (this.#step !== undefined) {
      this.#step.results++
      this.#step.lastTime = this.#lastTime
    }
    this.#stepStart = this.#lastTime
  }

  #startCompaction(event: StoredSessionEvent, data: Record<string, unknown>): void {
    const turn = this.#turn
    this.#compaction = {
      id: typeof data.compactionId === 'string' ? data.compactionId : undefined,
      seq: event.seq,
      time: event.time,
      reason: typeof data.reason === 'string' ? data.reason : undefined,
      parent: turn === undefined ? this.#remote : turn.span.spanContext(),
      inTurn: turn !== undefined,
    }
  }

  /** The summary ends the compaction's model call: a span with the usage it reports (none when it reports neither usage nor model). */
  #compactionSummary(event: StoredSessionEvent, data: Record<string, unknown>): void {
    const open = this.#openCompaction(data.compactionId) ?? this.#startedAt(event, data)
    this.#compaction = undefined
    const tokens = noTokens()
    const model = typeof data.model === 'string' ? data.model : undefined
    if (!addUsage(tokens, data.usage) && model === undefined) return
    const provider = typeof data.provider === 'string' ? data.provider : undefined
    const span = this.#compactionSpan(open, open.time, model, provider)
    if (tokens.seen) {
      span.setAttributes(usageAttributes(tokens))
      if (open.inTurn && this.#turn !== undefined) addUsage(this.#turn.compactions, data.usage)
    }
    SpanWriter.end(span, event.time)
  }

  /** An end without a summary is a failed (or interrupted) model call: an ERROR span with the recorded error. */
  #endCompaction(data: Record<string, unknown>): void {
    const open = this.#openCompaction(data.compactionId)
    this.#compaction = undefined
    if (open === undefined || data.error === undefined) return
    const span = this.#compactionSpan(open, open.time, undefined, undefined)
    const message = capText(typeof data.error === 'string' ? data.error : (JSON.stringify(data.error) ?? 'error'))
    span.setAttribute(ERROR_TYPE, data.error === 'interrupted' ? 'interrupted' : 'compaction_failed')
    span.setStatus({ code: SpanStatusCode.ERROR, message })
    SpanWriter.end(span, this.#lastTime)
  }

  /** The open compaction `id` names (any open one when the event names none). */
  #openCompaction(id: unknown): OpenCompaction | undefined {
    const open = this.#compaction
    if (open === undefined || (typeof id === 'string' && open.id !== undefined && open.id !== id)) return undefined
    return open
  }

  /** A summary whose start this trace did not see (a live trace begun mid-compaction): the call is taken to begin at the summary. */
  #startedAt(event: StoredSessionEvent, data: Record<string, unknown>): OpenCompaction {
    this.#startCompaction(event, data)
    return this.#compaction!
  }

  #compactionSpan(open: OpenCompaction, startTime: number, model: string | undefined, provider: string | undefined): Span {
    const name = model ?? this.#model
    const span = this.#writer.start({
      name: name === undefined ? OPERATION.chat : `${OPERATION.chat} ${name}`,
      kind: SpanKind.CLIENT,
      spanId: spanIdFor(this.#session.id, open.seq, 'compaction'),
      traceId: traceIdFor(this.#session.id, open.seq),
      parent: open.parent,
      startTime,
      attributes: {
        [GEN_AI.operation]: OPERATION.chat,
        [GEN_AI.conversationId]: this.#session.id,
        [DSH.sessionId]: this.#session.id,
        ...(open.id === undefined ? {} : { [DSH.compactionId]: open.id }),
        ...(open.reason === undefined ? {} : { [DSH.compactionReason]: open.reason }),
        ...this.#modelAttributes(model, provider),
      },
    })
    // A compaction outside any turn is a trace of its own (or joins the recorded one): a replay reports it.
    if (!open.inTurn) this.#onTrace?.(span.spanContext().traceId)
    return span
  }

  #modelAttributes(model: string | undefined, provider: string | undefined): Attributes {
    const requested = model ?? this.#model
    const by = provider ?? this.#provider
    return {
      ...(requested === undefined ? {} : { [GEN_AI.requestModel]: requested }),
      ...(by === undefined ? {} : { [GEN_AI.provider]: by }),
    }
  }
}

function noTokens(): Tokens & { seen: boolean } {
  return { input: 0, output: 0, cacheRead: 0, cacheWrite: 0, reasoning: 0, seen: false }
}

/** `a + b`, count by count. */
function addTokens(a: Tokens, b: Tokens): Tokens {
  return {
    input: a.input + b.input,
    output: a.output + b.output,
    cacheRead: a.cacheRead + b.cacheRead,
    cacheWrite: a.cacheWrite + b.cacheWrite,
    reasoning: a.reasoning + b.reasoning,
  }
}

/** The harness's names for the same counts (`inputTokens`, …), as imported logs carry them. */
const HARNESS_NAMES = {
  input: 'inputTokens',
  output: 'outputTokens',
  cacheRead: 'cacheReadTokens',
  cacheWrite: 'cacheWriteTokens',
  reasoning: 'reasoningTokens',
} as const

/** Adds a usage record (`{input, output, cacheRead?, cacheWrite?, reasoning?}` or the harness's names; disjoint counts) to `into`; false when there was none. */
function addUsage(into: Tokens & { seen?: boolean }, usage: unknown): boolean {
  if (usage === null || typeof usage !== 'object') return false
  const record = usage as Record<string, unknown>
  const names = Object.hasOwn(record, HARNESS_NAMES.input) ? HARNESS_NAMES : undefined
  const read = (kind: keyof typeof HARNESS_NAMES): unknown => record[names === undefined ? kind : names[kind]]
  const input = read('input')
  const output = read('output')
  if (!isCount(input) || !isCount(output)) return false
  into.input += input
  into.output += output
  for (const kind of ['cacheRead', 'cacheWrite', 'reasoning'] as const) {
    const count = read(kind)
    if (isCount(count)) into[kind] += count
  }
  into.seen = true
  return true
}

/**
 * The GenAI usage attributes of disjoint counts: the conventions' input
 * tokens include cached ones and output tokens include reasoning, so those
 * are added in and also reported on their own.
 */
function usageAttributes(tokens: Tokens): Attributes {
  return {
    [GEN_AI.inputTokens]: tokens.input + tokens.cacheRead + tokens.cacheWrite,
    [GEN_AI.outputTokens]: tokens.output + tokens.reasoning,
    ...(tokens.cacheRead > 0 ? { [GEN_AI.cacheReadTokens]: tokens.cacheRead } : {}),
    ...(tokens.cacheWrite > 0 ? { [GEN_AI.cacheWriteTokens]: tokens.cacheWrite } : {}),
    ...(tokens.reasoning > 0 ? { [GEN_AI.reasoningTokens]: tokens.reasoning } : {}),
  }
}

function isCount(value: unknown): value is number {
  return typeof value === 'number' && Number.isSafeInteger(value) && value >= 0
}

/** A tool's error as its result records it (`{code, message}` from the runtime and drivers), else the result's text. */
function toolError(content: unknown): { code: string; message: string } {
  if (content !== null && typeof content === 'object') {
    const { code, message } = content as { code?: unknown; message?: unknown }
    if (typeof code === 'string') return { code, message: capText(`${code}: ${typeof message === 'string' ? message : ''}`) }
  }
  // A result without content (`JSON.stringify` gives `undefined` for it) reads as an empty message.
  const text = typeof content === 'string' ? content : (JSON.stringify(content) ?? '')
  return { code: '_OTHER', message: capText(text) }
}

function unfinished(span: Span, why: string, time: number): void {
  span.setAttribute(ERROR_TYPE, 'unfinished')
  span.setStatus({ code: SpanStatusCode.ERROR, message: why })
  SpanWriter.end(span, time)
}
