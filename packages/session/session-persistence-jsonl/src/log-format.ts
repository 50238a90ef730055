import { randomBytes } from 'node:crypto'
import {
  freezeLosslessJson,
  type JsonValue,
  parseSessionHeader,
  type SessionHeader,
  SessionLogOffset,
  type StoredSessionEvent,
} from '@dsh/session'
import { SessionPersistenceError } from '@dsh/session-persistence'

/** The physical header line's format tag and version. */
export const LOG_FORMAT = 'dsh-session-log'
export const LOG_FORMAT_VERSION = 1

export interface PhysicalHeader {
  readonly header: SessionHeader
  readonly inheritedEventCount: SessionLogOffset
}

/**
 * The physical header line: the logical header plus the exact inherited cut,
 * which is deliberately not a logical header field. `logId` is random per
 * log file, so the header's CRC (part of every revision) differs between a
 * session and the same id deleted and created again.
 */
export function encodeHeaderLine(physical: PhysicalHeader): Buffer {
  const line = {
    format: LOG_FORMAT,
    formatVersion: LOG_FORMAT_VERSION,
    logId: randomBytes(8).toString('hex'),
    header: physical.header,
    inheritedEventCount: physical.inheritedEventCount,
  }
  return Buffer.from(JSON.stringify(line) + '\n', 'utf8')
}

export type HeaderParse =
  | { readonly ok: true; readonly value: PhysicalHeader }
  | { readonly ok: false; readonly unsupported: boolean; readonly reason: string }

/** Parses a header line whose bytes already passed their CRC. */
export function parseHeaderLine(plain: Buffer): HeaderParse {
  let raw: unknown
  try {
    if (plain.at(-1) !== 0x0a) throw new SyntaxError('the header line is not newline-terminated')
    raw = JSON.parse(plain.toString('utf8'))
  } catch (error) {
    return { ok: false, unsupported: false, reason: `the header line is not JSON (${(error as Error).message})` }
  }
  if (typeof raw !== 'object' || raw === null || (raw as { format?: unknown }).format !== LOG_FORMAT) {
    return { ok: false, unsupported: false, reason: `the header line is not a ${LOG_FORMAT} header` }
  }
  const line = raw as { formatVersion?: unknown; header?: unknown; inheritedEventCount?: unknown }
  if (line.formatVersion !== LOG_FORMAT_VERSION) {
    return {
      ok: false,
      unsupported: true,
      reason: `log format version ${JSON.stringify(line.formatVersion)} (this build reads version ${LOG_FORMAT_VERSION})`,
    }
  }
  if (typeof line.header === 'object' && line.header !== null && (line.header as { version?: unknown }).version !== 1) {
    return {
      ok: false,
      unsupported: true,
      reason: `session header version ${JSON.stringify((line.header as { version?: unknown }).version)}`,
    }
  }
  try {
    return { ok: true, value: { header: parseSessionHeader(line.header), inheritedEventCount: SessionLogOffset(line.inheritedEventCount) } }
  } catch (error) {
    return { ok: false, unsupported: false, reason: (error as Error).message }
  }
}

/**
 * Serialises a batch as JSON lines (`{"type","seq","time","data"}` each).
 * Events that are not already deep-frozen (i.e. did not come from a
 * `Session`) are checked for lossless JSON first, so nothing is silently
 * changed by `JSON.stringify` (NaN, -0, undefined, class instances).
 */
export function encodeEventLines(events: readonly StoredSessionEvent[]): Buffer {
  let text = ''
  for (const event of events) {
    const data = Object.isFrozen(event) && isDeepFrozenShallowCheck(event.data) ? event.data : losslessData(event)
    text += JSON.stringify({ type: event.type, seq: event.seq, time: event.time, data }) + '\n'
  }
  return Buffer.from(text, 'utf8')
}

function losslessData(event: StoredSessionEvent): JsonValue {
  try {
    return freezeLosslessJson(event.data, `'${event.type}' data`)
  } catch (error) {
    throw new SessionPersistenceError(
      'SESSION_PERSISTENCE_INVALID_EVENT',
      `Event ${event.seq} cannot be stored losslessly: ${(error as Error).message}`,
      { cause: error },
    )
  }
}

function isDeepFrozenShallowCheck(value: JsonValue): boolean {
  // Session freezes data recursively, so a frozen root stands for a frozen tree.
  return typeof value !== 'object' || value === null || Object.isFrozen(value)
}

/**
 * Parses one batch's lines into deep-frozen events, checking shape and that
 * seqs continue from `firstSeq`. Returns a reason string on failure.
 */
export function parseEventLines(plain: Buffer, firstSeq: number, count: number, into: StoredSessionEvent[]): string | undefined {
  if (plain.length === 0 || plain[plain.length - 1] !== 0x0a) return 'the batch does not end with a newline'
  const text = plain.toString('utf8')
  let seq = firstSeq
  let start = 0
  while (start < text.length) {
    const end = text.indexOf('\n', start)
    let raw: unknown
    try {
      raw = JSON.parse(text.slice(start, end))
    } catch (error) {
      return `line for seq ${seq} is not JSON (${(error as Error).message})`
    }
    if (typeof raw !== 'object' || raw === null || Array.isArray(raw)) return `line for seq ${seq} is not an event object`
    const event = raw as { type?: unknown; seq?: unknown; time?: unknown; data?: unknown }
    if (typeof event.type !== 'string' || event.type.length === 0) return `event ${seq} has no type`
    if (event.seq !== seq) return `expected seq ${seq}, found ${JSON.stringify(event.seq)}`
    if (typeof event.time !== 'number' || !Number.isFinite(event.time)) return `event ${seq} has no numeric time`
    if (event.data === undefined) return `event ${seq} has no data`
    let keys = 0
    for (const _ in event) keys++
    if (keys !== 4) return `event ${seq} has fields other than type, seq, time and data`
    // The parsed object itself becomes the event (no copy: reads of huge logs stay close to bare JSON.parse).
    deepFreeze(event.data as JsonValue)
    into.push(Object.freeze(event) as StoredSessionEvent)
    seq++
    start = end + 1
  }
  if (seq - firstSeq !== count) return `the batch holds ${seq - firstSeq} events, its trailer records ${count}`
  return undefined
}

function deepFreeze(value: JsonValue): JsonValue {
  if (typeof value === 'object' && value !== null) {
    if (Array.isArray(value)) {
      for (const item of value) deepFreeze(item as JsonValue)
    } else {
      for (const key in value) deepFreeze((value as Record<string, JsonValue>)[key]!)
    }
    Object.freeze(value)
  }
  return value
}
