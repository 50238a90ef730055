import { Context, isDshError, type Logger } from '@dsh/context'
import { type Session, type SessionStore, sessionStorePlugin } from '@dsh/session'
import {
  createMemoryPersistence,
  MemoryPersistenceStorage,
  type SessionPersistence,
  sessionPersistencePlugin,
} from '@dsh/session-persistence'
import { type SessionProjections, sessionProjectionsPlugin } from '@dsh/session-projection'
import { createSessionQuery, type SessionQuery } from '@dsh/session-query'
import { afterEach } from 'vitest'
import {
  createScriptedDriver,
  type ScriptStep,
  type SubagentDriver,
  type SubagentRuntime,
  type SubagentStepPricer,
  type SubagentToolProvider,
  subagentsPlugin,
} from '../src/index.js'

export interface HostOptions {
  /** Shared "disk" for memory persistence (a restart reopens the same storage). */
  readonly storage?: MemoryPersistenceStorage
  /** A persistence backend to use instead of memory; `false` for none. */
  readonly persistence?: SessionPersistence | false
  /** Wraps the real query service (to count or interleave calls); `false` provides none. */
  readonly query?: false | ((query: SessionQuery) => SessionQuery)
  readonly projections?: boolean
  readonly sessions?: boolean
  readonly subagents?: boolean
  readonly driver?: SubagentDriver
  readonly tools?: SubagentToolProvider
  readonly maxDepth?: number
  readonly coldReadConcurrency?: number
  /** First createdAt; each new session gets the next millisecond. */
  readonly epoch?: number
  /** The runtime's pricing and clock (budgets). */
  readonly pricing?: SubagentStepPricer
  readonly clock?: () => number
  /** Extra plugins activated after persistence (the projection cache). */
  readonly extra?: (ctx: Context) => Promise<void>
}

export interface Host {
  readonly ctx: Context
  readonly sessions: SessionStore
  readonly projections: SessionProjections
  readonly persistence: SessionPersistence | undefined
  readonly runtime: SubagentRuntime
  readonly warnings: string[]
  readonly errors: unknown[]
  dispose(): Promise<void>
}

let hostSeq = 0

/** A real composition: store, projection registry, persistence + coordinator, memory query, subagents. */
export async function createHost(options: HostOptions = {}): Promise<Host> {
  const warnings: string[] = []
  const errors: unknown[] = []
  const logger: Logger = { warn: (message) => void warnings.push(message), error: (_message, error) => void errors.push(error) }
  const ctx = new Context({ logger })
  ctx.provide('logger', logger)
  let clock = options.epoch ?? 1_700_000_000_000 + 1_000_000 * ++hostSeq
  if (options.sessions !== false) await ctx.activate(sessionStorePlugin({ clock: () => clock++ }))
  if (options.projections !== false && options.sessions !== false) await ctx.activate(sessionProjectionsPlugin())
  const persistence =
    options.persistence === false
      ? undefined
      : (options.persistence ?? createMemoryPersistence({ storage: options.storage ?? new MemoryPersistenceStorage() }))
  if (persistence !== undefined && options.sessions !== false)
    await ctx.activate(sessionPersistencePlugin(persistence, { writeBehindMs: 0 }))
  if (options.query !== false && options.sessions !== false) {
    const sessions = ctx.require('sessions')
    const real = createSessionQuery({ sessions, persistence: ctx.get('sessionPersistence') })
    ctx.provide('sessionQuery', options.query === undefined ? real : options.query(real))
  }
  await options.extra?.(ctx)
  if (options.subagents !== false) {
    await ctx.activate(
      subagentsPlugin({
        driver: options.driver ?? createScriptedDriver(),
        ...(options.maxDepth === undefined ? {} : { maxDepth: options.maxDepth }),
        ...(options.coldReadConcurrency === undefined ? {} : { coldReadConcurrency: options.coldReadConcurrency }),
        ...(options.tools === undefined ? {} : { tools: options.tools }),
        ...(options.pricing === undefined ? {} : { pricing: options.pricing }),
        ...(options.clock === undefined ? {} : { clock: options.clock }),
      }),
    )
  }
  return {
    ctx,
    get sessions() {
      return ctx.require('sessions')
    },
    get projections() {
      return ctx.require('sessionProjections')
    },
    get persistence() {
      return ctx.get('sessionPersistence')
    },
    get runtime() {
      return ctx.require('subagents')
    },
    warnings,
    errors,
    dispose: () => ctx.dispose(),
  }
}

/** The hosts of one spec file (`hostsPerTest`). */
export interface HostsPerTest {
  /** `createHost(options)`, disposed after the test that opened it. */
  open(options?: HostOptions): Promise<Host>
  /** Disposes `host` before its test ends (a process that stops mid-test). */
  close(host: Host): Promise<void>
  /** Stops tracking `host` without disposing it (a process that dies without closing). */
  abandon(host: Host): void
}

/**
 * Hosts disposed after each test: call once at the top of a spec file (it
 * registers an `afterEach`). `cleanup` runs after the hosts are disposed, so
 * a directory it removes outlives every process that used it.
 */
export function hostsPerTest(cleanup?: () => void | Promise<void>): HostsPerTest {
  const hosts: Host[] = []
  afterEach(async () => {
    for (const h of hosts.splice(0)) await h.dispose()
    await cleanup?.()
  })
  return {
    async open(options) {
      const h = await createHost(options)
      hosts.push(h)
      return h
    },
    async close(host) {
      hosts.splice(hosts.indexOf(host), 1)
      await host.dispose()
    },
    abandon(host) {
      hosts.splice(hosts.indexOf(host), 1)
    },
  }
}

/** A promise with its resolver, to hold a scripted turn open. */
export function gate(): { promise: Promise<void>; open: () => void } {
  let open!: () => void
  const promise = new Promise<void>((resolve) => (open = resolve))
  return { promise, open }
}

/** A script that streams, then holds the turn open until `hold` settles. */
export function holdScript(hold: PromiseLike<unknown>): ScriptStep[] {
  return [
    { kind: 'chunk', text: 'working' },
    { kind: 'until', promise: hold },
    { kind: 'message', text: 'finished' },
  ]
}

/** Physical body reads so far (through the shared-reads wrapper to the backend). */
export function bodyReads(host: Host): number {
  const persistence = host.persistence as (SessionPersistence & { backend?: SessionPersistence }) | undefined
  return (persistence?.backend ?? persistence)?.metrics.bodyReads ?? 0
}

/** Appends a completed turn, like a top-level agent would. */
export function completedTurn(session: Session, turn: number, text = `turn ${turn}`): void {
  session.append('turn/start', { turn })
  session.append('assistant/message', { turn, text })
  session.append('turn/end', { turn, reason: 'completed' })
}

/** A query wrapper that counts calls per method and lets a test interleave work around them. */
export interface QueryProbe {
  readonly calls: { listSessions: number; observeSession: number }
  inFlight: number
  maxInFlight: number
  beforeObserve?: ((id: string) => Promise<void> | void) | undefined
  afterObserve?: (id: string) => Promise<void> | void
  mapObservation?: (
    id: string,
    observation: Awaited<ReturnType<SessionQuery['observeSession']>>,
  ) => Awaited<ReturnType<SessionQuery['observeSession']>>
  afterList?: () => Promise<void> | void
  mapRecords?: (
    records: Awaited<ReturnType<SessionQuery['listSessions']>>['records'],
  ) => Awaited<ReturnType<SessionQuery['listSessions']>>['records']
  wrap(query: SessionQuery): SessionQuery
}

export function queryProbe(): QueryProbe {
  const probe: QueryProbe = {
    calls: { listSessions: 0, observeSession: 0 },
    inFlight: 0,
    maxInFlight: 0,
    wrap(query) {
      return {
        ...query,
        async listSessions(filter, signal) {
          probe.calls.listSessions++
          const page = await query.listSessions(filter, signal)
          await probe.afterList?.()
          return probe.mapRecords === undefined ? page : { ...page, records: probe.mapRecords(page.records) }
        },
        async observeSession(id, signal) {
          probe.calls.observeSession++
          probe.inFlight++
          probe.maxInFlight = Math.max(probe.maxInFlight, probe.inFlight)
          try {
            await probe.beforeObserve?.(id)
            const observation = await query.observeSession(id, signal)
            await probe.afterObserve?.(id)
            return probe.mapObservation === undefined ? observation : probe.mapObservation(id, observation)
          } finally {
            probe.inFlight--
          }
        },
      }
    },
  }
  return probe
}

/** The `code` of what `op` throws or rejects with (`'resolved'` when it succeeds). */
export async function codeOf(op: Promise<unknown> | (() => unknown)): Promise<string> {
  try {
    await (typeof op === 'function' ? op() : op)
  } catch (error) {
    return isDshError(error) ? error.code : String(error)
  }
  return 'resolved'
}
