// cache-lookup: `sessionProjectionCache.cachedSnapshot` for 1,000 cold
// sessions against 1,000 raw better-sqlite3 point lookups of the same rows
// Target: the cache costs at most 2× the raw
// lookups, i.e. identity check + JSON + schema + view add at most one lookup.
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { Context } from '@dsh/context'
import { Session, type SessionHeader, SessionLogOffset, type StoredSessionEvent } from '@dsh/session'
import { createProjectionRegistry, type SessionProjectionUnit, z } from '@dsh/session-projection'
import { projectionCachePath, SqliteProjectionCache } from '@dsh/session-projection-cache'
import { headerOf } from '@dsh/test-kit'
import Database from 'better-sqlite3'
import { type BenchDefinition, time } from '../harness.js'

// A small realistic unit, shaped like the subagent identity unit: the last
// descriptor's mode and label, with the seq it came from.
interface BenchIdentity {
  readonly mode: 'one-shot' | 'continuable'
  readonly label?: string | undefined
  readonly seq: number
}
declare module '@dsh/session-projection' {
  interface SessionProjectionStateMap {
    benchIdentity: { identity?: BenchIdentity | undefined }
  }
  interface SessionProjectionMap {
    benchIdentity: BenchIdentity | null
  }
}

const identitySchema = z.object({
  mode: z.enum(['one-shot', 'continuable']),
  label: z.string().optional(),
  seq: z.number().int().nonnegative(),
})

const benchIdentityUnit: SessionProjectionUnit<'benchIdentity'> = {
  key: 'benchIdentity',
  stateVersion: 1,
  init: () => ({}),
  apply: (state, event) => {
    if (event.type !== 'bench/descriptor') return state
    const parsed = z.object({ mode: z.enum(['one-shot', 'continuable']), label: z.string().optional() }).safeParse(event.data)
    return parsed.success ? { identity: { ...parsed.data, seq: event.seq } } : {}
  },
  view: (state) => state.identity ?? null,
  schema: z.object({ identity: identitySchema.optional() }),
}

const SESSIONS = 1_000
/** Passes over the 1,000 sessions per sample, so one sample is long enough to time. */
const PASSES = 20
const KEYS = ['benchIdentity'] as const

let dir = ''
let cache: SqliteProjectionCache | undefined
let raw: Database.Database | undefined
let rawLookup: Database.Statement<[string, string], { payload: string }> | undefined
const headers: SessionHeader[] = []
let hits = 0

function eventsFor(i: number): StoredSessionEvent[] {
  const events: StoredSessionEvent[] = [
    {
      type: 'bench/descriptor',
      seq: 0 as StoredSessionEvent['seq'],
      time: 1,
      data: i % 2 === 0 ? { mode: 'one-shot' } : { mode: 'continuable', label: `worker-${i}` },
    },
  ]
  for (let t = 1; t <= 5; t++) {
    events.push({ type: 'turn/start', seq: events.length as StoredSessionEvent['seq'], time: 1, data: { turn: t } })
    events.push({
      type: 'assistant/message',
      seq: events.length as StoredSessionEvent['seq'],
      time: 1,
      data: { turn: t, text: `answer ${t}` },
    })
    events.push({ type: 'turn/end', seq: events.length as StoredSessionEvent['seq'], time: 1, data: { turn: t, reason: 'completed' } })
  }
  return events
}

function fill(): void {
  const projections = createProjectionRegistry(new Context())
  projections.register(benchIdentityUnit)
  const options = { path: projectionCachePath(dir), projections, sessions: { flush: async () => {} } }
  // The writing process: each session's final checkpoint, as when it went cold.
  const writer = new SqliteProjectionCache(options)
  for (let i = 0; i < SESSIONS; i++) {
    const header = headerOf(`child-${i}`, {
      createdAt: 1_700_000_000_000 + i,
      delegationDepth: 1,
      origin: 'subagent',
      parentSession: 'parent',
    })
    const session = new Session({ header, events: eventsFor(i) })
    if (!writer.writeColdRows(session, projections.checkpoint(session))) throw new Error('bench setup: a checkpoint write failed')
    headers.push(header)
  }
  writer.close()
  // A later process reads the cold sessions through a fresh connection.
  cache = new SqliteProjectionCache(options)
  raw = new Database(projectionCachePath(dir), { readonly: true })
  rawLookup = raw.prepare<[string, string], { payload: string }>('SELECT payload FROM checkpoint_rows WHERE session_id = ? AND key = ?')
}

const definition: BenchDefinition = {
  name: 'cache-lookup',
  unit: 'ms per 1,000 lookups',
  target: 2,
  compare: 'le',
  repeats: 15,
  setup() {
    dir = mkdtempSync(join(tmpdir(), 'dsh-bench-cache-'))
    try {
      fill()
    } catch (error) {
      // The harness only tears down after a successful setup.
      definition.teardown?.()
      throw error
    }
  },
  teardown() {
    raw?.close()
    cache?.close()
    rmSync(dir, { recursive: true, force: true })
  },
  baseline: {
    label: 'raw better-sqlite3 point lookups',
    run: async () => {
      const lookup = rawLookup!
      let found = 0
      const ms = await time(() => {
        for (let pass = 0; pass < PASSES; pass++)
          for (const header of headers) if (lookup.get(header.id, 'benchIdentity') !== undefined) found++
      })
      if (found !== SESSIONS * PASSES) throw new Error(`bench: raw lookups found ${found} rows`)
      return ms / PASSES
    },
  },
  subject: {
    label: 'cachedSnapshot (cold sessions)',
    run: async () => {
      const c = cache!
      const cut = SessionLogOffset(0)
      let found = 0
      const ms = await time(() => {
        for (let pass = 0; pass < PASSES; pass++)
          for (const header of headers) if (c.cachedSnapshot(header, cut, KEYS)?.benchIdentity) found++
      })
      if (found !== SESSIONS * PASSES) throw new Error(`bench: cachedSnapshot hit ${found} times`)
      hits += found
      return ms / PASSES
    },
  },
  extra: () => ({ sessions: SESSIONS, passesPerSample: PASSES, hits, metrics: cache?.metrics }),
}

export default definition
