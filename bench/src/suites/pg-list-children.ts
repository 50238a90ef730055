// pg-list-children: `subagents.listChildren` for 1,000 cold children whose
// logs and checkpoints live in PostgreSQL, with the PostgreSQL checkpoint
// cache warm (rung 2: the cache's local mirror) against the cache absent
// (rung 3: one body-bearing observation + fold per child).
// Ratio = rung 3 / cached (subject / baseline); target >= 20x, and the cached
// listing reads no body (`bodyReadsPerListing`).
//
// The children are generated on the run's own throwaway cluster (64 KiB of
// streamed text each, half of them forks of the parent), then a fresh host
// opens the database: every child is cold.
import { Context } from '@dsh/context'
import { sessionStorePlugin } from '@dsh/session'
import { sessionPersistencePlugin } from '@dsh/session-persistence'
import { createPostgresPersistence } from '@dsh/session-persistence-postgres'
import { sessionProjectionsPlugin } from '@dsh/session-projection'
import { postgresProjectionCachePlugin } from '@dsh/session-projection-cache-postgres'
import { postgresSessionQueryPlugin } from '@dsh/session-query-postgres'
import { type SubagentDriver, subagentsPlugin } from '@dsh/subagent'
import type pg from 'pg'
import { ChildListings, PARENT, quietLogger, spawnFamily } from '../fixtures/children.js'
import { type BenchPostgres, startBenchPostgres } from '../fixtures/postgres.js'
import type { BenchDefinition } from '../harness.js'

const CHILDREN = 1_000
const CHUNK_BYTES = 4 * 1024
const CHUNKS = 16

let db: BenchPostgres | undefined
let pool: pg.Pool | undefined
let ctx: Context | undefined
const listings = new ChildListings('pg-list-children', CHILDREN, () => ctx)
const rungs: Record<string, number> = {}

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
  const c = new Context({ logger: quietLogger })
  await c.activate(sessionStorePlugin())
  await c.activate(sessionPersistencePlugin(await createPostgresPersistence({ pool: pool! }), { writeBehindMs: 0 }))
  await c.activate(sessionProjectionsPlugin())
  if (withCache) await c.activate(postgresProjectionCachePlugin({ pool: pool! }))
  await c.activate(postgresSessionQueryPlugin({ pool: pool! }))
  await c.activate(subagentsPlugin({ driver: streamingDriver() }))
  // The cache's first pass (forgetting deleted sessions) runs in the background from activation: it ends before any timing.
  if (withCache) await c.require('sessionProjectionCache').idle()
  return c
}

async function generate(): Promise<void> {
  const c = await compose(true)
  await spawnFamily(c, { children: CHILDREN, batch: 8, label: 'pg-list-children' })
  await c.dispose()
}

const definition: BenchDefinition = {
  name: 'pg-list-children',
  unit: 'ms',
  target: 20,
  compare: 'ge',
  ratio: 'subject/baseline',
  repeats: 5,
  async setup() {
    db = await startBenchPostgres({ max: 8, settings: { fsync: 'off' } })
    pool = db.pool
    console.log(`  pg-list-children: generating ${CHILDREN} children × ${(CHUNKS * CHUNK_BYTES) / 1024} KiB …`)
    await generate()
    // A fresh host: every child is cold; the cache's mirror loads from the table.
    ctx = await compose(true)
    const explained = await ctx.require('subagents').explainChildren(PARENT)
    for (const entry of explained) rungs[`rung${entry.rung}`] = (rungs[`rung${entry.rung}`] ?? 0) + 1
    if (explained.length !== CHILDREN || !explained.every((entry) => entry.rung === 2))
      throw new Error(`pg-list-children: the warm cache does not serve every child: ${JSON.stringify(rungs)}`)
    await listings.expectWarm()
  },
  async teardown() {
    await ctx?.dispose()
    await db?.close()
  },
  baseline: {
    label: 'warm PostgreSQL checkpoint cache (rung 2)',
    run: () => listings.cached(),
  },
  subject: {
    label: 'cache absent (rung 3: one 64 KiB observation + fold per child)',
    run: () => listings.rung3(),
  },
  extra() {
    return {
      children: CHILDREN,
      seededChildren: CHILDREN / 2,
      transcriptPlaintextBytesPerChild: CHUNKS * CHUNK_BYTES,
      rungsOnOpen: rungs,
      bodyReadsPerListing: listings.bodyReadsPerListing,
      ratioDefinition: 'rung 3 median / warm-cache median',
    }
  },
}

export default definition
