import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { FanoutListeners, FanoutWriter } from '../src/fixtures/pg-fanout.js'
import { type BenchPostgres, startBenchPostgres } from '../src/fixtures/postgres.js'

// The pg-fanout benchmark's short form, for CI: host processes (the built
// fixtures/pg-fanout-process.js) that list sessions when the persistence's
// subscription tells them of a change, and raw LISTEN processes; every
// verdict a count of reports, none a time.

const LISTENERS = 2
const APPENDS = 20

let db: BenchPostgres | undefined
let writer: FanoutWriter | undefined
const groups: FanoutListeners[] = []
beforeAll(async () => {
  db = await startBenchPostgres({ max: 1, database: 'fanout' })
  writer = await FanoutWriter.open(db.url)
})
afterAll(async () => {
  for (const group of groups) await group.close()
  await writer?.close()
  await db?.close()
})

describe('pg-fanout (short form)', () => {
  it('2 host processes on the PostgreSQL store: every host’s listing shows each of 20 appends, woken by the subscription alone', async () => {
    const hosts = await FanoutListeners.start(db!.url, 'dsh', LISTENERS)
    groups.push(hosts)
    const result = await writer!.rounds('dsh', hosts, APPENDS)
    expect(result.seenByAll).toBe(APPENDS)
    expect(result.reports).toBe(APPENDS * LISTENERS)
    expect(result.latencies).toHaveLength(APPENDS)
  })

  it('the raw side: every raw listener runs the listing statement after each of 20 notices', async () => {
    const raws = await FanoutListeners.start(db!.url, 'raw', LISTENERS)
    groups.push(raws)
    const result = await writer!.rounds('raw', raws, APPENDS)
    expect(result.seenByAll).toBe(APPENDS)
    expect(result.reports).toBe(APPENDS * LISTENERS)
  })
})
