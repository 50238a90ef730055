import { hostname } from 'node:os'
import type { Logger } from '@dsh/context'
import type { StreamWrittenBody } from '@dsh/protocol'
import type { ApiServices, PersistenceReader } from './services.js'

type Writer = StreamWrittenBody['writer']

/** How often the change feed is read while a stream is open. */
export const FOLLOW_INTERVAL_MS = 500
/** Changed ids looked at per read of the feed (the rest wait for the next one). */
const MAX_IDS_PER_TICK = 64
/** Parents remembered, so a busy child costs no header read per change. */
const MAX_PARENTS = 4096
const MAX_ANCESTRY = 64
const MAX_RETRIES = 20

/**
 * Follows writes made by other processes, which the host never sees in
 * memory: while a stream is open it reads the persistence change feed, asks
 * the writer lock of each changed session that is not live here who holds
 * it, and tells the streams of that session and of its ancestors
 * (`written`). A session last seen held by another process is asked again
 * on every read, so the page also learns when that writer goes away and the
 * session comes to rest. Reads the feed, lock files and, once per session,
 * a history page of one event for its parent; never a whole log.
 */
export class WriteFollower {
  readonly #persistence: Required<Pick<PersistenceReader, 'changes' | 'writerOf'>>
  readonly #services: ApiServices
  readonly #send: (target: string, body: StreamWrittenBody) => void
  readonly #streaming: (id: string) => boolean
  readonly #logger: Logger
  readonly #parents = new Map<string, string | null>()
  readonly #writing = new Set<string>()
  /** Ids whose ancestry could not be read when they changed: told again on the next reads, at most `MAX_RETRIES` times. */
  readonly #untold = new Map<string, { readonly writer: Writer; readonly attempts: number }>()
  readonly #self = { pid: process.pid, host: hostname() }
  #cursor: string | undefined
  #timer: NodeJS.Timeout | undefined
  #busy = false
  /** Reads of the feed that failed in a row: the first is logged, and the read that ends the run. */
  #failures = 0

  constructor(
    persistence: Required<Pick<PersistenceReader, 'changes' | 'writerOf'>>,
    services: ApiServices,
    send: (target: string, body: StreamWrittenBody) => void,
    streaming: (id: string) => boolean,
    logger: Logger,
  ) {
    this.#persistence = persistence
    this.#services = services
    this.#send = send
    this.#streaming = streaming
    this.#logger = logger
  }

  /** The follower of `services`' persistence, when it has a change feed and writer locks. */
  static of(
    services: ApiServices,
    send: (target: string, body: StreamWrittenBody) => void,
    streaming: (id: string) => boolean,
    logger: Logger,
  ): WriteFollower | undefined {
    const persistence = services.sessionPersistence
    if (persistence?.changes === undefined || persistence.writerOf === undefined) return undefined
    const bound = { changes: persistence.changes.bind(persistence), writerOf: persistence.writerOf.bind(persistence) }
    return new WriteFollower(bound, services, send, streaming, logger)
  }

  start(): void {
    if (this.#timer !== undefined) return
    this.#timer = setInterval(() => void this.#tick(), FOLLOW_INTERVAL_MS)
    this.#timer.unref()
    void this.#tick()
  }

  stop(): void {
    clearInterval(this.#timer)
    this.#timer = undefined
  }

  /** Tells a new stream of `id` when another process is writing that session now. */
  async announce(id: string): Promise<void> {
    if (this.#services.sessions?.get(id) !== undefined) return
    const writer = await this.#writerOf(id)
    if (writer !== 'other-process') return
    this.#writing.add(id)
    this.#send(id, { sessionId: id, id, writer })
  }

  async #tick(): Promise<void> {
    if (this.#busy) return
    this.#busy = true
    try {
      const first = this.#cursor === undefined
      const feed = await this.#persistence.changes(this.#cursor)
      this.#cursor = feed.cursor
      // The first read only finds where the feed is; a rescan's ids are everything, not what changed.
      const changed = first || feed.rescan ? [] : feed.ids.slice(0, MAX_IDS_PER_TICK)
      const retry = [...this.#untold]
      this.#untold.clear()
      for (const [id, { writer, attempts }] of retry) await this.#tell(id, writer, attempts + 1)
      const ids = [...new Set([...changed, ...this.#writing])].filter((id) => this.#services.sessions?.get(id) === undefined)
      // Asked MAX_IDS_PER_TICK at a time: the PostgreSQL backend answers each round with one read of the server's lock table.
      const writers: Writer[] = []
      for (let start = 0; start < ids.length; start += MAX_IDS_PER_TICK) {
        writers.push(...(await Promise.all(ids.slice(start, start + MAX_IDS_PER_TICK).map((id) => this.#writerOf(id)))))
      }
      for (const [i, id] of ids.entries()) {
        const writer = writers[i]!
        const was = this.#writing.has(id)
        if (writer === 'other-process') this.#writing.add(id)
        else this.#writing.delete(id)
        if (changed.includes(id) || was !== (writer === 'other-process')) await this.#tell(id, writer)
      }
      if (this.#failures > 0) this.#logger.warn(`dsh: the HTTP API follows the change feed again after ${this.#failures} failed read(s).`)
      this.#failures = 0
    } catch (error) {
      // Once per outage: a server that is down fails every read until it is back.
      if (this.#failures === 0)
        this.#logger.warn(
          `dsh: the HTTP API failed to follow the change feed; it is read again every ${FOLLOW_INTERVAL_MS} ms, and logged again when it works.`,
          error,
        )
      this.#failures++
    } finally {
      this.#busy = false
    }
  }

  async #writerOf(id: string): Promise<Writer> {
    const holder = await this.#persistence.writerOf(id)
    if (holder === undefined) return 'none'
    return holder.pid === this.#self.pid && holder.host === this.#self.host ? 'this-process' : 'other-process'
  }

  /** Sends `written` to the streams of `id` and of each ancestor; an ancestry not readable yet is told again on the next read. */
  async #tell(id: string, writer: Writer, attempts = 0): Promise<void> {
    let cursor: string | null | undefined = id
    for (let depth = 0; typeof cursor === 'string' && depth < MAX_ANCESTRY; depth++) {
      if (this.#streaming(cursor)) this.#send(cursor, { sessionId: cursor, id, writer })
      cursor = await this.#parentOf(cursor)
    }
    if (cursor === undefined && attempts < MAX_RETRIES) this.#untold.set(id, { writer, attempts })
  }

  /** The session's parent, `null` for none, `undefined` when its header cannot be read now. */
  async #parentOf(id: string): Promise<string | null | undefined> {
    const known = this.#parents.get(id)
    if (known !== undefined) return known
    const live = this.#services.sessions?.get(id)
    let parent: string | null
    try {
      const header = live?.header ?? (await this.#services.sessionQuery.readHistory(id, { limit: 1 })).header
      parent = header.parentSession ?? null
    } catch {
      // Not readable (yet, or any more): asked again on the next read.
      return undefined
    }
    if (this.#parents.size >= MAX_PARENTS) this.#parents.delete(this.#parents.keys().next().value as string)
    this.#parents.set(id, parent)
    return parent
  }
}
