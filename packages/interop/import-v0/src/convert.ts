import {
  type JsonValue,
  parseSessionHeader,
  SESSION_HEADER_VERSION,
  type SessionHeader,
  SessionLogOffset,
  SessionSeq,
  type StoredSessionEvent,
  type TurnEndReason,
} from '@dsh/session'
import type { AppendedEvent } from '@dsh/session-persistence'
import { type RowMaker, RowMember, type RowMemberMaker, v0RowMember } from './chunk-rows.js'
import { ImportV0Error } from './errors.js'
import type { EventMaker } from './reader.js'
import type { V0Event, V0Header } from './v0-types.js'

/**
 * Mapping between v0 events and dsh events — the one place that knows both
 * vocabularies. Every v0 event becomes exactly one dsh event with the same
 * seq and time, in one of three forms:
 *
 * 1. **Converted** — the core types whose v0 shape is recognised exactly
 *    (`turn/start`, `turn/end`, `user/message`, `assistant/chunk` text deltas,
 *    `assistant/message`, `tool/call`, `tool/result`) get our shape, plus a
 *    `v0` field holding only what our shape does not carry (the step, the
 *    message ids and sources, `{kind}` reasons, surface fields…). The largest
 *    string (the text, the tool result content) is stored once, on our side.
 * 2. **Kept under its own name** — every other type (`step/*`, `request/*`,
 *    `session/end-seed`, `compaction/*`, `todo/write`, `subagent/descriptor`,
 *    unknown types) with its data verbatim. A core-named event whose shape is
 *    not recognised (reasoning and tool-call deltas, block markers, newer
 *    shapes) is kept verbatim as `v0/<type>`.
 * 3. **Whole line** — an event whose envelope carries surface fields but is
 *    not converted, or whose keys are not in the harness's order, is kept as
 *    `v0/event` with the entire line object as its data.
 *
 * The types dsh's subagent runtime writes and the harness does not know
 * (`DSH_IGNORABLE_TYPES`: a child's `subagent/options` and its lifecycle
 * events) leave as lines marked `ignorable`: the harness refuses a log with
 * an unknown type unless the line says it may skip it, and skipping them
 * changes nothing it reconstructs. Such a line with that mark and no other
 * extra comes back as the dsh event; one without the mark (no export writes
 * it) is kept as `v0/<type>`, so it too exports as it was read.
 *
 * Invariant: `toV0(toDsh(e))` serialises to exactly the line `e` was parsed
 * from (the harness writes lines with `JSON.stringify`), so export restores
 * every line byte for byte.
 */

export const V0_RESIDUAL_KEY = 'v0'
export const V0_EVENT_TYPE = 'v0/event'
export const V0_PREFIX = 'v0/'

/** Event types dsh writes that the harness does not know; exported with `ignorable: true`. */
export const DSH_IGNORABLE_TYPES: ReadonlySet<string> = new Set([
  'subagent/options',
  'subagent/start',
  'subagent/end',
  'subagent/queued',
  'subagent/notice',
])

type Json = Record<string, unknown>
type Residual = Record<string, unknown>
interface Converted {
  readonly data: Json
  readonly residual: Residual
}

const ENVELOPE = ['type', 'seq', 'time', 'data']
const EXTRAS = ['ignorable', 'sourceEventSeqs', 'surfaceOp'] as const

function isObject(value: unknown): value is Json {
  return typeof value === 'object' && value !== null && !Array.isArray(value)
}

function sameKeys(value: Json, keys: readonly string[]): boolean {
  const own = Object.keys(value)
  return own.length === keys.length && keys.every((key) => Object.hasOwn(value, key))
}

function inOrder(value: Json, keys: readonly string[]): boolean {
  const own = Object.keys(value)
  return own.length === keys.length && own.every((key, i) => key === keys[i])
}

/** The extras of an envelope in the harness's order, or `undefined` when the envelope is not `{type, seq, time, data, extras…}`. */
function envelopeExtras(event: V0Event): Residual | undefined {
  const keys = Object.keys(event)
  for (let i = 0; i < ENVELOPE.length; i++) if (keys[i] !== ENVELOPE[i]) return undefined
  const extras: Residual = {}
  let next = 0
  for (const key of keys.slice(ENVELOPE.length)) {
    const at = EXTRAS.indexOf(key as (typeof EXTRAS)[number], next)
    if (at < 0) return undefined
    extras[key] = (event as unknown as Json)[key]
    next = at + 1
  }
  return extras
}

function textOf(blocks: readonly unknown[]): string {
  let text = ''
  for (const block of blocks) if (isObject(block) && block.type === 'text' && typeof block.text === 'string') text += block.text
  return text
}

/** The index of the only text block when it is exactly `{type:'text', text}`, else -1. */
function soleTextBlock(blocks: readonly unknown[]): number {
  let found = -1
  for (let i = 0; i < blocks.length; i++) {
    const block = blocks[i]
    if (isObject(block) && block.type === 'text') {
      if (found >= 0 || !inOrder(block, ['type', 'text']) || typeof block.text !== 'string') return -1
      found = i
    }
  }
  return found
}

function withHole(blocks: readonly unknown[], at: number): unknown[] {
  return blocks.map((block, i) => (i === at ? null : block))
}

function fillHole(blocks: readonly unknown[], at: unknown, text: string): unknown[] {
  return typeof at === 'number' ? blocks.map((block, i) => (i === at ? { type: 'text', text } : block)) : [...blocks]
}

/** Data keys in the converter's canonical order, or the original order when it differs (kept in the residual). */
function orderResidual(data: Json, canonical: readonly string[], residual: Residual): void {
  const present = canonical.filter((key) => Object.hasOwn(data, key))
  if (!inOrder(data, present)) residual.order = Object.keys(data)
}

const TURN_END_KINDS: Record<string, TurnEndReason> = {
  completed: 'completed',
  'max-tokens': 'completed',
  aborted: 'cancelled',
  blocked: 'cancelled',
  interrupted: 'interrupted',
  error: 'error',
}

const CONVERTERS: Record<string, (data: unknown) => Converted | undefined> = {
  'turn/start'(data) {
    if (!isObject(data) || !sameKeys(data, ['turn']) || typeof data.turn !== 'number') return undefined
    return { data: { turn: data.turn }, residual: {} }
  },
  'turn/end'(data) {
    if (!isObject(data) || !sameKeys(data, ['turn', 'reason']) || typeof data.turn !== 'number') return undefined
    const reason = data.reason
    if (!isObject(reason) || typeof reason.kind !== 'string') return undefined
    const residual: Residual = { reason }
    orderResidual(data, ['turn', 'reason'], residual)
    return { data: { turn: data.turn, reason: TURN_END_KINDS[reason.kind] ?? 'error' }, residual }
  },
  'user/message'(data) {
    if (!isObject(data) || !sameKeys(data, ['id', 'role', 'content', 'source']) || data.role !== 'user' || !Array.isArray(data.content))
      return undefined
    const residual: Residual = { id: data.id, source: data.source }
    const sole = soleTextBlock(data.content)
    if (sole < 0 || data.content.length !== 1) residual.content = data.content
    orderResidual(data, ['id', 'role', 'content', 'source'], residual)
    return { data: { text: textOf(data.content) }, residual }
  },
  'assistant/chunk'(data) {
    if (!isObject(data) || !sameKeys(data, ['turn', 'step', 'chunk']) || typeof data.turn !== 'number') return undefined
    const chunk = data.chunk
    if (!isObject(chunk) || !inOrder(chunk, ['type', 'index', 'text']) || chunk.type !== 'text-delta') return undefined
    if (typeof chunk.index !== 'number' || typeof chunk.text !== 'string') return undefined
    // Step 0 is what a chunk without a residual restores to (the native shape): most chunks carry no residual at all.
    const residual: Residual = data.step === 0 ? {} : { step: data.step }
    orderResidual(data, ['turn', 'step', 'chunk'], residual)
    return { data: { turn: data.turn, index: chunk.index, delta: chunk.text }, residual }
  },
  'assistant/message'(data) {
    if (!isObject(data) || typeof data.turn !== 'number') return undefined
    if (!sameKeys(data, Object.hasOwn(data, 'usage') ? ['turn', 'step', 'message', 'usage'] : ['turn', 'step', 'message'])) return undefined
    const message = data.message
    if (!isObject(message) || !Array.isArray(message.content) || message.role !== 'assistant') return undefined
    // The sole text block's text moves to our side, leaving a null hole whose index the residual names.
    const sole = soleTextBlock(message.content)
    const text = textOf(message.content)
    const residual: Residual = { step: data.step, message: sole < 0 ? message : { ...message, content: withHole(message.content, sole) } }
    if (sole >= 0) residual.textAt = sole
    const converted: Json = { turn: data.turn, text }
    if (Object.hasOwn(data, 'usage')) {
      residual.usage = data.usage
      const usage = data.usage
      if (isObject(usage) && typeof usage.inputTokens === 'number' && typeof usage.outputTokens === 'number') {
        converted.usage = { input: usage.inputTokens, output: usage.outputTokens }
      }
    }
    orderResidual(data, ['turn', 'step', 'message', 'usage'], residual)
    return { data: converted, residual }
  },
  'tool/call'(data) {
    if (!isObject(data) || !sameKeys(data, ['turn', 'step', 'callId', 'name', 'arguments'])) return undefined
    if (
      typeof data.turn !== 'number' ||
      typeof data.callId !== 'string' ||
      typeof data.name !== 'string' ||
      typeof data.arguments !== 'string'
    )
      return undefined
    const residual: Residual = { step: data.step }
    let args: unknown = data.arguments
    try {
      const parsed: unknown = JSON.parse(data.arguments)
      if (JSON.stringify(parsed) === data.arguments) args = parsed
      else residual.rawArguments = true
    } catch {
      residual.rawArguments = true
    }
    orderResidual(data, ['turn', 'step', 'callId', 'name', 'arguments'], residual)
    return { data: { turn: data.turn, callId: data.callId, name: data.name, arguments: args }, residual }
  },
  'tool/result'(data) {
    if (!isObject(data) || typeof data.turn !== 'number') return undefined
    const keys = ['turn', 'step', 'message', 'error', 'meta'].filter(
      (key) => key === 'turn' || key === 'step' || key === 'message' || Object.hasOwn(data, key),
    )
    if (!sameKeys(data, keys)) return undefined
    const message = data.message
    if (!isObject(message) || message.role !== 'user' || !Array.isArray(message.content) || message.content.length !== 1) return undefined
    const block = message.content[0]
    if (!isObject(block) || block.type !== 'tool-result' || typeof block.toolCallId !== 'string' || !Object.hasOwn(block, 'content'))
      return undefined
    if (block.isError !== undefined && typeof block.isError !== 'boolean') return undefined
    const residual: Residual = { step: data.step, message: { ...message, content: [{ ...block, content: null }] } }
    if (Object.hasOwn(data, 'error')) residual.error = data.error
    if (Object.hasOwn(data, 'meta')) residual.meta = data.meta
    orderResidual(data, ['turn', 'step', 'message', 'error', 'meta'], residual)
    const converted: Json = { turn: data.turn, callId: block.toolCallId, content: block.content }
    if (typeof block.isError === 'boolean') converted.isError = block.isError
    return { data: converted, residual }
  },
}

/** The core types this package converts (when their v0 shape is recognised). */
export const CONVERTED_TYPES: readonly string[] = Object.keys(CONVERTERS)

/**
 * One v0 event as a dsh event (same seq and time), deep-frozen like the
 * events a Session appends — so persistence need not copy it to validate it.
 */
export function toDshEvent(event: V0Event): StoredSessionEvent {
  return frozen(convertEvent(event))
}

/**
 * A packed-row member's dsh event, made from the row directly: equal to
 * `toDshEvent` of its v0 member, without building that member (and its
 * chunk) first — most events of a harness log are such members.
 */
export const dshRowMember: RowMemberMaker<StoredSessionEvent> = (type, seq, time, data, delta) => {
  const { turn, step, index } = data as { turn: number; step: number; index: number }
  if (type !== 'text-chunks' || Object.is(turn, -0) || Object.is(step, -0) || Object.is(index, -0)) {
    return toDshEvent(v0RowMember(type, seq, time, data, delta))
  }
  const converted = step === 0 ? { turn, index, delta } : { turn, index, delta, [V0_RESIDUAL_KEY]: Object.freeze({ step }) }
  return Object.freeze({ type: 'assistant/chunk', seq: seq as SessionSeq, time, data: Object.freeze(converted) })
}

/**
 * A `text-chunks` row of step 0 as one run of the `assistant/chunk` events
 * `dshRowMember` makes of its members (`StoredEventRun`): its texts and gaps
 * are the run's columns, so no member event is made (a JSONL log stores the
 * run as it is; most events of a harness log are such members). Any other
 * row, or one whose numbers a run would refuse (-0, or an infinity parsed
 * from 1e400, refused member by member as before): `undefined`.
 */
export const dshRow: RowMaker<AppendedEvent> = (type, seq0, time0, data, members, dt) => {
  const { turn, step, index } = data as { turn: number; step: number; index: number }
  if (type !== 'text-chunks' || step !== 0 || Object.is(step, -0)) return undefined
  if (!Number.isFinite(turn) || Object.is(turn, -0) || !Number.isFinite(index) || Object.is(index, -0)) return undefined
  return { type: 'assistant/chunk', seq: seq0 as SessionSeq, time: time0, run: { dt, data: { turn, index, delta: members } } }
}

/** What an import reads a v0 log as: dsh events, converted as they are parsed, and runs of them. */
export const DSH_EVENTS: EventMaker<AppendedEvent> = { line: toDshEvent, member: dshRowMember, row: dshRow }

/**
 * Freezes an event whose data came from `JSON.parse` (plain objects and
 * arrays, finite numbers, strings, booleans, null: lossless JSON, except that
 * the text `-0` parses to -0, which `JSON.stringify` never writes and which
 * would come back as 0 — such a line is refused).
 */
function frozen(event: StoredSessionEvent): StoredSessionEvent {
  if (!freezeParsed(event.data)) {
    throw new ImportV0Error(
      'IMPORT_V0_BAD_JSON',
      `Event ${event.seq} holds the number -0, which no JSON writer produces and which would not survive a round trip.`,
      {
        details: { seq: event.seq },
      },
    )
  }
  return Object.freeze(event)
}

function freezeParsed(value: unknown): boolean {
  if (typeof value === 'number') return !Object.is(value, -0)
  if (typeof value !== 'object' || value === null || Object.isFrozen(value)) return true
  if (Array.isArray(value)) {
    for (const item of value) if (!freezeParsed(item)) return false
  } else {
    for (const key in value) if (!freezeParsed((value as Json)[key])) return false
  }
  Object.freeze(value)
  return true
}

function convertEvent(event: V0Event): StoredSessionEvent {
  if (event instanceof RowMember) return rowMemberEvent(event)
  const seq = SessionSeq(event.seq)
  const extras = envelopeExtras(event)
  const whole = (): StoredSessionEvent => ({ type: V0_EVENT_TYPE, seq, time: event.time, data: event as unknown as JsonValue })
  if (extras === undefined || event.type.startsWith(V0_PREFIX)) return whole()
  if (DSH_IGNORABLE_TYPES.has(event.type)) {
    const keys = Object.keys(extras)
    if (keys.length === 1 && extras.ignorable === true) return { type: event.type, seq, time: event.time, data: event.data as JsonValue }
    return keys.length === 0 ? { type: V0_PREFIX + event.type, seq, time: event.time, data: event.data as JsonValue } : whole()
  }
  const convert = CONVERTERS[event.type]
  if (convert === undefined) {
    return Object.keys(extras).length === 0 ? { type: event.type, seq, time: event.time, data: event.data as JsonValue } : whole()
  }
  const converted = convert(event.data)
  if (converted === undefined) {
    return Object.keys(extras).length === 0
      ? { type: V0_PREFIX + event.type, seq, time: event.time, data: event.data as JsonValue }
      : whole()
  }
  const residual = { ...converted.residual, ...extras }
  const data = Object.keys(residual).length === 0 ? converted.data : { ...converted.data, [V0_RESIDUAL_KEY]: residual }
  return { type: event.type, seq, time: event.time, data: data as JsonValue }
}

/** The conversion of a row member, without the checks its canonical shape makes moot (same result as the general path). */
function rowMemberEvent(member: RowMember): StoredSessionEvent {
  const { turn, step, chunk } = member.data
  const seq = member.seq as SessionSeq
  if (chunk.type !== 'text-delta') return { type: `${V0_PREFIX}assistant/chunk`, seq, time: member.time, data: member.data as JsonValue }
  const data =
    step === 0
      ? { turn, index: chunk.index, delta: chunk.text as string }
      : { turn, index: chunk.index, delta: chunk.text as string, [V0_RESIDUAL_KEY]: { step } }
  return { type: 'assistant/chunk', seq, time: member.time, data }
}

function ordered(data: Json, order: unknown): Json {
  if (!Array.isArray(order)) return data
  const out: Json = {}
  for (const key of order as string[]) if (Object.hasOwn(data, key)) out[key] = data[key]
  return out
}

function envelope(event: StoredSessionEvent, data: Json, residual: Residual | undefined): V0Event {
  const line: Json = { type: event.type, seq: event.seq, time: event.time, data: ordered(data, residual?.order) }
  if (residual !== undefined) for (const key of EXTRAS) if (Object.hasOwn(residual, key)) line[key] = residual[key]
  return line as unknown as V0Event
}

/** Rebuilds the v0 data of a converted core event from our fields and its residual. */
const RESTORERS: Record<string, (data: Json, r: Residual) => Json> = {
  'turn/start': (data) => ({ turn: data.turn }),
  'turn/end': (data, r) => ({ turn: data.turn, reason: r.reason }),
  'user/message': (data, r) => ({
    id: r.id,
    role: 'user',
    content: Object.hasOwn(r, 'content') ? r.content : [{ type: 'text', text: data.text }],
    source: r.source,
  }),
  'assistant/chunk': (data, r) => ({
    turn: data.turn,
    step: r.step ?? 0,
    chunk: { type: 'text-delta', index: data.index, text: data.delta },
  }),
  'assistant/message': (data, r) => {
    const message = r.message as Json
    const restored: Json = {
      turn: data.turn,
      step: r.step,
      message: { ...message, content: fillHole(message.content as unknown[], r.textAt, data.text as string) },
    }
    if (Object.hasOwn(r, 'usage')) restored.usage = r.usage
    return restored
  },
  'tool/call': (data, r) => ({
    turn: data.turn,
    step: r.step,
    callId: data.callId,
    name: data.name,
    arguments: r.rawArguments === true ? data.arguments : JSON.stringify(data.arguments),
  }),
  'tool/result': (data, r) => {
    const message = r.message as Json
    const block = (message.content as Json[])[0] as Json
    const restored: Json = { turn: data.turn, step: r.step, message: { ...message, content: [{ ...block, content: data.content }] } }
    if (Object.hasOwn(r, 'error')) restored.error = r.error
    if (Object.hasOwn(r, 'meta')) restored.meta = r.meta
    return restored
  },
}

/** Synthesises v0 data for core events dsh wrote itself (no residual): the closest harness shape. */
const NATIVE: Record<string, (event: StoredSessionEvent, data: Json) => { data: Json; surface: boolean }> = {
  'turn/start': (_e, data) => ({ data: { turn: data.turn }, surface: false }),
  'turn/end': (_e, data) => ({ data: { turn: data.turn, reason: nativeReason(data.reason) }, surface: false }),
  'user/message': (e, data) => ({
    data: { id: `dsh-${e.seq}`, role: 'user', content: [{ type: 'text', text: data.text }], source: { kind: 'user' } },
    surface: true,
  }),
  'assistant/chunk': (_e, data) => ({
    data: { turn: data.turn, step: 0, chunk: { type: 'text-delta', index: data.index, text: data.delta } },
    surface: false,
  }),
  'assistant/message': (e, data) => {
    const usage = isObject(data.usage) ? { usage: { inputTokens: data.usage.input, outputTokens: data.usage.output } } : {}
    const message = {
      id: `dsh-${e.seq}`,
      role: 'assistant',
      content: [{ type: 'text', text: data.text }],
      source: { kind: 'model', provider: 'dsh', model: 'dsh' },
    }
    return { data: { turn: data.turn, step: 0, message, ...usage }, surface: true }
  },
  'tool/call': (_e, data) => ({
    data: {
      turn: data.turn,
      step: 0,
      callId: data.callId,
      name: data.name,
      arguments: typeof data.arguments === 'string' ? data.arguments : JSON.stringify(data.arguments),
    },
    surface: false,
  }),
  'tool/result': (e, data) => {
    const content = Array.isArray(data.content)
      ? data.content
      : [{ type: 'text', text: typeof data.content === 'string' ? data.content : JSON.stringify(data.content) }]
    const block = {
      type: 'tool-result',
      toolCallId: data.callId,
      content,
      ...(typeof data.isError === 'boolean' ? { isError: data.isError } : {}),
    }
    return {
      data: {
        turn: data.turn,
        step: 0,
        message: { id: `dsh-${e.seq}`, role: 'user', content: [block], source: { kind: 'tool', callId: data.callId } },
      },
      surface: true,
    }
  },
}

function nativeReason(reason: unknown): Json {
  switch (reason) {
    case 'completed':
      return { kind: 'completed' }
    case 'interrupted':
      return { kind: 'interrupted' }
    case 'cancelled':
      return { kind: 'aborted', reason: { kind: 'user' } }
    default:
      return { kind: 'error', error: { message: `turn ended with reason ${JSON.stringify(reason)}`, code: 'UNKNOWN' } }
  }
}

/** One dsh event as a v0 event line (the inverse of `toDshEvent` for imported events). */
export function toV0Event(event: StoredSessionEvent): V0Event {
  if (event.type === V0_EVENT_TYPE && isObject(event.data)) return event.data as unknown as V0Event
  if (event.type.startsWith(V0_PREFIX))
    return { type: event.type.slice(V0_PREFIX.length), seq: event.seq, time: event.time, data: event.data }
  if (DSH_IGNORABLE_TYPES.has(event.type)) return { type: event.type, seq: event.seq, time: event.time, data: event.data, ignorable: true }
  const data = event.data
  const restore = RESTORERS[event.type]
  if (restore === undefined || !isObject(data)) return { type: event.type, seq: event.seq, time: event.time, data }
  const residual = data[V0_RESIDUAL_KEY]
  if (isObject(residual)) return envelope(event, restore(data, residual), residual)
  const native = (NATIVE[event.type] as (typeof NATIVE)[string])(event, data)
  return envelope(event, native.data, native.surface ? { surfaceOp: 'append' } : undefined)
}

/** The dsh header and exact cut of a v0 header (`seedLength` → `inheritedEventCount`, `isSeeded` = `seedLength` present). */
export function toDshHeader(header: V0Header): { header: SessionHeader; inheritedEventCount: SessionLogOffset } {
  try {
    return {
      header: parseSessionHeader({
        version: SESSION_HEADER_VERSION,
        id: header.id,
        createdAt: header.createdAt,
        cwd: header.cwd,
        parentSession: header.parentSession,
        isSeeded: header.seedLength !== undefined,
        delegationDepth: header.delegationDepth,
        origin: header.origin,
        agentPreset: header.agentPreset,
      }),
      inheritedEventCount: SessionLogOffset(header.seedLength ?? 0),
    }
  } catch (error) {
    throw new ImportV0Error('IMPORT_V0_BAD_HEADER', `The v0 header cannot be a dsh header: ${(error as Error).message}`, { cause: error })
  }
}

/** The v0 header of a dsh session. */
export function toV0Header(header: SessionHeader, inheritedEventCount: number): V0Header {
  return {
    id: header.id,
    createdAt: header.createdAt,
    ...(header.cwd === undefined ? {} : { cwd: header.cwd }),
    ...(header.parentSession === undefined ? {} : { parentSession: header.parentSession }),
    ...(header.isSeeded ? { seedLength: inheritedEventCount } : {}),
    ...(header.origin === undefined ? {} : { origin: header.origin }),
    delegationDepth: header.delegationDepth,
    ...(header.agentPreset === undefined ? {} : { agentPreset: header.agentPreset }),
  }
}
