// pg-list-children: `subagents.listChildren` for 1,000 cold children whose
// logs and checkpoints live in PostgreSQL, with the PostgreSQL checkpoint
// cache warm (rung 2: the cache's local mirror) against the cache absent
// (rung 3: one body-bearing observation + fold per child) — issue 13.
// Ratio = rung 3 / cached (subject / baseline); target >= 20x, and the cached
// listing reads no body (`bodyReadsPerListing`).
//
// The children are generated on the run's own throwaway cluster (64 KiB of
// streamed text each, half of them forks of the parent), then a fresh host
// opens the database: every child is cold.
import { Context } from '@dsh/context'
import { sessionStorePlugin } from '@dsh/session'
import { type SessionPersistence, sessionPersistencePlugin } from '@dsh/session-persistence'
import { createPostgresPersistence } from '@dsh/session-persistence-postgres'
import { startTestCluster, type TestCluster } from '@dsh/session-persistence-postgres/testing'
import { sessionProjectionsPlugin } from '@dsh/session-projection'
import { postgresProjectionCachePlugin } from '@dsh/session-projection-cache-postgres'
import { postgresSessionQueryPlugin } from '@dsh/session-query-postgres'
import { listChildren, type SubagentDriver, type SubagentListEntry, subagentsPlugin } from '@dsh/subagent'
import pg from 'pg'
import { type BenchDefinition, time } from '../harness.js'

const CHILDREN = 1_000
const CHUNK_BYTES = 4 * 1024
const CHUNKS = 16
const PARENT = 'bench-parent'

let cluster: TestCluster | undefined
let pool: pg.Pool | undefined
let ctx: Context | undefined
let persistence: SessionPersistence | undefined
let expected: SubagentListEntry[] = []
const bodyReadsPerListing: { cached: number[]; rung3: number[] } = { cached: [], rung3: [] }
const rungs: Record<string, number> = {}

const quiet = {
  warn: (message: string) => console.warn(message),
  error: (message: string, error?: unknown) => console.error(message, error),
}

function streamingDriver(): SubagentDriver {
  let seed = 1
  return {
    name: 'bench',
    async run({ session, turn }) {
      const words = ['the', 'change', 'passes', 'its', 'tests', 'after', 'reading', 'each', 'file', 'twice', 'and', 'then', 'some']
      let state = seed++
      const next = () => {
        state = (state * 1103515245 + 12345) >>> 0
        return words[state % words.length]!
      }
      session.append('turn/start', { turn })
      for (let index = 0; index < CHUNKS; index++) {
        let delta = ''
        while (delta.length < CHUNK_BYTES) delta += `${next()} `
        session.append('assistant/chunk', { turn, index, delta })
      }
      session.append('assistant/message', { turn, text: 'Summary: the requested work is done.' })
      session.append('turn/end', { turn, reason: 'completed' })
      return { reason: 'completed' }
    },
  }
}

async function compose(withCache: boolean): Promise<Context> {
  const c = new Context({ logger: quiet })
  await c.activate(sessionStorePlugin())
  await c.activate(sessionPersistencePlugin(await createPostgresPersistence({ pool: pool! }), { writeBehindMs: 0 }))
  await c.activate(sessionProjectionsPlugin())
  if (withCache) await c.activate(postgresProjectionCachePlugin({ pool: pool! }))
  await c.activate(postgresSessionQueryPlugin({ pool: pool! }))
  await c.activate(subagentsPlugin({ driver: streamingDriver() }))
  return c
}

async function generate(): Promise<void> {
  const c = await compose(true)
  const sessions = c.require('sessions')
  const subagents = c.require('subagents')
  const parent = sessions.create({ id: PARENT })
  parent.append('user/message', { text: 'Split the audit across subagents.' })
  parent.append('turn/start', { turn: 1 })
  parent.append('assistant/message', { turn: 1, text: 'Spawning 1,000 workers.' })
  parent.append('turn/end', { turn: 1, reason: 'completed' })
  for (let i = 0; i < CHILDREN; i += 8) {
    const batch = []
    for (let j = i; j < Math.min(i + 8, CHILDREN); j++) {
      batch.push(
        subagents.spawn(parent, {
          id: `child-${String(j).padStart(4, '0')}`,
          mode: j % 2 === 0 ? 'one-shot' : 'continuable',
          label: `worker ${j}`,
          context: j % 2 === 0 ? 'fork' : 'fresh',
          prompt: `Audit part ${j}.`,
        }).done,
      )
    }
    for (const outcome of await Promise.all(batch))
      if (outcome.reason !== 'completed') throw new Error(`pg-list-children: a fixture child failed: ${outcome.reason}`)
    if (i % 200 === 0) console.log(`  pg-list-children: ${i}/${CHILDREN}`)
  }
  await sessions.dispose(PARENT)
  await c.dispose()
}

function physicalBodyReads(): number {
  const p = persistence as (SessionPersistence & { backend?: SessionPersistence }) | undefined
  return (p?.backend ?? p)?.metrics.bodyReads ?? 0
}

async function measured(side: 'cached' | 'rung3', list: () => Promise<SubagentListEntry[]>): Promise<number> {
  const before = physicalBodyReads()
  let rows: SubagentListEntry[] = []
  const ms = await time(async () => {
    rows = await list()
  })
  bodyReadsPerListing[side].push(physicalBodyReads() - before)
  if (rows.length !== CHILDREN || JSON.stringify(rows) !== JSON.stringify(expected))
    throw new Error(`pg-list-children: the ${side} listing returned other rows than expected`)
  return ms
}

const definition: BenchDefinition = {
  name: 'pg-list-children',
  unit: 'ms',
  target: 20,
  compare: 'ge',
  ratio: 'subject/baseline',
  repeats: 5,
  async setup() {
    cluster = await startTestCluster({ settings: { fsync: 'off' } })
    pool = new pg.Pool({ connectionString: cluster.connectionString(), max: 8 })
    console.log(`  pg-list-children: generating ${CHILDREN} children × ${(CHUNKS * CHUNK_BYTES) / 1024} KiB …`)
    await generate()
    // A fresh host: every child is cold; the cache's mirror loads from the table.
    ctx = await compose(true)
    persistence = ctx.require('sessionPersistence')
    const explained = await ctx.require('subagents').explainChildren(PARENT)
    for (const entry of explained) rungs[`rung${entry.rung}`] = (rungs[`rung${entry.rung}`] ?? 0) + 1
    if (explained.length !== CHILDREN || !explained.every((entry) => entry.rung === 2))
      throw new Error(`pg-list-children: the warm cache does not serve every child: ${JSON.stringify(rungs)}`)
    expected = await ctx.require('subagents').listChildren(PARENT)
    if (expected.filter((row) => row.kind === 'child').length !== CHILDREN)
      throw new Error('pg-list-children: expected a child row per child')
  },
  async teardown() {
    await ctx?.dispose()
    await pool?.end()
    await cluster?.stop()
  },
  baseline: {
    label: 'warm PostgreSQL checkpoint cache (rung 2)',
    run: () => measured('cached', () => ctx!.require('subagents').listChildren(PARENT)),
  },
  subject: {
    label: 'cache absent (rung 3: one 64 KiB observation + fold per child)',
    run: () =>
      measured('rung3', () =>
        listChildren(
          {
            sessions: ctx!.require('sessions'),
            sessionProjections: ctx!.require('sessionProjections'),
            sessionQuery: ctx!.require('sessionQuery'),
            sessionProjectionCache: undefined,
          },
          PARENT,
        ),
      ),
  },
  extra() {
    return {
      children: CHILDREN,
      seededChildren: CHILDREN / 2,
      transcriptPlaintextBytesPerChild: CHUNKS * CHUNK_BYTES,
      rungsOnOpen: rungs,
      bodyReadsPerListing,
      ratioDefinition: 'rung 3 median / warm-cache median',
    }
  },
}

export default definition
