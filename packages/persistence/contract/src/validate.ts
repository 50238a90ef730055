import { EVENT_MAX_BYTES, ID_MAX_LENGTH, idFault } from '@dsh/protocol/limits'
import {
  freezeLosslessJson,
  type JsonValue,
  parseSessionHeader,
  type SessionHeader,
  type SessionLogOffset,
  type StoredSessionEvent,
  sameLifecycle,
} from '@dsh/session'
import { SessionPersistenceError } from './errors.js'
import { type AppendedEvent, checkEventRun, isEventRun } from './event-runs.js'
import type { AppendTarget } from './types.js'

/** What a backend knows about a stored session when an append arrives. */
export interface StoredAppendState {
  readonly header: SessionHeader
  readonly inheritedEventCount: SessionLogOffset
  /** The stored next offset (the number of committed events). */
  readonly nextSeq: number
}

/**
 * The append checks every backend makes, in one place so that they all agree:
 * the target must be the stored lifecycle with the stored cut, the batch must
 * start at the stored next offset and be contiguous, every event must be
 * storable, and a first batch must carry a header that reads back
 * (`parseSessionHeader`) and the whole inherited prefix.
 * `stored` is `undefined` when the session is not materialized yet.
 */
export function checkAppend(target: AppendTarget, events: readonly AppendedEvent[], stored: StoredAppendState | undefined): void {
  const id = target.header.id
  checkId(id)
  if (stored === undefined) checkHeader(target.header)
  else {
    if (!sameLifecycle(stored.header, target.header)) {
      throw new SessionPersistenceError(
        'SESSION_PERSISTENCE_CONFLICT',
        `Session '${id}' is persisted with another lifecycle (a different header); delete it explicitly before reusing the id.`,
        { details: { id } },
      )
    }
    if (stored.inheritedEventCount !== target.inheritedEventCount) {
      throw new SessionPersistenceError(
        'SESSION_PERSISTENCE_CONFLICT',
        `Session '${id}' is persisted with inheritedEventCount ${stored.inheritedEventCount}, but the append names ${target.inheritedEventCount}.`,
        { details: { id } },
      )
    }
  }
  const first = stored?.nextSeq ?? 0
  let expected = first
  // An indexed loop: `entries()` would make an [index, event] pair per event (110 MB of garbage for a 1.2 M-event import).
  for (let index = 0; index < events.length; index++) {
    const item = events[index] as AppendedEvent
    if (isEventRun(item)) expected += checkEventRun(id, item, expected)
    else checkEvent(id, item, expected++)
  }
  if (stored === undefined && expected - first < target.inheritedEventCount) {
    throw new SessionPersistenceError(
      'SESSION_PERSISTENCE_CONFLICT',
      `The first batch of session '${id}' holds ${expected - first} events but its inherited cut is ${target.inheritedEventCount}; persist the whole seed with the first batch.`,
      { details: { id } },
    )
  }
}

/**
 * Throws `SESSION_PERSISTENCE_INVALID_ID` for an id the wire cannot name
 * (`idFault` of `@dsh/protocol/limits`: empty, longer than `ID_MAX_LENGTH`
 * UTF-16 code units, `.` or `..`, a NUL, a lone surrogate): no backend stores
 * one. Each backend also applies it where it turns an id into a key.
 */
export function checkId(id: string): void {
  const fault = idFault(id)
  if (fault === undefined) return
  const message =
    id.length > ID_MAX_LENGTH
      ? `A session id is at most ${ID_MAX_LENGTH} characters (UTF-16 code units, ID_MAX_LENGTH); this one has ${id.length}. Use a shorter id.`
      : `This session id ${fault}; no backend stores an id the API cannot name. Use another id.`
  throw new SessionPersistenceError('SESSION_PERSISTENCE_INVALID_ID', message, { details: { length: id.length, max: ID_MAX_LENGTH } })
}

/** Throws `SESSION_PERSISTENCE_INVALID_HEADER` for a header that would not read back (`parseSessionHeader`): nothing is stored. */
function checkHeader(header: SessionHeader): void {
  try {
    parseSessionHeader(header)
  } catch (error) {
    throw new SessionPersistenceError(
      'SESSION_PERSISTENCE_INVALID_HEADER',
      `The header of session '${header.id}' cannot be stored: ${(error as Error).message}. Create the session through SessionStore, or fix the header.`,
      { cause: error, details: { id: header.id } },
    )
  }
}

/**
 * Throws `SESSION_PERSISTENCE_EVENT_TOO_LARGE` when an event's encoded line
 * (`bytes`, UTF-8) is over `EVENT_MAX_BYTES`. A backend calls it where it
 * encodes events, before it writes anything: measuring there costs nothing
 * extra (the append check itself never serializes an event).
 */
export function checkEventBytes(seq: number, bytes: number, id?: string): void {
  if (bytes <= EVENT_MAX_BYTES) return
  throw new SessionPersistenceError(
    'SESSION_PERSISTENCE_EVENT_TOO_LARGE',
    `Event ${seq}${id === undefined ? '' : ` of session '${id}'`} encodes to ${bytes} bytes; an event is at most ${EVENT_MAX_BYTES} bytes (EVENT_MAX_BYTES). Store large content as an attachment and reference it from the event; nothing of the batch was stored.`,
    { details: { seq, bytes, max: EVENT_MAX_BYTES, ...(id === undefined ? {} : { id }) } },
  )
}

/**
 * An event's stored line, the JSON of `{type, seq, time, data}`, measured
 * against `EVENT_MAX_BYTES` (`checkEventBytes`). Data that JSON cannot encode
 * (nested deeper than the engine's stack, or longer than its longest string)
 * is `SESSION_PERSISTENCE_INVALID_EVENT`, never a `RangeError`.
 */
export function eventLine(event: StoredSessionEvent, id?: string): string {
  let line: string
  const data = isFrozenTree(event.data) ? event.data : losslessData(event, id)
  try {
    line = JSON.stringify({ type: event.type, seq: event.seq, time: event.time, data })
  } catch (error) {
    throw unencodable(event.seq, error, id)
  }
  // A UTF-16 code unit is at most 3 UTF-8 bytes: only a line that could be over the cap is measured.
  if (line.length * 3 > EVENT_MAX_BYTES) checkEventBytes(event.seq, Buffer.byteLength(line), id)
  return line
}

/**
 * Whether `data` is a tree a `Session` froze: it froze it recursively after
 * checking it is lossless JSON, so a frozen root stands for a checked tree.
 */
export function isFrozenTree(data: JsonValue): boolean {
  return typeof data !== 'object' || data === null || Object.isFrozen(data)
}

/**
 * An event's data checked to come back from JSON unchanged (an unfrozen
 * tree: not from a `Session`): NaN, Infinity, -0, undefined, class instances
 * and cycles are `SESSION_PERSISTENCE_INVALID_EVENT` naming where, rather than
 * stored as something else (`JSON.stringify` writes NaN as null).
 */
export function losslessData(event: StoredSessionEvent, id?: string): JsonValue {
  try {
    return freezeLosslessJson(event.data, `'${event.type}' data`)
  } catch (error) {
    if (error instanceof RangeError) throw unencodable(event.seq, error, id)
    throw new SessionPersistenceError(
      'SESSION_PERSISTENCE_INVALID_EVENT',
      `Event ${event.seq}${id === undefined ? '' : ` of session '${id}'`} cannot be stored losslessly: ${(error as Error).message}`,
      { cause: error, details: { seq: event.seq, ...(id === undefined ? {} : { id }) } },
    )
  }
}

/** `SESSION_PERSISTENCE_INVALID_EVENT` for an event JSON cannot encode (`error`, a `RangeError`); anything else as it is. */
export function unencodable(seq: number | undefined, error: unknown, id?: string): unknown {
  if (!(error instanceof RangeError)) return error
  return new SessionPersistenceError(
    'SESSION_PERSISTENCE_INVALID_EVENT',
    `${seq === undefined ? 'An event' : `Event ${seq}`}${id === undefined ? '' : ` of session '${id}'`} cannot be encoded as JSON (${error.message}): its data is nested too deeply or too long. Store large content as an attachment; nothing of the batch was stored.`,
    { cause: error, details: { ...(seq === undefined ? {} : { seq }), ...(id === undefined ? {} : { id }) } },
  )
}

function checkEvent(id: string, event: StoredSessionEvent, expectedSeq: number): void {
  if (typeof event !== 'object' || event === null) {
    throw new SessionPersistenceError('SESSION_PERSISTENCE_INVALID_EVENT', `Event ${expectedSeq} of session '${id}' is not an object.`, {
      details: { id },
    })
  }
  if (event.seq !== expectedSeq) {
    throw new SessionPersistenceError(
      'SESSION_PERSISTENCE_CONFLICT',
      `Session '${id}' expects seq ${expectedSeq} next, but the batch has seq ${String(event.seq)} there (another writer, or a batch already persisted).`,
      { details: { id, expectedSeq, seq: event.seq } },
    )
  }
  if (typeof event.type !== 'string' || event.type.length === 0) {
    throw new SessionPersistenceError('SESSION_PERSISTENCE_INVALID_EVENT', `Event ${expectedSeq} of session '${id}' has no type.`, {
      details: { id },
    })
  }
  if (event.data === undefined) {
    throw new SessionPersistenceError('SESSION_PERSISTENCE_INVALID_EVENT', `Event ${expectedSeq} of session '${id}' has no data.`, {
      details: { id },
    })
  }
  if (typeof event.time !== 'number' || !Number.isFinite(event.time) || Object.is(event.time, -0)) {
    throw new SessionPersistenceError(
      'SESSION_PERSISTENCE_INVALID_EVENT',
      `Event ${expectedSeq} of session '${id}' has no finite numeric time.`,
      { details: { id } },
    )
  }
}
