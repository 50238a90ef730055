import type { StoredSessionEvent } from '@dsh/session'
import { type Attribution, NO_TOKENS, TOKEN_KINDS, type TokenCounts, type TokenKind } from './stats-types.js'

/**
 * Readers of the event shapes the stats fold understands. Each returns a
 * verdict instead of throwing; the fold counts what it skips.
 *
 * Usage records come in two namings with the same disjoint meaning:
 * dsh's `{ input, output, cacheRead?, cacheWrite?, reasoning? }` and the
 * harness's `{ inputTokens, outputTokens, cacheReadTokens?,
 * cacheWriteTokens?, reasoningTokens? }` (kept by a v0 import under the
 * event's `v0` residual, and verbatim in `compaction/summary`).
 */

export type Json = { readonly [key: string]: unknown }

export function isObject(value: unknown): value is Json {
  return typeof value === 'object' && value !== null && !Array.isArray(value)
}

export type UsageVerdict =
  | { readonly kind: 'absent' }
  | { readonly kind: 'invalid' }
  | { readonly kind: 'valid'; readonly tokens: TokenCounts }

const ABSENT: UsageVerdict = Object.freeze({ kind: 'absent' })
const INVALID: UsageVerdict = Object.freeze({ kind: 'invalid' })

const HARNESS_NAMES: { readonly [K in TokenKind]: string } = {
  input: 'inputTokens',
  output: 'outputTokens',
  cacheRead: 'cacheReadTokens',
  cacheWrite: 'cacheWriteTokens',
  reasoning: 'reasoningTokens',
}

/** A token count: a safe non-negative integer. */
export function isCount(value: unknown): value is number {
  return typeof value === 'number' && Number.isSafeInteger(value) && value >= 0
}

/** A usage record: absent (`undefined`), invalid (input or output missing, or any count not a non-negative integer), or valid. */
export function readUsage(value: unknown): UsageVerdict {
  if (value === undefined) return ABSENT
  if (!isObject(value)) return INVALID
  const harness = Object.hasOwn(value, 'inputTokens') || Object.hasOwn(value, 'outputTokens')
  const tokens: Record<TokenKind, number> = { ...NO_TOKENS }
  for (const kind of TOKEN_KINDS) {
    const name = harness ? HARNESS_NAMES[kind] : kind
    if (!Object.hasOwn(value, name)) {
      if (kind === 'input' || kind === 'output') return INVALID
      continue
    }
    const count = value[name]
    if (!isCount(count)) return INVALID
    tokens[kind] = count
  }
  return { kind: 'valid', tokens: Object.freeze(tokens) }
}

/** The usage of an `assistant/message`: the v0 residual's full record when an import kept one, else `usage`. */
export function messageUsage(data: Json): UsageVerdict {
  const residual = data.v0
  if (isObject(residual) && Object.hasOwn(residual, 'usage')) return readUsage(residual.usage)
  return readUsage(data.usage)
}

/**
 * The model an `assistant/message` names: an imported one's
 * `v0.message.source {kind: 'model', provider, model}`, else its own
 * `provider` and `model` fields (a driver's), or null.
 */
export function messageAttribution(data: Json): Attribution | null {
  const residual = data.v0
  if (!isObject(residual)) return attributionOf(data)
  if (!isObject(residual.message)) return null
  const source = residual.message.source
  if (!isObject(source) || source.kind !== 'model') return null
  return attributionOf(source)
}

/** `{ provider, model }` when at least one is a string; null when neither is. */
export function attributionOf(data: Json): Attribution | null {
  const provider = typeof data.provider === 'string' ? data.provider : null
  const model = typeof data.model === 'string' ? data.model : null
  return provider === null && model === null ? null : { provider, model }
}

/** True when a `provider` or `model` field is present but not a string. */
export function badAttribution(data: Json): boolean {
  return (
    (Object.hasOwn(data, 'provider') && typeof data.provider !== 'string') ||
    (Object.hasOwn(data, 'model') && typeof data.model !== 'string')
  )
}

/**
 * True for a chunk that carries a model token: dsh's `assistant/chunk` with a
 * non-empty `delta`, or an imported harness chunk (kept as
 * `v0/assistant/chunk`) that is a non-empty text or reasoning delta or a
 * tool-call delta.
 */
export function isTokenChunk(event: StoredSessionEvent): boolean {
  const data = event.data
  if (!isObject(data)) return false
  if (event.type === 'assistant/chunk') return typeof data.delta === 'string' && data.delta !== ''
  const chunk = data.chunk
  if (!isObject(chunk)) return false
  switch (chunk.type) {
    case 'text-delta':
    case 'reasoning-delta':
      return typeof chunk.text === 'string' && chunk.text !== ''
    case 'tool-call-delta':
      return (typeof chunk.argumentsDelta === 'string' && chunk.argumentsDelta !== '') || typeof chunk.name === 'string'
    default:
      return false
  }
}

/** Kept types a v0 import may wrap whole (`v0/event`, data = the line) when their envelope carries extras. */
const WRAPPED_KEPT_TYPES: ReadonlySet<string> = new Set(['step/start', 'step/end', 'compaction/summary', 'session/title'])

/**
 * The event inside a whole-line `v0/event` wrapper, when it is one of the
 * kept types the units fold (their data is the harness's either way); else
 * undefined. Seq and time stay the wrapper's.
 */
export function unwrapWholeLine(event: StoredSessionEvent): StoredSessionEvent | undefined {
  if (event.type !== 'v0/event' || !isObject(event.data)) return undefined
  const { type, data } = event.data
  if (typeof type !== 'string' || !WRAPPED_KEPT_TYPES.has(type)) return undefined
  return { type, seq: event.seq, time: event.time, data: data as StoredSessionEvent['data'] }
}

/** The event's time when finite, else null. */
export function timeOf(event: StoredSessionEvent): number | null {
  return typeof event.time === 'number' && Number.isFinite(event.time) ? event.time : null
}

/** `end - start`, or null when either is unknown or the clock went backwards. */
export function durationOf(start: number | null, end: number | null): number | null {
  if (start === null || end === null) return null
  const ms = end - start
  return Number.isFinite(ms) && ms >= 0 ? ms : null
}

/** A finite turn number from `{ turn }`, or null. */
export function turnOf(data: unknown): number | null {
  return isObject(data) && typeof data.turn === 'number' && Number.isFinite(data.turn) ? data.turn : null
}
