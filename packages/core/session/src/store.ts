import { type Context, definePlugin } from '@dsh/context'
import { SessionId, SessionLogOffset } from './brands.js'
import { SessionError } from './errors.js'
import type { SessionEvent, StoredSessionEvent } from './events.js'
import { parseSessionHeader, SESSION_HEADER_VERSION, type SessionHeader } from './header.js'
import { onSessionAppend, Session } from './session.js'

export interface CreateSessionOptions {
  readonly id?: string
  readonly createdAt?: number
  readonly cwd?: string
  readonly parentSession?: string
  readonly origin?: 'subagent'
  readonly agentPreset?: string
  readonly delegationDepth?: number
  /** A seed copied from another session (plus, optionally, own setup events after the cut). */
  readonly seed?: readonly StoredSessionEvent[]
  /** Required with `seed`: how many seed events are inherited. */
  readonly inheritedEventCount?: number
  /** The id of the session the seed's inherited prefix comes from (see `SessionInit.forkSource`). */
  readonly forkSource?: string
}

export interface ForkOptions extends Omit<CreateSessionOptions, 'seed' | 'inheritedEventCount' | 'id' | 'forkSource'> {
  /** The cut: how many of the source's events the child inherits (default: all). */
  readonly boundary?: number
  readonly childId?: string
}

/** What a restore needs: a durable log as persistence returns it. */
export interface RestoredSession {
  readonly header: SessionHeader
  readonly inheritedEventCount: number
  readonly events: readonly StoredSessionEvent[]
}

export interface SessionCreatedInfo {
  /** True when the session was restored from a durable log (its events are already persisted). */
  readonly restored: boolean
}

declare module '@dsh/context' {
  interface Services {
    sessions: SessionStore
  }
  interface ContextEvents {
    'session/created': [session: Session, info: SessionCreatedInfo]
    'session/event': [session: Session, event: SessionEvent]
    'session/flush': [session: Session]
    'session/disposed': [session: Session]
  }
}

export interface SessionStoreOptions {
  readonly clock?: () => number
  readonly newId?: () => string
}

/** The live sessions of one process (service `sessions`). */
export class SessionStore {
  readonly #ctx: Context
  readonly #live = new Map<string, Session>()
  readonly #clock: () => number
  readonly #newId: () => string

  constructor(ctx: Context, options: SessionStoreOptions = {}) {
    this.#ctx = ctx
    this.#clock = options.clock ?? Date.now
    this.#newId = options.newId ?? newSessionId
  }

  create(options: CreateSessionOptions = {}): Session {
    if (options.seed === undefined && options.inheritedEventCount !== undefined && options.inheritedEventCount !== 0) {
      throw new SessionError('SESSION_INVALID_SEED', 'inheritedEventCount without a seed must be 0.')
    }
    if (options.seed !== undefined && options.inheritedEventCount === undefined) {
      throw new SessionError(
        'SESSION_INVALID_SEED',
        'A seeded session needs an explicit inheritedEventCount (the seed may hold own setup events after the inherited prefix).',
      )
    }
    const header = parseSessionHeader({
      version: SESSION_HEADER_VERSION,
      id: options.id ?? this.#newId(),
      createdAt: options.createdAt ?? this.#clock(),
      isSeeded: options.seed !== undefined,
      delegationDepth: options.delegationDepth ?? 0,
      ...(options.cwd === undefined ? {} : { cwd: options.cwd }),
      ...(options.parentSession === undefined ? {} : { parentSession: options.parentSession }),
      ...(options.origin === undefined ? {} : { origin: options.origin }),
      ...(options.agentPreset === undefined ? {} : { agentPreset: options.agentPreset }),
    })
    return this.#publish(
      new Session({
        header,
        events: options.seed ?? [],
        inheritedEventCount: options.inheritedEventCount ?? 0,
        ...(options.seed !== undefined && options.forkSource !== undefined ? { forkSource: SessionId(options.forkSource) } : {}),
        clock: this.#clock,
      }),
      false,
    )
  }

  /** Makes a durable session live again; its existing events are not re-persisted. */
  restore(restored: RestoredSession): Session {
    const header = parseSessionHeader(restored.header)
    return this.#publish(
      new Session({ header, events: restored.events, inheritedEventCount: restored.inheritedEventCount, clock: this.#clock }),
      true,
    )
  }

  /**
   * Creates a child that inherits the first `boundary` events of `source`.
   * A cut inside an open turn is refused (`SESSION_FORK_OPEN_TURN`).
   */
  fork(source: Session, options: ForkOptions = {}): Session {
    const { boundary, childId, ...rest } = options
    const seed = forkSeed(source, boundary)
    return this.create({
      parentSession: source.id,
      ...rest,
      ...(childId === undefined ? {} : { id: childId }),
      ...seed,
      forkSource: source.id,
    })
  }

  get(id: string): Session | undefined {
    return this.#live.get(id)
  }

  list(): Session[] {
    return [...this.#live.values()]
  }

  /**
   * Resolves once every `session/flush` listener (persistence) has made the
   * session's events durable. Rejects with `SESSION_FLUSH_FAILED` otherwise.
   */
  async flush(session: Session | string): Promise<void> {
    const live = this.#resolve(session)
    const failures = await this.#ctx.emitAsync('session/flush', live)
    if (failures.length > 0) {
      throw new SessionError(
        'SESSION_FLUSH_FAILED',
        `Flushing session '${live.id}' failed: ${describeFailure(failures[0])}. Its events stay in memory and will be retried.`,
        { cause: failures[0] },
      )
    }
  }

  /**
   * Takes a session out of memory ("goes cold"): flushes it first, so nothing
   * acknowledged is lost, then notifies `session/disposed` listeners.
   */
  async dispose(id: string): Promise<void> {
    const live = this.#live.get(id)
    if (!live) return
    await this.flush(live)
    this.#live.delete(id)
    live.close()
    await this.#ctx.emitAsync('session/disposed', live)
  }

  #publish(session: Session, restored: boolean): Session {
    if (this.#live.has(session.id)) {
      throw new SessionError('SESSION_ALREADY_EXISTS', `Session '${session.id}' is already live in this process.`)
    }
    this.#live.set(session.id, session)
    onSessionAppend(session, (s, event) => this.#ctx.emit('session/event', s, event))
    this.#ctx.emit('session/created', session, { restored })
    return session
  }

  #resolve(session: Session | string): Session {
    const id = typeof session === 'string' ? session : session.id
    const live = this.#live.get(id)
    if (!live) throw new SessionError('SESSION_NOT_FOUND', `Session '${id}' is not live in this process.`)
    return live
  }
}

/** The seed and cut of a fork of `source` at `boundary` (default: its whole log). */
export function forkSeed(
  source: Session,
  boundary: number = source.seq,
): { seed: readonly StoredSessionEvent[]; inheritedEventCount: SessionLogOffset } {
  let cut: SessionLogOffset
  try {
    cut = SessionLogOffset(boundary)
  } catch (error) {
    throw new SessionError('SESSION_FORK_OUT_OF_RANGE', `A fork boundary must be a non-negative integer, got ${String(boundary)}.`, {
      cause: error,
    })
  }
  if (cut > source.seq) {
    throw new SessionError(
      'SESSION_FORK_OUT_OF_RANGE',
      `Fork boundary ${cut} is past the end of session '${source.id}' (${source.seq} events).`,
    )
  }
  const open = source.openTurnBefore(cut)
  if (open !== undefined) {
    throw new SessionError(
      'SESSION_FORK_OPEN_TURN',
      `Cannot fork session '${source.id}' at ${cut}: turn ${open} is still open there. Fork before its turn/start or after its turn/end.`,
    )
  }
  return { seed: source.events.slice(0, cut), inheritedEventCount: cut }
}

function describeFailure(failure: unknown): string {
  return failure instanceof Error ? failure.message : String(failure)
}

/** Provides service `sessions`. */
export const sessionStorePlugin = (options: SessionStoreOptions = {}) =>
  definePlugin({
    name: 'sessions',
    activate(ctx) {
      ctx.provide('sessions', new SessionStore(ctx, options))
    },
  })

/** A fresh random session id; node:crypto is loaded at the first one, not by importing the store (a listing makes none). */
function newSessionId(): string {
  return process.getBuiltinModule('node:crypto').randomUUID()
}
