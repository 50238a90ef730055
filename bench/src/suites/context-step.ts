// context-step: what building one model request costs as a session grows.
// Each step of the session is what the OpenAI driver appends for a step that
// calls a tool: step/start, an 80 B assistant/chunk, a tool/call, step/end,
// and a 2 KiB tool/result (compaction off). Sessions of 50 and 5,000 steps
// are folded by the `sessionContext` unit on a live projection registry.
//
// Ratio (the harness's): building the Chat request object (no serialization)
// at step 5,000 — the old whole-log rebuild (bench/src/fixtures/whole-log-chat.ts,
// the baseline) against the OpenAI driver's own request building
// (`requestMessages` of @dsh/driver-openai/testing/requests, the function each
// model step calls: the sessionContext service, the attachment check, the
// Chat renderer the driver keeps per session with the system prompt first in
// its list and notices phrased per rendered message; the subject);
// baseline / subject, target >= 20. The subject costs the step's new events:
// the view in view order builds no message list, the renderer finds the
// change by comparing chunk references (one per 64 messages) and extends its
// own list in place. Requirements, all within one run:
// - the new work of one step — folding the step's events and rendering the
//   messages they made — at step 5,000 against step 50: at most 2x;
// - every incrementally built body equals a fresh full render of the same
//   context and the old rebuild's messages (so a cached array cannot pass);
// - every subject step rendered its two new messages, compared at most one
//   chunk of kept ones and rebuilt nothing (the driver's own counts);
// - with the Responses renderer and previous_response_id, the bytes sent at
//   step 5,000 against step 50: at most 2x.
// Reported without a target: one whole step of a detached fold (fold, view,
// renderer sync, request) at both sizes, and Chat and Anthropic
// serialization times.
import { isDeepStrictEqual } from 'node:util'
import { setFlagsFromString } from 'node:v8'
import { runInNewContext } from 'node:vm'
import { Context } from '@dsh/context'
import { requestMessages, requestStats } from '@dsh/driver-openai/testing/requests'
import { type Session, type StoredSessionEvent, sessionStorePlugin } from '@dsh/session'
import {
  applyContextEvent,
  type ChatMessage,
  type ChatRequest,
  type ContextMessage,
  chatMessage,
  chatRenderer,
  contextView,
  type IncrementalRenderer,
  renderAnthropic,
  renderChat,
  renderResponses,
  type SessionContextService,
  type SessionContextState,
  sessionContextPlugin,
  sessionContextUnit,
} from '@dsh/session-context'
import { sessionProjectionsPlugin } from '@dsh/session-projection'
import { appendStep, beginSession, CHUNK_BYTES, EVENTS_PER_STEP, MODEL, RESULT_BYTES, SYSTEM } from '../fixtures/context-step.js'
import { buildMessages } from '../fixtures/whole-log-chat.js'
import { type BenchDefinition, median } from '../harness.js'

const SMALL = 50
const LARGE = 5_000
const RENDER = { model: MODEL, reasoningContent: true } as const
/** A fresh full render with the system prompt first (what every subject body is checked against). */
const RENDER_WITH_SYSTEM = { ...RENDER, system: SYSTEM } as const
/** Kept messages a step may compare: one chunk. */
const CHUNK = 64
/** Subject steps per sample (each appended untimed, then its request built timed). */
const SUBJECT_STEPS = 20
/** Repetitions of a one-step measurement per sample (they take microseconds). */
const STEP_REPEATS = 200

/** A full garbage collection before each timed section, so one side's garbage is not collected in the other's timing. */
const gc: () => void = (() => {
  setFlagsFromString('--expose-gc')
  return runInNewContext('gc') as () => void
})()

/** A session at the step boundary: the state before its last step, that step's events, and the state after. */
interface Sized {
  readonly session: Session
  readonly steps: number
  readonly before: SessionContextState
  readonly last: readonly StoredSessionEvent[]
  readonly after: SessionContextState
  /** The Chat renderer kept for the one-step measurement (reset to `before` before each repetition). */
  readonly renderer: IncrementalRenderer<ChatRequest>
}

let ctx: Context | undefined
let service: SessionContextService | undefined
let small: Sized | undefined
let large: Sized | undefined
/** The live session the subject grows step by step (the driver keeps its renderer per session). */
let live: { session: Session; next: number } | undefined
const checks = { samples: 0, equalsFullRender: 0, equalsWholeLogRebuild: 0, steps: 0, stepsOfNewMessagesOnly: 0 }

/** How the driver builds this session's requests: from the `sessionContext` service, the system prompt first. */
function driverOptions() {
  return { context: service!, system: SYSTEM }
}
const figures = {
  newWorkUs: { [SMALL]: [] as number[], [LARGE]: [] as number[] },
  wholeStepUs: { [SMALL]: [] as number[], [LARGE]: [] as number[] },
}

async function sized(steps: number): Promise<Sized> {
  const session = ctx!.require('sessions').create()
  beginSession(session)
  for (let i = 0; i < steps; i++) appendStep(session, i)
  const events = session.events
  const cut = events.length - EVENTS_PER_STEP
  let before = sessionContextUnit.init()
  for (let i = 0; i < cut; i++) before = applyContextEvent(before, events[i] as StoredSessionEvent)
  const last = events.slice(cut)
  let after = before
  for (const event of last) after = applyContextEvent(after, event)
  if (!isDeepStrictEqual(after, await service!.stateOf(session)))
    throw new Error('context-step: the detached fold differs from the live unit')
  const renderer = chatRenderer(RENDER)
  renderer.render(contextView(before))
  return { session, steps, before, last, after, renderer }
}

/** The messages a fold pushed after `seq` (walking back from the end of the last chunk). */
function pushedAfter(state: SessionContextState, seq: number): ContextMessage[] {
  const out: ContextMessage[] = []
  for (let c = state.chunks.length - 1; c >= 0; c--) {
    const chunk = state.chunks[c] as readonly ContextMessage[]
    for (let m = chunk.length - 1; m >= 0; m--) {
      const message = chunk[m] as ContextMessage
      if (message.seq <= seq) return out.reverse()
      out.push(message)
    }
  }
  return out.reverse()
}

/**
 * (a) The new work of one step, in microseconds: fold the step's events into
 * the state before it and render the messages they made. Also one whole
 * step of a detached fold: the fold, the view, a kept renderer reset to the
 * step before (its sync) and the request.
 */
function oneStep(s: Sized): void {
  const firstSeq = (s.last[0] as StoredSessionEvent).seq
  let newWork = 0
  let whole = 0
  let rendered = 0
  const previous = contextView(s.before)
  gc()
  // Two loops, so the garbage of the whole step (a view and a request the size of the context) is not collected inside the new work's timing.
  for (let r = 0; r < STEP_REPEATS; r++) {
    const start = process.hrtime.bigint()
    let state = s.before
    for (const event of s.last) state = applyContextEvent(state, event)
    const counts = {}
    for (const message of pushedAfter(state, firstSeq - 1)) rendered += chatMessage(message, undefined, counts, true).length
    newWork += Number(process.hrtime.bigint() - start)
  }
  gc()
  for (let r = 0; r < STEP_REPEATS; r++) {
    s.renderer.render(previous)
    const start = process.hrtime.bigint()
    let state = s.before
    for (const event of s.last) state = applyContextEvent(state, event)
    const body = s.renderer.render(contextView(state)).body
    whole += Number(process.hrtime.bigint() - start)
    rendered += body.messages.length
  }
  if (rendered === 0) throw new Error('context-step: a step rendered nothing')
  figures.newWorkUs[s.steps as 50 | 5000].push(newWork / STEP_REPEATS / 1e3)
  figures.wholeStepUs[s.steps as 50 | 5000].push(whole / STEP_REPEATS / 1e3)
}

/** The system message, then the context's (what the whole-log rebuild and a fresh full render are compared in). */
function withSystem(messages: readonly ChatMessage[]): ChatMessage[] {
  return [{ role: 'system', content: SYSTEM }, ...messages]
}

/**
 * (b) subject: the driver's own request building (`requestMessages`); the
 * median of a sample's steps (ms per request). Each step's counts are
 * checked (two messages rendered, at most a chunk compared, no rebuild);
 * (c) checks the sample's last body against a fresh full render and the
 * whole-log rebuild.
 */
async function incremental(): Promise<number> {
  const l = live!
  const samples: number[] = []
  let body: readonly ChatMessage[] = []
  gc()
  for (let k = 0; k < SUBJECT_STEPS; k++) {
    appendStep(l.session, l.next++)
    const before = requestStats(l.session).chat
    const start = process.hrtime.bigint()
    body = await requestMessages(l.session, driverOptions())
    samples.push(Number(process.hrtime.bigint() - start) / 1e6)
    const after = requestStats(l.session).chat
    checks.steps++
    if (after.rendered - before.rendered === 2 && after.compared - before.compared <= CHUNK && after.rebuilds === before.rebuilds)
      checks.stepsOfNewMessagesOnly++
  }
  const context = await service!.contextOf(l.session)
  checks.samples++
  if (isDeepStrictEqual(body, renderChat(context, RENDER_WITH_SYSTEM).body.messages)) checks.equalsFullRender++
  if (isDeepStrictEqual(body, buildMessages(l.session.events, { system: SYSTEM }))) checks.equalsWholeLogRebuild++
  // (a) rides along: one-step figures at both sizes, alternated with the rest.
  oneStep(small!)
  oneStep(large!)
  return median(samples)
}

/** (b) baseline: the whole-log rebuild of the live session; the median of 3 (ms per request). */
function wholeLog(): number {
  const l = live!
  const samples: number[] = []
  let count = 0
  gc()
  for (let k = 0; k < 3; k++) {
    const start = process.hrtime.bigint()
    count += buildMessages(l.session.events, { system: SYSTEM }).length
    samples.push(Number(process.hrtime.bigint() - start) / 1e6)
  }
  if (count === 0) throw new Error('context-step: the rebuild built nothing')
  return median(samples)
}

/** (d) Bytes of a Responses request continuing the previous response (the step before's `step/end`). */
function responsesBytes(s: Sized): number {
  const context = contextView(s.after)
  const stepEnd = s.last.find((event) => event.type === 'step/end') as StoredSessionEvent
  const body = renderResponses(context, { model: MODEL, previousResponse: { id: `resp_${s.steps}`, throughSeq: stepEnd.seq } }).body
  if (body.previous_response_id !== `resp_${s.steps}`) throw new Error('context-step: the previous response was not usable')
  return Buffer.byteLength(JSON.stringify(body))
}

/** (e) Milliseconds to serialize a Chat and an Anthropic body of the same context (median of 5). */
function serialization(s: Sized): { chatMs: number; anthropicMs: number; chatBytes: number; anthropicBytes: number } {
  const context = contextView(s.after)
  const chat = { ...renderChat(context, RENDER).body, messages: withSystem(renderChat(context, RENDER).body.messages) }
  const anthropic = renderAnthropic(context, { model: MODEL }).body
  const timeOf = (body: unknown): { ms: number; bytes: number } => {
    const samples: number[] = []
    let bytes = 0
    for (let i = 0; i < 5; i++) {
      const start = process.hrtime.bigint()
      bytes = JSON.stringify(body).length
      samples.push(Number(process.hrtime.bigint() - start) / 1e6)
    }
    return { ms: median(samples), bytes }
  }
  const c = timeOf(chat)
  const a = timeOf(anthropic)
  return { chatMs: c.ms, anthropicMs: a.ms, chatBytes: c.bytes, anthropicBytes: a.bytes }
}

const round = (n: number, digits = 2): number => Number(n.toFixed(digits))

const definition: BenchDefinition = {
  name: 'context-step',
  unit: 'ms',
  target: 20,
  compare: 'ge',
  ratio: 'baseline/subject',
  repeats: 7,
  async setup() {
    ctx = new Context()
    await ctx.activate(sessionStorePlugin())
    await ctx.activate(sessionProjectionsPlugin())
    await ctx.activate(sessionContextPlugin())
    service = ctx.require('sessionContext')
    small = await sized(SMALL)
    large = await sized(LARGE)
    // The subject's session starts at step 5,000 and grows by its own steps; the first request makes the driver's kept renderer.
    const session = large.session
    await requestMessages(session, driverOptions())
    live = { session, next: LARGE }
  },
  async teardown() {
    await ctx?.dispose()
    ctx = undefined
  },
  baseline: { label: 'whole-log rebuild (the previous driver algorithm) at step 5,000', run: () => wholeLog() },
  subject: { label: "the OpenAI driver's request building (requestMessages) at step 5,000", run: () => incremental() },
  extra() {
    const newWork = { small: median(figures.newWorkUs[SMALL]), large: median(figures.newWorkUs[LARGE]) }
    const whole = { small: median(figures.wholeStepUs[SMALL]), large: median(figures.wholeStepUs[LARGE]) }
    const bytes = { small: responsesBytes(small!), large: responsesBytes(large!) }
    const ser = { small: serialization(small!), large: serialization(large!) }
    return {
      steps: { small: SMALL, large: LARGE },
      eventsPerStep: EVENTS_PER_STEP,
      chunkBytes: CHUNK_BYTES,
      toolResultBytes: RESULT_BYTES,
      stepsAtEnd: live!.next,
      ratioDefinition:
        'whole-log rebuild median / incremental build median (ms per request, no serialization; each sample the median of its requests, a full GC before each timed section)',
      newWorkOfOneStepUs: { small: round(newWork.small), large: round(newWork.large), ratio: round(newWork.large / newWork.small) },
      wholeDetachedStepUs: { small: round(whole.small), large: round(whole.large), ratio: round(whole.large / whole.small) },
      responsesBytesWithPreviousResponse: { small: bytes.small, large: bytes.large, ratio: round(bytes.large / bytes.small) },
      serialization: {
        chatMs: { small: round(ser.small.chatMs, 3), large: round(ser.large.chatMs, 3) },
        anthropicMs: { small: round(ser.small.anthropicMs, 3), large: round(ser.large.anthropicMs, 3) },
        chatBytes: { small: ser.small.chatBytes, large: ser.large.chatBytes },
        anthropicBytes: { small: ser.small.anthropicBytes, large: ser.large.anthropicBytes },
      },
      checks,
    }
  },
  requirements() {
    const newWork = median(figures.newWorkUs[LARGE]) / median(figures.newWorkUs[SMALL])
    return {
      newWorkOfOneStepAt5000Within2xOf50: newWork <= 2,
      everyIncrementalBodyEqualsAFreshFullRender: checks.samples > 0 && checks.equalsFullRender === checks.samples,
      everyIncrementalBodyEqualsTheWholeLogRebuild: checks.samples > 0 && checks.equalsWholeLogRebuild === checks.samples,
      everySubjectStepRendersItsNewMessagesOnly: checks.steps > 0 && checks.stepsOfNewMessagesOnly === checks.steps,
      responsesBytesAt5000Within2xOf50: responsesBytes(large!) <= 2 * responsesBytes(small!),
    }
  },
}

export default definition
