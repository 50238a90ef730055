// pg-append: one durable append of a 1 KiB batch through the PostgreSQL
// backend (encode, zstd, CRC, the one-statement append with its
// expected-offset check, change row and NOTIFY, commit) against a raw
// parameterised INSERT of the same bytes and COMMIT (BEGIN, INSERT, COMMIT on
// a pooled connection, as the issue words it), over the same pool and server
// — issue 13. The stricter comparison with a single autocommitted INSERT (one
// round trip) is measured too and reported under `extra`. Both run against a
// throwaway cluster with the server's default durability (fsync on,
// synchronous_commit on). Ratio = subject / baseline; target <= 1.3.
import { parseSessionHeader, SessionLogOffset, SessionSeq, type StoredSessionEvent } from '@dsh/session'
import { createPostgresPersistence, type PostgresPersistence } from '@dsh/session-persistence-postgres'
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
  header: parseSessionHeader({ version: 1, id: 'bench-append', createdAt: 1_700_000_000_000, isSeeded: false, delegationDepth: 0 }),
  inheritedEventCount: SessionLogOffset(0),
}
const perAppend: { raw: number[]; autocommit: number[]; durable: number[] } = { raw: [], autocommit: [], durable: [] }

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
    label: 'raw parameterised INSERT of the same bytes + COMMIT (BEGIN, INSERT, COMMIT), same pool',
    async run() {
      const client = await pool!.connect()
      try {
        const ms = await time(async () => {
          for (let i = 0; i < APPENDS; i++) {
            await client.query('BEGIN')
            await client.query({ name: 'bench_raw', text: 'INSERT INTO bench_raw (body) VALUES ($1)', values: [plain] })
            await client.query('COMMIT')
          }
        })
        perAppend.raw.push(ms / APPENDS)
        // The stricter figure: one autocommitted INSERT per batch (one round trip).
        const single = await time(async () => {
          for (let i = 0; i < APPENDS; i++)
            await client.query({ name: 'bench_raw', text: 'INSERT INTO bench_raw (body) VALUES ($1)', values: [plain] })
        })
        perAppend.autocommit.push(single / APPENDS)
        return ms / APPENDS
      } finally {
        client.release()
      }
    },
  },
  subject: {
    label: 'PostgresPersistence.append of a 1 KiB batch',
    async run() {
      const ms = await time(async () => {
        for (let i = 0; i < APPENDS; i++) {
          const events = batch(next)
          await persistence!.append(target, events)
          next += events.length
        }
      })
      perAppend.durable.push(ms / APPENDS)
      return ms / APPENDS
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
      server: 'PostgreSQL 15, throwaway cluster on 127.0.0.1, fsync on, synchronous_commit on',
    }
  },
}

export default definition
