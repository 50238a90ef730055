import { SessionLogOffset, SessionSeq } from './brands.js'
import { SessionError } from './errors.js'
import type { SessionEvent, SessionEventMap, SessionEventType, StoredSessionEvent } from './events.js'
import type { SessionHeader } from './header.js'
import { freezeLosslessJson, freezeLosslessJsonSized, JSON_MAX_BYTES_PER_UNIT, JSON_MAX_NUMBER_BYTES } from './json.js'
import { EVENT_MAX_BYTES } from './limits.js'

export interface SessionInit {
  readonly header: SessionHeader
  /** Events already in the log: a fork's seed or a restored log. Validated and frozen. */
  readonly events?: readonly StoredSessionEvent[]
  /** The exact inherited cut: positions before it were copied from another session. */
  readonly inheritedEventCount?: number
  /**
   * The live session whose committed prefix `[0, inheritedEventCount)` this
   * seed is (set by `SessionStore.fork`). Persistence may then store the
   * fork as a reference to that prefix instead of a copy.
   */
  readonly forkSource?: SessionHeader['id']
  readonly clock?: () => number
}

type AppendListener = (session: Session, event: SessionEvent) => void
const appendListeners = new WeakMap<Session, AppendListener>()

/** Internal to this package: the store hears every append through this hook. */
export function onSessionAppend(session: Session, listener: AppendListener): void {
  appendListeners.set(session, listener)
}

/**
 * Upper bound of the UTF-8 bytes of an event line around its data,
 * `{"type":"…","seq":…,"time":…,"data":…}`, but for the type's characters:
 * `seq` and `time` taken as the longest numbers.
 */
const ENVELOPE_MAX_BYTES = '{"type":"","seq":,"time":,"data":}'.length + 2 * JSON_MAX_NUMBER_BYTES

/**
 * An append-only, event-sourced session. `seq === index` for every event;
 * events and snapshots are deep-frozen; an earlier `events` snapshot never grows.
 */
export class Session {
  readonly header: SessionHeader
  readonly inheritedEventCount: SessionLogOffset
  /** The session this one was forked from, when it was (see `SessionInit.forkSource`); absent for fresh and restored sessions. */
  readonly forkSource: SessionHeader['id'] | undefined
  readonly #log: SessionEvent[]
  readonly #clock: () => number
  #snapshot: readonly SessionEvent[] | undefined
  #appending = false
  #closed = false

  constructor(init: SessionInit) {
    this.header = init.header
    this.#clock = init.clock ?? Date.now
    this.#log = validateLog(init.events ?? [])
    const cut = init.inheritedEventCount ?? 0
    let offset: SessionLogOffset
    try {
      offset = SessionLogOffset(cut)
    } catch (error) {
      throw new SessionError('SESSION_INVALID_SEED', `inheritedEventCount must be a non-negative integer, got ${String(cut)}.`, {
        cause: error,
      })
    }
    if (offset > this.#log.length) {
      throw new SessionError('SESSION_INVALID_SEED', `inheritedEventCount ${offset} exceeds the ${this.#log.length} events in the seed.`)
    }
    this.inheritedEventCount = offset
    this.forkSource = offset > 0 ? init.forkSource : undefined
  }

  get id(): SessionHeader['id'] {
    return this.header.id
  }

  /** A frozen snapshot of every event, inherited prefix included. */
  get events(): readonly SessionEvent[] {
    this.#snapshot ??= Object.freeze(this.#log.slice())
    return this.#snapshot
  }

  /** The next offset: the number of events in the log. */
  get seq(): SessionLogOffset {
    return this.#log.length as SessionLogOffset
  }

  eventAt(seq: number): SessionEvent | undefined {
    return Number.isSafeInteger(seq) && seq >= 0 ? this.#log[seq] : undefined
  }

  /** The session's own events: everything from the inherited cut on. */
  ownEvents(): readonly SessionEvent[] {
    return Object.freeze(this.#log.slice(this.inheritedEventCount))
  }

  /** True only for an existing position at or after the inherited cut. */
  isOwnSeq(seq: number): boolean {
    return Number.isSafeInteger(seq) && !Object.is(seq, -0) && seq >= this.inheritedEventCount && seq < this.#log.length
  }

  /** Whether a turn is open (started and not ended) before `boundary`. */
  openTurnBefore(boundary: number = this.#log.length): number | undefined {
    return findOpenTurn(this.#log, boundary)
  }

  /** The number the next turn takes: one above the highest `turn/start` in the log, inherited turns included (1 for none). */
  nextTurn(): number {
    let highest = 0
    for (const event of this.#log) {
      if (event.type !== 'turn/start') continue
      const turn = (event.data as { turn?: unknown } | null)?.turn
      if (typeof turn === 'number' && turn > highest) highest = turn
    }
    return highest + 1
  }

  /**
   * Appends one event synchronously and notifies listeners before returning.
   * Invalid data is rejected with `SESSION_INVALID_EVENT`, an event whose
   * encoded line would be over `EVENT_MAX_BYTES` with `SESSION_EVENT_TOO_LARGE`
   * (no store would take it, nor any event after it), and in both cases
   * nothing is appended; an append from inside a listener is rejected with
   * `SESSION_REENTRANT_APPEND` (listeners must not reorder the log).
   */
  append<T extends SessionEventType>(type: T, data: SessionEventMap[T]): SessionEvent<T>
  append(type: string, data: unknown): SessionEvent
  append(type: string, data: unknown): SessionEvent {
    if (this.#closed)
      throw new SessionError('SESSION_DISPOSED', `Session '${this.header.id}' has been disposed; restore it before appending.`)
    if (this.#appending) {
      throw new SessionError(
        'SESSION_REENTRANT_APPEND',
        `Session '${this.header.id}' is notifying listeners of an append; a listener must not append to it (schedule the append instead).`,
      )
    }
    if (typeof type !== 'string' || type.length === 0)
      throw new SessionError('SESSION_INVALID_EVENT', 'An event type must be a non-empty string.')
    const frozen = freezeLosslessJsonSized(data, `'${type}' data`)
    const event = Object.freeze({ type, seq: SessionSeq(this.#log.length), time: this.#clock(), data: frozen.value }) as SessionEvent
    if (frozen.maxBytes + ENVELOPE_MAX_BYTES + type.length * JSON_MAX_BYTES_PER_UNIT > EVENT_MAX_BYTES) this.#checkEventBytes(event)
    this.#log.push(event)
    this.#snapshot = undefined
    const listener = appendListeners.get(this)
    if (listener) {
      this.#appending = true
      try {
        listener(this, event)
      } finally {
        this.#appending = false
      }
    }
    return event
  }

  /** Measures an event's line exactly, as a persistence backend encodes it, and refuses it past `EVENT_MAX_BYTES`. */
  #checkEventBytes(event: SessionEvent): void {
    let line: string
    try {
      line = JSON.stringify({ type: event.type, seq: event.seq, time: event.time, data: event.data })
    } catch (error) {
      if (!(error instanceof RangeError)) throw error
      throw new SessionError(
        'SESSION_INVALID_EVENT',
        `Event '${event.type}' (seq ${event.seq}) of session '${this.header.id}' cannot be encoded as JSON (${error.message}): its data is nested too deeply or too long. Store large content as an attachment and reference it from the event; nothing was appended.`,
        { cause: error, details: { id: this.header.id, type: event.type, seq: event.seq } },
      )
    }
    // A UTF-16 code unit of a line is at most 3 UTF-8 bytes (JSON escapes lone surrogates).
    if (line.length * 3 <= EVENT_MAX_BYTES) return
    const bytes = Buffer.byteLength(line)
    if (bytes <= EVENT_MAX_BYTES) return
    throw new SessionError(
      'SESSION_EVENT_TOO_LARGE',
      `Event '${event.type}' (seq ${event.seq}) of session '${this.header.id}' encodes to ${bytes} bytes; an event is at most ${EVENT_MAX_BYTES} bytes (EVENT_MAX_BYTES), or no store would take it. Store large content as an attachment and reference it from the event; nothing was appended.`,
      { details: { id: this.header.id, type: event.type, seq: event.seq, bytes, max: EVENT_MAX_BYTES } },
    )
  }

  /** Internal: marks the session closed after the store disposed it. */
  close(): void {
    this.#closed = true
  }

  get closed(): boolean {
    return this.#closed
  }
}

function validateLog(events: readonly StoredSessionEvent[]): SessionEvent[] {
  if (!Array.isArray(events)) throw new SessionError('SESSION_INVALID_SEED', 'A seed must be an array of events.')
  return events.map((event, index) => {
    if (typeof event !== 'object' || event === null) throw new SessionError('SESSION_INVALID_SEED', `Seed event ${index} is not an object.`)
    if (event.seq !== index)
      throw new SessionError('SESSION_INVALID_SEED', `Seed event ${index} has seq ${String(event.seq)}; seq must equal the position.`)
    if (typeof event.type !== 'string' || event.type.length === 0)
      throw new SessionError('SESSION_INVALID_SEED', `Seed event ${index} has no type.`)
    if (typeof event.time !== 'number' || !Number.isFinite(event.time))
      throw new SessionError('SESSION_INVALID_SEED', `Seed event ${index} has no numeric time.`)
    // Already-frozen events (from another session) are reused as they are.
    if (Object.isFrozen(event) && Object.isFrozen(event.data)) return event as SessionEvent
    return Object.freeze({
      type: event.type,
      seq: SessionSeq(index),
      time: event.time,
      data: freezeLosslessJson(event.data, `seed event ${index} data`),
    }) as SessionEvent
  })
}

/** Returns the number of a turn left open by the first `boundary` events, if any. */
export function findOpenTurn(events: readonly StoredSessionEvent[], boundary = events.length): number | undefined {
  const open = new Set<number>()
  for (let i = 0; i < boundary && i < events.length; i++) {
    const event = events[i]!
    const turn = (event.data as { turn?: unknown } | null)?.turn
    if (typeof turn !== 'number') continue
    if (event.type === 'turn/start') open.add(turn)
    else if (event.type === 'turn/end') open.delete(turn)
  }
  const [first] = open
  return first
}
