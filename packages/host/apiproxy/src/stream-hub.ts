import type { Logger } from '@dsh/context'
import type { StreamCatalogBody, StreamProjectionBody } from '@dsh/protocol'
import type { Session, SessionHeader } from '@dsh/session'
import type { ProjectionChange } from '@dsh/session-projection'
import { ApiError } from './errors.js'
import type { ApiLimits } from './limits.js'
import type { ApiEventSource, ApiServices } from './services.js'
import type { SseStream } from './sse.js'
import { WriteFollower } from './write-follower.js'

type CatalogReason = StreamCatalogBody['reason']

/** Projection-driven catalog notices are coalesced per child over this window (a busy child may change views on every event). */
const COALESCE_MS = 50
/** How far up a chain of live subagents a notice travels (depth is bounded by the runtime anyway). */
const MAX_ANCESTRY = 64

/**
 * Fans session changes out to the open SSE streams. A stream for session S gets
 * S's own projection changes (unless S is a subagent: a child's data reaches
 * clients only through its parent's routes) and a `catalog` notice whenever a
 * subagent below S is created, ends a turn, goes cold or changes a projection.
 * Notices carry ids only, never event data.
 */
export class StreamHub {
  readonly #services: ApiServices
  readonly #events: ApiEventSource | undefined
  readonly #limits: ApiLimits
  readonly #logger: Logger
  readonly #streams = new Map<string, Set<SseStream>>()
  readonly #pending = new Map<string, SessionHeader>()
  readonly #unsubscribe: Array<() => void> = []
  readonly #follower: WriteFollower | undefined
  #timer: NodeJS.Timeout | undefined
  #count = 0
  #started = false

  constructor(services: ApiServices, events: ApiEventSource | undefined, limits: ApiLimits, logger: Logger) {
    this.#services = services
    this.#events = events
    this.#limits = limits
    this.#logger = logger
    this.#follower = WriteFollower.of(
      services,
      (target, body) => {
        for (const stream of this.#streams.get(target) ?? []) stream.send({ event: 'written', data: body })
      },
      (id) => this.#streams.has(id),
      logger,
    )
  }

  get openStreams(): number {
    return this.#count
  }

  /** Registers `stream` for `sessionId`; refuses with `API_TOO_MANY_STREAMS` past the limit. */
  reserve(): void {
    if (this.#count >= this.#limits.maxStreams) {
      throw new ApiError(
        'API_TOO_MANY_STREAMS',
        `This host already serves ${this.#limits.maxStreams} event streams; close one (or raise limits.maxStreams) and retry.`,
      )
    }
  }

  add(sessionId: string, stream: SseStream): void {
    this.#start()
    const set = this.#streams.get(sessionId) ?? new Set<SseStream>()
    this.#streams.set(sessionId, set)
    set.add(stream)
    this.#count++
    stream.onClose(() => {
      this.#count--
      set.delete(stream)
      if (set.size === 0 && this.#streams.get(sessionId) === set) this.#streams.delete(sessionId)
      if (this.#streams.size === 0) this.#follower?.stop()
    })
    if (this.#follower !== undefined) {
      this.#follower.start()
      this.#follower
        .announce(sessionId)
        .catch((error: unknown) => this.#logger.warn('dsh: the HTTP API could not read a writer lock.', error))
    }
  }

  /** Ends every stream and stops listening. */
  close(): void {
    this.#follower?.stop()
    for (const off of this.#unsubscribe.splice(0)) off()
    clearTimeout(this.#timer)
    this.#timer = undefined
    this.#pending.clear()
    for (const set of [...this.#streams.values()]) for (const stream of [...set]) stream.close()
    this.#streams.clear()
  }

  // Subscribes on the first stream, so a server nobody streams from adds no listener work to every append.
  #start(): void {
    if (this.#started) return
    this.#started = true
    const guard =
      <A extends unknown[]>(fn: (...args: A) => void) =>
      (...args: A): void => {
        try {
          fn(...args)
        } catch (error) {
          this.#logger.warn('dsh: an HTTP API stream notification failed; the stream stays open.', error)
        }
      }
    const projections = this.#services.sessionProjections
    if (projections) this.#unsubscribe.push(projections.onChanged(guard((change) => this.#onProjection(change))))
    const events = this.#events
    if (events) {
      this.#unsubscribe.push(
        events.on(
          'session/created',
          guard((session: Session) => this.#notify(session.header, 'created')),
        ),
        events.on(
          'session/event',
          guard((session: Session, event: { type: string }) => {
            if (event.type === 'turn/end') this.#notify(session.header, 'turn-end')
          }),
        ),
        events.on(
          'session/disposed',
          guard((session: Session) => this.#notify(session.header, 'disposed')),
        ),
      )
    }
  }

  #onProjection(change: ProjectionChange): void {
    const header = change.session.header
    if (header.origin !== 'subagent') {
      const streams = this.#streams.get(header.id)
      if (streams) {
        const body: StreamProjectionBody = {
          sessionId: header.id,
          key: change.key,
          seq: change.seq,
          ...(change.view === undefined ? {} : { view: change.view as StreamProjectionBody['view'] }),
        }
        for (const stream of streams) stream.send({ event: 'projection', data: body })
      }
      return
    }
    if (this.#streams.size === 0) return
    this.#pending.set(header.id, header)
    this.#timer ??= setTimeout(() => {
      this.#timer = undefined
      const pending = [...this.#pending.values()]
      this.#pending.clear()
      for (const pendingHeader of pending) this.#notify(pendingHeader, 'projection')
    }, COALESCE_MS)
  }

  /** Sends a catalog notice about subagent `child` to the streams of its parent and of every live ancestor subagent. */
  #notify(child: SessionHeader, reason: CatalogReason): void {
    if (child.origin !== 'subagent' || child.parentSession === undefined || this.#streams.size === 0) return
    const parentId = child.parentSession
    const visited = new Set<string>()
    let cursor: string | undefined = parentId
    while (cursor !== undefined && !visited.has(cursor) && visited.size < MAX_ANCESTRY) {
      visited.add(cursor)
      const streams = this.#streams.get(cursor)
      if (streams) {
        const body: StreamCatalogBody = { sessionId: cursor, parentId, childId: child.id, reason }
        for (const stream of streams) stream.send({ event: 'catalog', data: body })
      }
      const ancestor: Session | undefined = this.#services.sessions?.get(cursor)
      cursor = ancestor?.header.origin === 'subagent' ? ancestor.header.parentSession : undefined
    }
  }
}
