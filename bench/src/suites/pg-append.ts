// pg-append: one durable append of a 1 KiB batch through the PostgreSQL
// backend (encode, zstd, CRC, the one-statement append with its
// expected-offset check, change row and NOTIFY, commit) against a raw
// parameterised INSERT of the same bytes and COMMIT (BEGIN, INSERT, COMMIT on
// a pooled connection), over the same pool and server. The stricter comparison with a single autocommitted INSERT (one
// round trip) is measured too and reported under `extra`. Both run against a
// throwaway cluster with the server's default durability (fsync on,
// synchronous_commit on). Ratio = subject / baseline; target <= 1.3.
//
// Fairness: both sides commit through one server and one WAL, whose flush
// latency drifts within a run on this kind of machine. So samples are paired
// at the finest grain, as in append-sqlite: each round alternates one raw
// transaction and one append, timing each call alone, and a round's sample
// for each side is the sum of its own calls. The ratio measured in blocks
// (300 of one side, then 300 of the other) swings between runs of unchanged
// code; it is reported under `extra` (`blockRatio`) for comparison only. The
// figures behind this choice are in
// docs/decisions/2026-12-04-bench-measurement.md.
import { SessionLogOffset, SessionSeq, type StoredSessionEvent } from '@dsh/session'
import { createPostgresPersistence, type PostgresPersistence } from '@dsh/session-persistence-postgres'
import { headerOf } from '@dsh/test-kit'
import type pg from 'pg'
import { type BenchPostgres, startBenchPostgres } from '../fixtures/postgres.js'
import { type BenchDefinition, median, time } from '../harness.js'

const APPENDS = 300
const BATCH_BYTES = 1024

let db: BenchPostgres | undefined
let pool: pg.Pool | undefined
let persistence: PostgresPersistence | undefined
let next = 0
let plain = Buffer.alloc(0)
const target = {
  header: headerOf('bench-append'),
  inheritedEventCount: SessionLogOffset(0),
}
const perAppend: { raw: number[]; autocommit: number[]; durable: number[]; blockRaw: number[]; blockDurable: number[] } = {
  raw: [],
  autocommit: [],
  durable: [],
  blockRaw: [],
  blockDurable: [],
}
/** The subject's half of the round the baseline side last ran (the harness asks for baseline, then subject). */
let pendingSubject: number | undefined

/** A batch of about 1 KiB of JSONL: a few streamed chunks of prose. */
function batch(from: number): StoredSessionEvent[] {
  const events: StoredSessionEvent[] = []
  let bytes = 0
  for (let i = 0; bytes < BATCH_BYTES - 120; i++) {
    const event = {
      type: 'assistant/chunk',
      seq: SessionSeq(from + i),
      time: 1_700_000_000_000 + from + i,
      data: { turn: 1, index: from + i, delta: `step ${from + i}: reading the file and checking the change against the tests ` },
    }
    bytes += JSON.stringify(event).length + 1
    events.push(event)
  }
  return events
}

const definition: BenchDefinition = {
  name: 'pg-append',
  unit: 'ms per durable 1 KiB batch',
  target: 1.3,
  compare: 'le',
  repeats: 7,
  async setup() {
    db = await startBenchPostgres({ max: 4 })
    pool = db.pool
    persistence = await createPostgresPersistence({ pool })
    await pool.query('CREATE TABLE bench_raw (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, body bytea NOT NULL)')
    const sample = batch(0)
    plain = Buffer.from(sample.map((e) => `${JSON.stringify(e)}\n`).join(''), 'utf8')
    await persistence.append(target, [])
  },
  async teardown() {
    await persistence?.close()
    await db?.close()
  },
  baseline: {
    label: 'raw parameterised INSERT of the same bytes + COMMIT (BEGIN, INSERT, COMMIT), same pool, paired call by call',
    async run() {
      const client = await pool!.connect()
      try {
        const raw = async (): Promise<void> => {
          await client.query('BEGIN')
          await client.query({ name: 'bench_raw', text: 'INSERT INTO bench_raw (body) VALUES ($1)', values: [plain] })
          await client.query('COMMIT')
        }
        const append = async (): Promise<void> => {
          const events = batch(next)
          await persistence!.append(target, events)
          next += events.length
        }
        // The paired round: one raw transaction, then one append, timed call by call.
        let baseline = 0n
        let subject = 0n
        for (let i = 0; i < APPENDS; i++) {
          const t0 = process.hrtime.bigint()
          await raw()
          const t1 = process.hrtime.bigint()
          await append()
          const t2 = process.hrtime.bigint()
          baseline += t1 - t0
          subject += t2 - t1
        }
        const rawMs = Number(baseline) / 1e6 / APPENDS
        pendingSubject = Number(subject) / 1e6 / APPENDS
        perAppend.raw.push(rawMs)
        perAppend.durable.push(pendingSubject)
        // Reported under `extra`: the same sides in blocks, and one autocommitted INSERT per batch (one round trip).
        perAppend.blockRaw.push(
          (await time(async () => {
            for (let i = 0; i < APPENDS; i++) await raw()
          })) / APPENDS,
        )
        perAppend.blockDurable.push(
          (await time(async () => {
            for (let i = 0; i < APPENDS; i++) await append()
          })) / APPENDS,
        )
        const single = await time(async () => {
          for (let i = 0; i < APPENDS; i++)
            await client.query({ name: 'bench_raw', text: 'INSERT INTO bench_raw (body) VALUES ($1)', values: [plain] })
        })
        perAppend.autocommit.push(single / APPENDS)
        return rawMs
      } finally {
        client.release()
      }
    },
  },
  subject: {
    label: 'PostgresPersistence.append of a 1 KiB batch, paired call by call',
    run() {
      if (pendingSubject === undefined) throw new Error('pg-append: the subject sample comes from the paired round the baseline just ran')
      const sample = pendingSubject
      pendingSubject = undefined
      return sample
    },
  },
  extra() {
    return {
      appendsPerSample: APPENDS,
      plaintextBytesPerBatch: plain.length,
      eventsPerBatch: batch(0).length,
      medianMsPerAppend: {
        rawTransaction: median(perAppend.raw),
        rawAutocommit: median(perAppend.autocommit),
        durable: median(perAppend.durable),
      },
      ratioToAutocommitInsert: Math.round((median(perAppend.durable) / median(perAppend.autocommit)) * 1000) / 1000,
      pairing: 'each round alternates a raw transaction and an append call by call; per-side sums of per-call times',
      blockMsPerAppend: { rawTransaction: median(perAppend.blockRaw), durable: median(perAppend.blockDurable) },
      blockRatio: Math.round((median(perAppend.blockDurable) / median(perAppend.blockRaw)) * 1000) / 1000,
      server: 'PostgreSQL 15, throwaway cluster on 127.0.0.1, fsync on, synchronous_commit on',
    }
  },
}

export default definition
