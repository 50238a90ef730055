import type { StoredSessionEvent } from '@dsh/session'
import type { ProjectionInitContext, SessionProjectionUnit } from '@dsh/session-projection'
import {
  attributionOf,
  badAttribution,
  durationOf,
  isObject,
  isTokenChunk,
  type Json,
  messageAttribution,
  messageUsage,
  readUsage,
  timeOf,
  turnOf,
  unwrapWholeLine,
} from './shapes.js'
import { sessionStatsStateSchema } from './state-schema.js'
import {
  type Attribution,
  type ModelUsage,
  NO_TOKENS,
  type OpenStep,
  type SessionStats,
  type SessionStatsState,
  SKIP_REASONS,
  type SkipReason,
  TOKEN_KINDS,
  type TokenCounts,
} from './stats-types.js'

export const SESSION_STATS_KEY = 'sessionStats'
/** Moves whenever the fold or the state changes: a checkpoint row of another version is ignored and the log refolded. */
export const SESSION_STATS_STATE_VERSION = 2

declare module '@dsh/session-projection' {
  interface SessionProjectionStateMap {
    sessionStats: SessionStatsState
  }
  interface SessionProjectionMap {
    sessionStats: SessionStats
  }
}

/** Tool calls awaiting a result that the state keeps; the oldest beyond it are dropped as unanswered. */
export const MAX_PENDING_CALLS = 256

type Draft = { -readonly [K in keyof SessionStatsState]: SessionStatsState[K] }

const UNKNOWN: Attribution = Object.freeze({ provider: null, model: null })
const NO_SKIPS = Object.freeze(Object.fromEntries(SKIP_REASONS.map((reason) => [reason, 0]))) as SessionStatsState['skipped']

function initState(context?: ProjectionInitContext): SessionStatsState {
  return {
    from: context?.inheritedEventCount ?? 0,
    turns: 0,
    steps: 0,
    turnMs: 0,
    modelMs: 0,
    toolMs: 0,
    firstTokenCount: 0,
    firstTokenMs: 0,
    byModel: [],
    tools: [],
    toolErrors: 0,
    compactions: 0,
    skipped: NO_SKIPS,
    turn: null,
    step: null,
    segment: null,
    pending: [],
  }
}

function skip(next: Draft, reason: SkipReason, n = 1): void {
  next.skipped = { ...next.skipped, [reason]: next.skipped[reason] + n }
}

function addTokens(a: TokenCounts, b: TokenCounts, sign: 1 | -1): TokenCounts {
  const out = { ...a }
  for (const kind of TOKEN_KINDS) out[kind] = Math.max(0, a[kind] + sign * b[kind])
  return out
}

/** Updates the bucket of `who` (created when missing). */
function bucket(next: Draft, who: Attribution, change: (usage: ModelUsage) => ModelUsage): void {
  const at = next.byModel.findIndex((usage) => usage.provider === who.provider && usage.model === who.model)
  const current =
    at >= 0
      ? (next.byModel[at] as ModelUsage)
      : { provider: who.provider, model: who.model, calls: 0, callsWithoutUsage: 0, tokens: NO_TOKENS }
  const updated = change(current)
  next.byModel = at >= 0 ? next.byModel.map((usage, i) => (i === at ? updated : usage)) : [...next.byModel, updated]
}

function addDuration(next: Draft, field: 'turnMs' | 'modelMs' | 'toolMs', start: number | null, end: number | null): number {
  const ms = durationOf(start, end)
  if (ms === null) {
    skip(next, 'invalid-time')
    return 0
  }
  next[field] += ms
  return ms
}

/** Closes the open step as one model call; `own` is the step's own usage, which replaces what its messages reported. */
function closeStep(next: Draft, own: TokenCounts | null): void {
  const step = next.step as OpenStep
  const who = step.named ?? step.last ?? UNKNOWN
  if (own !== null) {
    for (const counted of step.counted)
      bucket(next, counted, (usage) => ({ ...usage, tokens: addTokens(usage.tokens, counted.tokens, -1) }))
    bucket(next, who, (usage) => ({ ...usage, tokens: addTokens(usage.tokens, own, 1) }))
  }
  const reported = own !== null || step.counted.length > 0
  bucket(next, who, (usage) => ({ ...usage, calls: usage.calls + 1, callsWithoutUsage: usage.callsWithoutUsage + (reported ? 0 : 1) }))
  next.step = null
}

function openSegment(next: Draft, event: StoredSessionEvent): void {
  next.segment = { start: timeOf(event), firstToken: false }
}

function turnStart(state: SessionStatsState, event: StoredSessionEvent): SessionStatsState {
  const turn = turnOf(event.data)
  const next: Draft = { ...state }
  if (turn === null) {
    skip(next, 'invalid-event')
    return next
  }
  if (state.turn !== null) skip(next, 'unended-turn')
  if (state.step !== null) closeStep(next, null)
  next.turns++
  next.turn = { turn, start: timeOf(event) }
  openSegment(next, event)
  return next
}

function turnEnd(state: SessionStatsState, event: StoredSessionEvent): SessionStatsState {
  const turn = turnOf(event.data)
  const next: Draft = { ...state }
  if (state.turn === null || turn === null || state.turn.turn !== turn) skip(next, 'unmatched-turn-end')
  else addDuration(next, 'turnMs', state.turn.start, timeOf(event))
  if (state.step !== null) closeStep(next, null)
  if (state.pending.length > 0) skip(next, 'unanswered-tool-call', state.pending.length)
  next.turn = null
  next.segment = null
  next.pending = []
  return next
}

function stepStart(state: SessionStatsState, event: StoredSessionEvent): SessionStatsState {
  const next: Draft = { ...state }
  const data = isObject(event.data) ? event.data : undefined
  if (data === undefined || badAttribution(data)) skip(next, 'invalid-event')
  if (state.step !== null) closeStep(next, null)
  next.step = { start: timeOf(event), named: data === undefined ? null : attributionOf(data), last: null, counted: [] }
  openSegment(next, event)
  return next
}

function stepEnd(state: SessionStatsState, event: StoredSessionEvent): SessionStatsState {
  const next: Draft = { ...state }
  const verdict = isObject(event.data) ? readUsage(event.data.usage) : readUsage(undefined)
  if (!isObject(event.data)) skip(next, 'invalid-event')
  if (verdict.kind === 'invalid') skip(next, 'invalid-usage')
  const own = verdict.kind === 'valid' ? verdict.tokens : null
  // A step/end without its start (the suffix began inside the step) is still one call.
  if (next.step === null) next.step = { start: null, named: null, last: null, counted: [] }
  closeStep(next, own)
  next.steps++
  next.segment = null
  return next
}

function assistantMessage(state: SessionStatsState, event: StoredSessionEvent): SessionStatsState {
  const next: Draft = { ...state }
  if (!isObject(event.data)) {
    skip(next, 'invalid-event')
    return next
  }
  const data: Json = event.data
  const verdict = messageUsage(data)
  if (verdict.kind === 'invalid') skip(next, 'invalid-usage')
  if (state.segment !== null) {
    addDuration(next, 'modelMs', state.segment.start, timeOf(event))
    next.segment = null
  }
  const named = messageAttribution(data)
  const step = state.step
  if (step !== null) {
    const who = step.named ?? named ?? UNKNOWN
    const counted =
      verdict.kind === 'valid'
        ? [...step.counted, { provider: who.provider, model: who.model, tokens: verdict.tokens }]
        : (step.counted as OpenStep['counted'])
    if (verdict.kind === 'valid') bucket(next, who, (usage) => ({ ...usage, tokens: addTokens(usage.tokens, verdict.tokens, 1) }))
    next.step = { ...step, last: named ?? step.last, counted }
    return next
  }
  const who = named ?? UNKNOWN
  bucket(next, who, (usage) => ({
    ...usage,
    calls: usage.calls + 1,
    callsWithoutUsage: usage.callsWithoutUsage + (verdict.kind === 'valid' ? 0 : 1),
    tokens: verdict.kind === 'valid' ? addTokens(usage.tokens, verdict.tokens, 1) : usage.tokens,
  }))
  return next
}

function chunk(state: SessionStatsState, event: StoredSessionEvent): SessionStatsState {
  const segment = state.segment
  if (segment === null || segment.firstToken || !isTokenChunk(event)) return state
  const next: Draft = { ...state, segment: { ...segment, firstToken: true } }
  const ms = durationOf(segment.start, timeOf(event))
  if (ms === null) skip(next, 'invalid-time')
  else {
    next.firstTokenCount++
    next.firstTokenMs += ms
  }
  return next
}

function toolCall(state: SessionStatsState, event: StoredSessionEvent): SessionStatsState {
  const next: Draft = { ...state }
  const data = event.data
  if (!isObject(data) || typeof data.callId !== 'string' || typeof data.name !== 'string') {
    skip(next, 'invalid-event')
    return next
  }
  const { callId, name } = data
  if (state.pending.some((call) => call.callId === callId)) skip(next, 'invalid-event')
  const pending = [...state.pending.filter((call) => call.callId !== callId), { callId, name, start: timeOf(event) }]
  // A bound on the state: calls that never get a result outside any turn cannot pile up.
  if (pending.length > MAX_PENDING_CALLS) skip(next, 'unanswered-tool-call', pending.splice(0, pending.length - MAX_PENDING_CALLS).length)
  next.pending = pending
  tool(next, name, (usage) => ({ ...usage, calls: usage.calls + 1 }))
  return next
}

function tool(next: Draft, name: string, change: (usage: SessionStats['tools'][number]) => SessionStats['tools'][number]): void {
  const at = next.tools.findIndex((usage) => usage.name === name)
  const updated = change(at >= 0 ? (next.tools[at] as SessionStats['tools'][number]) : { name, calls: 0, errors: 0, ms: 0 })
  next.tools = at >= 0 ? next.tools.map((usage, i) => (i === at ? updated : usage)) : [...next.tools, updated]
}

function toolResult(state: SessionStatsState, event: StoredSessionEvent): SessionStatsState {
  const next: Draft = { ...state }
  const data = event.data
  if (!isObject(data) || typeof data.callId !== 'string') {
    skip(next, 'invalid-event')
    return next
  }
  const error = data.isError === true
  if (error) next.toolErrors++
  const call = state.pending.find((pending) => pending.callId === data.callId)
  if (call === undefined) {
    skip(next, 'unmatched-tool-result')
    return next
  }
  next.pending = state.pending.filter((pending) => pending !== call)
  const ms = addDuration(next, 'toolMs', call.start, timeOf(event))
  tool(next, call.name, (usage) => ({ ...usage, errors: usage.errors + (error ? 1 : 0), ms: usage.ms + ms }))
  // The model is called again once the results are in: a new model segment starts.
  if (state.turn !== null || state.step !== null) openSegment(next, event)
  return next
}

function userMessage(state: SessionStatsState, event: StoredSessionEvent): SessionStatsState {
  if (state.turn === null && state.step === null) return state
  const next: Draft = { ...state }
  openSegment(next, event)
  return next
}

/** A summarizing compaction is a model call when it reports usage (a template summary reports none). */
function compactionSummary(state: SessionStatsState, event: StoredSessionEvent): SessionStatsState {
  const next: Draft = { ...state }
  if (!isObject(event.data)) {
    skip(next, 'invalid-event')
    return next
  }
  next.compactions++
  const verdict = readUsage(event.data.usage)
  if (verdict.kind === 'invalid') skip(next, 'invalid-usage')
  if (verdict.kind === 'valid') {
    bucket(next, attributionOf(event.data) ?? UNKNOWN, (usage) => ({
      ...usage,
      calls: usage.calls + 1,
      tokens: addTokens(usage.tokens, verdict.tokens, 1),
    }))
  }
  return next
}

function apply(state: SessionStatsState, event: StoredSessionEvent): SessionStatsState {
  // The inherited prefix is the parent's work: a fork counts only its own suffix.
  if (!(event.seq >= state.from)) return state
  switch (event.type) {
    case 'turn/start':
      return turnStart(state, event)
    case 'turn/end':
      return turnEnd(state, event)
    case 'step/start':
      return stepStart(state, event)
    case 'step/end':
      return stepEnd(state, event)
    case 'user/message':
      return userMessage(state, event)
    case 'assistant/chunk':
    case 'v0/assistant/chunk':
      return chunk(state, event)
    case 'assistant/message':
      return assistantMessage(state, event)
    case 'tool/call':
      return toolCall(state, event)
    case 'tool/result':
      return toolResult(state, event)
    case 'compaction/summary':
      return compactionSummary(state, event)
    case 'v0/event': {
      const inner = unwrapWholeLine(event)
      return inner === undefined ? state : apply(state, inner)
    }
    default:
      return state
  }
}

/**
 * The models as the view shows them. An open step is a model call whose
 * usage is not known yet: one still running, or one cut off (a crash leaves
 * `step/start` without its `step/end`). It counts as closing it without usage
 * would: one call, without usage unless its messages reported some. The state
 * keeps the step open, so a later `step/end` still closes it with its own usage.
 */
function viewModels(state: SessionStatsState): readonly ModelUsage[] {
  if (state.step === null) return state.byModel
  const closed: Draft = { ...state }
  closeStep(closed, null)
  return closed.byModel
}

function view(state: SessionStatsState): SessionStats {
  const byModel = viewModels(state)
  let tokens = NO_TOKENS
  for (const usage of byModel) tokens = addTokens(tokens, usage.tokens, 1)
  return {
    inheritedEventCount: state.from,
    turns: state.turns,
    steps: state.steps,
    turnMs: state.turnMs,
    modelMs: state.modelMs,
    toolMs: state.toolMs,
    firstToken: {
      count: state.firstTokenCount,
      totalMs: state.firstTokenMs,
      meanMs: state.firstTokenCount === 0 ? null : state.firstTokenMs / state.firstTokenCount,
    },
    tokens,
    byModel,
    tools: state.tools,
    toolCalls: state.tools.reduce((sum, usage) => sum + usage.calls, 0),
    toolErrors: state.toolErrors,
    compactions: state.compactions,
    skipped: state.skipped,
  }
}

/**
 * The `sessionStats` unit: turns, steps, wall times, first-token latency,
 * tokens by model and kind, tool calls by name and tool errors, folded from
 * the session's own suffix. Pure and synchronous, never throws; malformed
 * inputs are counted in `skipped`.
 */
export const sessionStatsUnit: SessionProjectionUnit<'sessionStats'> = Object.freeze({
  key: SESSION_STATS_KEY,
  stateVersion: SESSION_STATS_STATE_VERSION,
  init: initState,
  apply,
  view,
  schema: sessionStatsStateSchema,
})
