// pg-fanout: how soon an append is visible to every host. 8 host processes
// on one PostgreSQL store (fixtures/pg-fanout-process.ts: a query host whose
// persistence `subscribe` — LISTEN/NOTIFY, no polling — makes it list
// sessions) and a writer connection in this process. Subject: from the start
// of an append to the moment the last host's listing shows the new offset.
// Baseline, in the same layout: a raw NOTIFY from the writer connection to 8
// raw listener processes, each running the listing statement when told.
// The rounds are paired: a raw round, then an append round, and so on, so
// that the machine's drift hits both sides alike; a sample of each side is
// its p99 over the `DSH_PG_FANOUT_ROUNDS` rounds (default 200) of one paired
// block (the baseline's run measures the block, the subject's reports its
// half). Ratio = subject / baseline, target <= 2. Every round must be seen
// by every listener (counted).

import { percentile } from '../fixtures/percentile.js'
import { FanoutListeners, FanoutWriter } from '../fixtures/pg-fanout.js'
import { type BenchPostgres, startBenchPostgres } from '../fixtures/postgres.js'
import type { BenchDefinition } from '../harness.js'

const LISTENERS = 8
const ROUNDS = Number(process.env.DSH_PG_FANOUT_ROUNDS ?? 200)

let db: BenchPostgres | undefined
let writer: FanoutWriter | undefined
let hosts: FanoutListeners | undefined
let raws: FanoutListeners | undefined
const all: { dsh: number[]; raw: number[] } = { dsh: [], raw: [] }
let missed = 0

const round = (x: number): number => Math.round(x * 1000) / 1000

/** The append side's p99 of the last paired block, taken by the subject's run. */
let pendingSubject: number | undefined

async function pairedBlock(): Promise<number> {
  const block: { dsh: number[]; raw: number[] } = { dsh: [], raw: [] }
  for (let i = 0; i < ROUNDS; i++) {
    for (const mode of ['raw', 'dsh'] as const) {
      const result = await writer!.rounds(mode, mode === 'dsh' ? hosts! : raws!, 1)
      missed += 1 - result.seenByAll
      if (result.seenByAll !== 1) throw new Error(`pg-fanout: a ${mode} round was not seen by every listener`)
      block[mode].push(...result.latencies)
    }
  }
  all.raw.push(...block.raw)
  all.dsh.push(...block.dsh)
  pendingSubject = percentile(block.dsh, 99)
  return percentile(block.raw, 99)
}

function takeSubject(): number {
  const p99 = pendingSubject
  if (p99 === undefined) throw new Error('pg-fanout: the subject has no paired block to report (the baseline runs first)')
  pendingSubject = undefined
  return p99
}

const definition: BenchDefinition = {
  name: 'pg-fanout',
  unit: 'ms (p99 per sample)',
  target: 2,
  compare: 'le',
  repeats: 3,
  async setup() {
    db = await startBenchPostgres({ max: 1, database: 'fanout' })
    writer = await FanoutWriter.open(db.url)
    hosts = await FanoutListeners.start(db.url, 'dsh', LISTENERS)
    raws = await FanoutListeners.start(db.url, 'raw', LISTENERS)
  },
  async teardown() {
    await hosts?.close()
    await raws?.close()
    await writer?.close()
    await db?.close()
  },
  baseline: {
    label: `raw NOTIFY + the listing statement in ${LISTENERS} listener processes`,
    run: () => pairedBlock(),
  },
  subject: {
    label: `append until ${LISTENERS} host processes' listings show it (persistence subscribe + query backend)`,
    run: () => takeSubject(),
  },
  extra() {
    const summary = (xs: number[]) => ({
      rounds: xs.length,
      p50: round(percentile(xs, 50)),
      p99: round(percentile(xs, 99)),
      max: round(Math.max(...xs)),
    })
    return {
      listeners: LISTENERS,
      roundsPerSample: ROUNDS,
      allRoundsMs: { raw: summary(all.raw), dsh: summary(all.dsh) },
      roundsNotSeenByEveryListener: missed,
    }
  },
}

export default definition
