import { startTestCluster, type TestCluster } from '@dsh/session-persistence-postgres/testing'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { runWriters } from '../src/fixtures/pg-writers.js'

// The pg-writers benchmark's short form, for CI: host processes (the built
// fixtures/pg-writer-process.js) writing through the PostgreSQL persistence
// and as raw INSERTs, every verdict a count of the ledgers against the store,
// none a time.

const PROCESSES = 2
const CONNECTIONS = 4
const BATCHES = 50
const BATCH_BYTES = 1024

let cluster: TestCluster | undefined
beforeAll(async () => {
  cluster = await startTestCluster()
})
afterAll(async () => {
  await cluster?.stop()
})

const layout = { processes: PROCESSES, connections: CONNECTIONS, batches: BATCHES, batchBytes: BATCH_BYTES }
/** Every writer's batch 0 (the session's creation) and its timed batches. */
const ACKNOWLEDGED = PROCESSES * CONNECTIONS * (BATCHES + 1)

describe('pg-writers (short form)', () => {
  it('2 host processes × 4 writer connections through the persistence: every acknowledged batch is stored exactly once, byte for byte, and nothing else', async () => {
    const run = await runWriters({ cluster: cluster!, mode: 'dsh', ...layout })
    expect(run.killed).toBe(false)
    expect(run.check).toEqual({
      acknowledged: ACKNOWLEDGED,
      stored: ACKNOWLEDGED,
      missing: 0,
      duplicated: 0,
      altered: 0,
      unexpected: 0,
      inFlight: 0,
    })
  })

  it('the raw INSERT side of the comparison keeps the same ledger and passes the same check', async () => {
    const run = await runWriters({ cluster: cluster!, mode: 'raw', ...layout })
    expect(run.check).toEqual({
      acknowledged: ACKNOWLEDGED,
      stored: ACKNOWLEDGED,
      missing: 0,
      duplicated: 0,
      altered: 0,
      unexpected: 0,
      inFlight: 0,
    })
  })

  it('with warm batches before the timed ones, each side still stores every acknowledged batch exactly once: batch 0, the warm batches and the timed ones', async () => {
    const warmBatches = 5
    const acknowledged = PROCESSES * CONNECTIONS * (1 + warmBatches + BATCHES)
    for (const mode of ['dsh', 'raw'] as const) {
      const run = await runWriters({ cluster: cluster!, mode, ...layout, warmBatches })
      expect(run.check).toEqual({ acknowledged, stored: acknowledged, missing: 0, duplicated: 0, altered: 0, unexpected: 0, inFlight: 0 })
    }
  })

  it('a host process SIGKILLed mid-run loses no acknowledged batch: the store holds every ledger line, and beyond them at most the one batch in flight per writer of that process', async () => {
    const afterAcked = (CONNECTIONS * BATCHES) / 2
    const run = await runWriters({ cluster: cluster!, mode: 'dsh', ...layout, kill: { process: 1, afterAcked } })
    expect(run.killed).toBe(true)
    const { check } = run
    expect(check.missing).toBe(0)
    expect(check.duplicated).toBe(0)
    expect(check.altered).toBe(0)
    expect(check.unexpected).toBe(0)
    expect(check.inFlight).toBeLessThanOrEqual(CONNECTIONS)
    expect(check.stored).toBe(check.acknowledged + check.inFlight)
    // The surviving process finished every batch; the killed one had acknowledged at least its kill point.
    expect(check.acknowledged).toBeGreaterThanOrEqual(CONNECTIONS * (BATCHES + 1) + CONNECTIONS + afterAcked)
    expect(check.acknowledged).toBeLessThan(ACKNOWLEDGED)
  })
})
