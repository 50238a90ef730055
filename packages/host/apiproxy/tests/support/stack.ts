import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { compactionPlugin, type Summarizer } from '@dsh/compaction'
import { Context, type Logger } from '@dsh/context'
import { type Session, type SessionStore, sessionStorePlugin } from '@dsh/session'
import { sessionContextPlugin } from '@dsh/session-context'
import { createMemoryPersistence, type SessionPersistence, sessionPersistencePlugin } from '@dsh/session-persistence'
import { createJsonlPersistence, type JsonlPersistence } from '@dsh/session-persistence-jsonl'
import { sessionProjectionsPlugin } from '@dsh/session-projection'
import { sessionProjectionCachePlugin } from '@dsh/session-projection-cache'
import { sessionQueryPlugin } from '@dsh/session-query'
import { defaultIndexPath, sqliteSessionQueryPlugin } from '@dsh/session-query-sqlite'
import { sessionStatsPlugin } from '@dsh/session-stats'
import { createScriptedDriver, type SubagentDriver, type SubagentRuntime, subagentsPlugin } from '@dsh/subagent'
import { type ApiLimits, type ApiServer, type ApiServices, createApiServer } from '../../src/index.js'

type SessionQuery = ApiServices['sessionQuery']

export const TOKEN = 'test-token-0123456789abcdef'

/**
 * Children whose id has a gate stay mid-turn until the gate is released, so a
 * test can watch a running child finish.
 */
export class Gates {
  readonly #gates = new Map<string, { promise: Promise<void>; release: () => void }>()

  hold(id: string): void {
    let release!: () => void
    const promise = new Promise<void>((resolve) => (release = resolve))
    this.#gates.set(id, { promise, release })
  }

  release(id: string): void {
    this.#gates.get(id)?.release()
  }

  get(id: string): Promise<void> | undefined {
    return this.#gates.get(id)?.promise
  }
}

export interface Stack {
  readonly ctx: Context
  readonly sessions: SessionStore
  readonly subagents: SubagentRuntime
  readonly persistence: SessionPersistence
  /** The JSONL backend and its root, for the `disk` stack. */
  readonly disk: { readonly root: string; readonly persistence: JsonlPersistence } | undefined
  readonly gates: Gates
  readonly server: ApiServer
  readonly errors: unknown[]
  /** Everything the server logged, warnings included (the details kept off the wire). */
  readonly logs: Array<{ readonly level: 'warn' | 'error'; readonly message: string; readonly error: unknown }>
  /** GET `path` with the token (unless `token: null`), answering status and parsed body. */
  get(path: string, options?: { token?: string | null }): Promise<{ status: number; body: unknown; headers: Headers }>
  close(): Promise<void>
}

export interface StackOptions {
  /**
   * `memory` (default): the in-memory persistence backend and query corpus.
   * `disk`: what the CLI embeds — zstd JSONL files in a temp root, the SQLite
   * query index (with search) and the SQLite projection cache.
   */
  readonly backend?: 'memory' | 'disk'
  /** With `disk`: the query backend (default `sqlite`; `memory` scans the JSONL root itself). */
  readonly query?: 'sqlite' | 'memory'
  readonly limits?: Partial<ApiLimits>
  /** Wraps the services the server reads (to interpose on a read in a test). */
  readonly wrap?: (services: ApiServices) => Partial<ApiServices>
  /** Provides service `compaction` over this summarizer (and the context unit), as a host with a model does. */
  readonly summarizer?: Summarizer
  /** Runs the subagents in place of the gated scripted driver (to give children model calls with usage). */
  readonly driver?: SubagentDriver
}

/**
 * The real stack the CLI composes, in one process: the session store,
 * persistence with its coordinator, the projection registry, the query
 * corpus, the subagent runtime with its scripted driver, and the HTTP API on
 * 127.0.0.1, port 0.
 */
export async function startStack(options: StackOptions = {}): Promise<Stack> {
  const errors: unknown[] = []
  const logs: Stack['logs'] = []
  const logger: Logger = {
    warn: (message, error) => void logs.push({ level: 'warn', message, error }),
    error: (message, error) => {
      errors.push(error)
      logs.push({ level: 'error', message, error })
    },
  }
  const ctx = new Context({ logger })
  const gates = new Gates()
  const root = options.backend === 'disk' ? mkdtempSync(join(tmpdir(), 'dsh-apiproxy-')) : undefined
  const jsonl = root === undefined ? undefined : createJsonlPersistence({ root })
  const persistence = jsonl ?? createMemoryPersistence()
  const driver =
    options.driver ??
    createScriptedDriver((run) => {
      const gate = gates.get(run.session.id)
      return [
        { kind: 'chunk', text: `working on ${run.prompt ?? 'it'}` },
        ...(gate === undefined ? [] : [{ kind: 'until' as const, promise: gate }]),
        { kind: 'message', text: `finished ${run.prompt ?? 'it'}` },
      ]
    })
  await ctx.activate(sessionStorePlugin())
  await ctx.activate(sessionPersistencePlugin(persistence))
  await ctx.activate(sessionProjectionsPlugin())
  // Usage and titles, as the host registers them (the stats route reads them).
  await ctx.activate(sessionStatsPlugin())
  if (root === undefined || options.query === 'memory') {
    await ctx.activate(sessionQueryPlugin())
  }
  if (root !== undefined) await ctx.activate(sessionProjectionCachePlugin({ root }))
  if (root !== undefined && options.query !== 'memory') {
    await ctx.activate(sqliteSessionQueryPlugin({ path: defaultIndexPath(root) }))
  }
  await ctx.activate(subagentsPlugin({ driver }))
  if (options.summarizer !== undefined) {
    await ctx.activate(sessionContextPlugin())
    ctx.provide('summarizer', options.summarizer)
    await ctx.activate(compactionPlugin())
  }
  const sessions = ctx.require('sessions')
  const subagents = ctx.require('subagents')
  const base: ApiServices = {
    sessionQuery: ctx.require('sessionQuery'),
    subagents,
    sessions,
    sessionProjections: ctx.require('sessionProjections'),
    compaction: ctx.get('compaction'),
    sessionLoader: ctx.require('sessionPersistence'),
  }
  const server = await createApiServer({
    ctx,
    services: options.wrap?.(base) ?? base,
    token: TOKEN,
    logger,
    ...(options.limits === undefined ? {} : { limits: options.limits }),
  })
  return {
    ctx,
    sessions,
    subagents,
    persistence: ctx.require('sessionPersistence'),
    disk: root === undefined || jsonl === undefined ? undefined : { root, persistence: jsonl },
    gates,
    server,
    errors,
    logs,
    async get(path, { token = TOKEN } = {}) {
      const response = await fetch(`${server.url}${path}`, { headers: token === null ? {} : { Authorization: `Bearer ${token}` } })
      const text = await response.text()
      let body: unknown = text
      try {
        body = JSON.parse(text)
      } catch {
        // Not JSON (the page, a script): keep the text.
      }
      return { status: response.status, body, headers: response.headers }
    },
    async close() {
      await server.close()
      await ctx.dispose()
      if (root !== undefined) rmSync(root, { recursive: true, force: true })
    },
  }
}

/** Appends one completed turn to a live session. */
export function turn(session: Session, text: string): void {
  const number = session.events.filter((event) => event.type === 'turn/start').length + 1
  session.append('turn/start', { turn: number })
  session.append('user/message', { text })
  session.append('assistant/message', { turn: number, text: `answer to ${text}` })
  session.append('turn/end', { turn: number, reason: 'completed' })
}

/**
 * `services` whose session query hands every read to the real one, except the
 * reads in `overrides` (a test interposes on a read this way).
 */
export function withQuery(services: ApiServices, overrides: (query: SessionQuery) => Partial<SessionQuery>): ApiServices {
  const query = services.sessionQuery
  return {
    ...services,
    sessionQuery: {
      listSessions: (filter, signal) => query.listSessions(filter, signal),
      observeSession: (id, signal) => query.observeSession(id, signal),
      readHistory: (id, request, signal) => query.readHistory(id, request, signal),
      readWindow: (id, request, signal) => query.readWindow(id, request, signal),
      ...(query.searchSessions === undefined ? {} : { searchSessions: (request, signal) => query.searchSessions!(request, signal) }),
      ...overrides(query),
    },
  }
}
