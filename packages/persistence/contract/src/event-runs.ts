import type { JsonValue, SessionSeq, StoredSessionEvent } from '@dsh/session'
import { SessionPersistenceError } from './errors.js'

/**
 * Event runs: many events of one type appended as columns.
 *
 * Invariant: a run stands for exactly the events `expandEventRuns` makes of
 * it. Every backend stores and reads it back as those events; a backend that
 * packs runs itself (JSONL, version 4 logs) writes the columns as they are,
 * the others expand it when it is appended. `checkEventRun` refuses a run
 * whose events would not survive a JSON round trip unchanged, so any backend
 * may trust the columns of a run that passed `checkAppend`.
 *
 * Why: most of a transcript is a stream of small deltas of one type, and a
 * producer may already hold them as columns (a v0 `text-chunks` row is one).
 * Made into events, each one is allocated, frozen, checked and (by a backend
 * that packs) taken apart into columns again: a quarter of the time of a
 * 100 MiB import.
 */

/** What an event of a run holds under one key: a JSON value that is not an array or object. */
export type FlatValue = string | number | boolean | null

/**
 * `run.dt.length + 1` events of `type` with consecutive seqs from `seq`.
 * Event k's time is `time` plus the first k gaps, and its data an object with
 * `run.data`'s keys in their order, each with the array's k-th value, or the
 * one value every event shares (a flat value is never an array, so the two
 * cannot be confused). The shape of a JSONL log's packed line.
 */
export interface StoredEventRun {
  readonly type: string
  readonly seq: SessionSeq
  readonly time: number
  readonly run: {
    readonly dt: readonly number[]
    readonly data: Readonly<Record<string, FlatValue | readonly FlatValue[]>>
  }
}

/** What `append` takes: events, and runs of events given as columns. */
export type AppendedEvent = StoredSessionEvent | StoredEventRun

/** Whether `item` is a run (it has a `run` of its own; an event never does). */
export function isEventRun(item: AppendedEvent): item is StoredEventRun {
  return typeof item === 'object' && item !== null && Object.hasOwn(item, 'run')
}

/** How many events `item` stands for: 1 for an event, its length for a run. */
export function eventCount(item: AppendedEvent): number {
  return isEventRun(item) ? item.run.dt.length + 1 : 1
}

/** How many events `items` stand for. */
export function appendedEventCount(items: readonly AppendedEvent[]): number {
  let count = 0
  for (const item of items) count += eventCount(item)
  return count
}

/**
 * The events of `items` (a batch for session `id`), with each run checked
 * (`checkEventRun`, at its own seq) and expanded into frozen events; `items`
 * itself when it holds no run. For a backend that stores events one by one:
 * the batch's seqs are then checked as any (`checkAppend`).
 */
export function expandEventRuns(id: string, items: readonly AppendedEvent[]): readonly StoredSessionEvent[] {
  if (!items.some(isEventRun)) return items as readonly StoredSessionEvent[]
  const events: StoredSessionEvent[] = []
  for (const item of items) {
    if (!isEventRun(item)) {
      events.push(item)
      continue
    }
    const { type, seq, run } = item
    if (!Number.isSafeInteger(seq) || seq < 0) {
      throw new SessionPersistenceError('SESSION_PERSISTENCE_INVALID_EVENT', `An event run of session '${id}' has no valid seq.`, {
        details: { id },
      })
    }
    checkEventRun(id, item, seq)
    const keys = Object.keys(run.data)
    let time = item.time
    for (let k = 0; k <= run.dt.length; k++) {
      if (k > 0) time += run.dt[k - 1]!
      const data: Record<string, JsonValue> = {}
      for (const key of keys) {
        const column = run.data[key]!
        data[key] = Array.isArray(column) ? (column[k] as FlatValue) : (column as FlatValue)
      }
      events.push(Object.freeze({ type, seq: (seq + k) as SessionSeq, time, data: Object.freeze(data) }))
    }
  }
  return events
}

/**
 * Checks one run of session `id` that must start at `expectedSeq`; returns
 * how many events it stands for. A run at another seq is
 * `SESSION_PERSISTENCE_CONFLICT`; anything its events could not be stored as
 * exactly (a bad type, time or gap; a value that is not a string, finite
 * number, boolean or null; a column of the wrong length; a `__proto__` key, a
 * `data` beside the run) is `SESSION_PERSISTENCE_INVALID_EVENT`.
 */
export function checkEventRun(id: string, item: StoredEventRun, expectedSeq: number): number {
  const invalid = (why: string): never => {
    throw new SessionPersistenceError(
      'SESSION_PERSISTENCE_INVALID_EVENT',
      `The event run at seq ${expectedSeq} of session '${id}' is not storable: ${why}.`,
      { details: { id, seq: expectedSeq } },
    )
  }
  if (item.seq !== expectedSeq) {
    throw new SessionPersistenceError(
      'SESSION_PERSISTENCE_CONFLICT',
      `Session '${id}' expects seq ${expectedSeq} next, but the batch has an event run from seq ${String(item.seq)} there (another writer, or a batch already persisted).`,
      { details: { id, expectedSeq, seq: item.seq } },
    )
  }
  if (Object.hasOwn(item, 'data')) invalid('an item is either an event (data) or a run, not both')
  if (typeof item.type !== 'string' || item.type.length === 0) invalid('it has no type')
  const run: unknown = item.run
  if (typeof run !== 'object' || run === null) invalid('its run is not an object')
  const { dt, data } = run as Record<string, unknown>
  if (!isPlainArray(dt)) invalid('its gaps (run.dt) are not a plain array')
  const gaps = dt as unknown[]
  const count = gaps.length + 1
  if (!Number.isSafeInteger(expectedSeq + count - 1)) invalid('its seqs leave the safe-integer range')
  let time: unknown = item.time
  if (!Number.isSafeInteger(time) || Object.is(time, -0)) invalid('its first time is not a safe integer')
  for (const gap of gaps) {
    time = (time as number) + (gap as number)
    if (!Number.isSafeInteger(gap) || !Number.isSafeInteger(time)) invalid('a gap or a time is not a safe integer')
  }
  if (typeof data !== 'object' || data === null || Array.isArray(data)) invalid('its data (run.data) is not an object')
  const proto: unknown = Object.getPrototypeOf(data)
  if (proto !== Object.prototype && proto !== null) invalid('its data (run.data) is not a plain object')
  for (const key of Object.keys(data as object)) {
    if (key === '__proto__') invalid("its data holds a '__proto__' key")
    const value: unknown = (data as Record<string, unknown>)[key]
    if (Array.isArray(value) && !isPlainArray(value)) invalid(`data '${key}' is not a plain array`)
    if (!Array.isArray(value)) {
      if (!isFlatValue(value)) invalid(`data '${key}' is not a string, finite number, boolean, null or an array of those`)
      continue
    }
    if (value.length !== count) invalid(`data '${key}' holds ${value.length} values for ${count} events`)
    for (const member of value)
      if (!isFlatValue(member)) invalid(`data '${key}' holds a value that is not a string, finite number, boolean or null`)
  }
  return count
}

/** An array `JSON.stringify` writes element by element: no subclass, no `toJSON` of its own. */
function isPlainArray(value: unknown): value is unknown[] {
  return Array.isArray(value) && Object.getPrototypeOf(value) === Array.prototype && !Object.hasOwn(value, 'toJSON')
}

function isFlatValue(value: unknown): value is FlatValue {
  if (typeof value === 'string' || typeof value === 'boolean' || value === null) return true
  return typeof value === 'number' && Number.isFinite(value) && !Object.is(value, -0)
}
