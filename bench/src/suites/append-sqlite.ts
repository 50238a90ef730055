// append-sqlite: durable appends of 1 KiB batches, and of 64 KiB batches,
// against better-sqlite3 in WAL mode with synchronous=FULL inserting the same
// events one row per event in one transaction per batch — how SQLite-backed
// agent tools store messages. Both sides append one batch after
// another and every batch is durable when its call returns. Ratio = subject
// / baseline for 1 KiB batches (the result's ratio); the 64 KiB comparison is
// measured the same way in the same run and reported under `extra`
// (`ratio64KiB`, `pass64KiB`). Target <= 1.0 for both.
//
// Fairness: the two sides share one disk whose flush latency drifts by an
// order of magnitude within a run on this kind of machine. So samples are
// paired at the finest grain: each round alternates one SQLite commit and one
// JSONL append, timing each call alone, and a round's sample for each side is
// the sum of its own calls. Drift hits both sides within microseconds of each
// other; medians over many rounds absorb the rest. Each side writes its own
// file on the same file system (os.tmpdir()).
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import type { SessionLogOffset, SessionSeq, StoredSessionEvent } from '@dsh/session'
import { createJsonlPersistence, type JsonlPersistence } from '@dsh/session-persistence-jsonl'
import Database from 'better-sqlite3'
import { benchHeader } from '../fixtures/transcript.js'
import { type BenchDefinition, median } from '../harness.js'

const TARGET = 1.0
/** Paired rounds per batch size (medians over them). */
const REPEATS = 15

interface Lane {
  readonly name: string
  readonly eventsPerBatch: number
  readonly appends: number
  persistence?: JsonlPersistence
  db?: Database.Database
  insert?: (events: readonly StoredSessionEvent[]) => void
  next: number
  sqliteNext: number
  batchBytes: number
}

let dir = ''
const lanes: Record<'small' | 'large', Lane> = {
  // 8 chunks of ~130 B: ~1 KiB of JSON lines per batch.
  small: { name: '1 KiB', eventsPerBatch: 8, appends: 200, next: 0, sqliteNext: 0, batchBytes: 0 },
  // 480 chunks: ~64 KiB of JSON lines per batch.
  large: { name: '64 KiB', eventsPerBatch: 480, appends: 40, next: 0, sqliteNext: 0, batchBytes: 0 },
}
let large: { baseline: number[]; subject: number[] } = { baseline: [], subject: [] }

function batch(first: number, count: number): StoredSessionEvent[] {
  return Array.from({ length: count }, (_, i) =>
    Object.freeze({
      type: 'assistant/chunk',
      seq: (first + i) as SessionSeq,
      time: 1_700_000_000_000 + first + i,
      data: Object.freeze({
        turn: 1 + (first >> 10),
        index: first + i,
        delta: `chunk ${first + i} of a streamed answer: the quick brown fox jumps over ${(first * 7919) % 10007}`,
      }),
    }),
  )
}

function open(lane: Lane): void {
  lane.persistence = createJsonlPersistence({ root: join(dir, `jsonl-${lane.eventsPerBatch}`) })
  const db = new Database(join(dir, `sqlite-${lane.eventsPerBatch}.db`))
  db.pragma('journal_mode = WAL')
  db.pragma('synchronous = FULL')
  db.exec(
    'CREATE TABLE messages (session TEXT NOT NULL, seq INTEGER NOT NULL, type TEXT NOT NULL, time INTEGER NOT NULL, data TEXT NOT NULL, PRIMARY KEY (session, seq))',
  )
  const statement = db.prepare('INSERT INTO messages (session, seq, type, time, data) VALUES (?, ?, ?, ?, ?)')
  lane.insert = db.transaction((events: readonly StoredSessionEvent[]) => {
    for (const e of events) statement.run('bench', e.seq, e.type, e.time, JSON.stringify(e.data))
  })
  lane.db = db
  lane.batchBytes = batch(0, lane.eventsPerBatch).reduce((n, e) => n + Buffer.byteLength(JSON.stringify(e)) + 1, 0)
}

/** One paired round: `lane.appends` batches per side, SQLite and JSONL alternating call by call; ms per side. */
async function pairedRound(lane: Lane): Promise<{ baseline: number; subject: number }> {
  const target = { header: benchHeader(`bench-append-sqlite-${lane.eventsPerBatch}`), inheritedEventCount: 0 as SessionLogOffset }
  const ours = Array.from({ length: lane.appends }, (_, i) => batch(lane.next + i * lane.eventsPerBatch, lane.eventsPerBatch))
  const theirs = Array.from({ length: lane.appends }, (_, i) => batch(lane.sqliteNext + i * lane.eventsPerBatch, lane.eventsPerBatch))
  lane.next += lane.appends * lane.eventsPerBatch
  lane.sqliteNext += lane.appends * lane.eventsPerBatch
  let baseline = 0n
  let subject = 0n
  for (let i = 0; i < lane.appends; i++) {
    const t0 = process.hrtime.bigint()
    lane.insert!(theirs[i]!)
    const t1 = process.hrtime.bigint()
    await lane.persistence!.append(target, ours[i]!)
    const t2 = process.hrtime.bigint()
    baseline += t1 - t0
    subject += t2 - t1
  }
  return { baseline: Number(baseline) / 1e6, subject: Number(subject) / 1e6 }
}

/** The subject's half of the round the baseline side last ran (the harness asks for baseline, then subject). */
let pendingSubject: number | undefined

const definition: BenchDefinition = {
  name: 'append-sqlite',
  unit: `ms per ${lanes.small.appends} durable appends of 1 KiB (64 KiB under extra)`,
  target: TARGET,
  compare: 'le',
  repeats: REPEATS,
  async setup() {
    dir = mkdtempSync(join(tmpdir(), 'dsh-bench-append-sqlite-'))
    open(lanes.small)
    open(lanes.large)
    // The 64 KiB comparison, paired the same way (one warm-up round).
    await pairedRound(lanes.large)
    large = { baseline: [], subject: [] }
    for (let i = 0; i < REPEATS; i++) {
      const round = await pairedRound(lanes.large)
      large.baseline.push(round.baseline)
      large.subject.push(round.subject)
    }
  },
  async teardown() {
    for (const lane of Object.values(lanes)) {
      await lane.persistence?.close()
      lane.db?.close()
    }
    rmSync(dir, { recursive: true, force: true })
  },
  baseline: {
    label: 'better-sqlite3 WAL synchronous=FULL, one row per event, one transaction per batch',
    async run() {
      const round = await pairedRound(lanes.small)
      pendingSubject = round.subject
      return round.baseline
    },
  },
  subject: {
    label: 'persistence.append (jsonl, zstd), one durable batch per call',
    run() {
      if (pendingSubject === undefined)
        throw new Error('append-sqlite: the subject sample comes from the paired round the baseline just ran')
      const sample = pendingSubject
      pendingSubject = undefined
      return sample
    },
  },
  extra() {
    const baseline64 = median(large.baseline)
    const subject64 = median(large.subject)
    const ratio64 = +(subject64 / baseline64).toFixed(3)
    return {
      batchBytes1KiB: lanes.small.batchBytes,
      batchBytes64KiB: lanes.large.batchBytes,
      appendsPerSample: { small: lanes.small.appends, large: lanes.large.appends },
      pairing: 'each round alternates SQLite and JSONL call by call; per-side sums of per-call times',
      samples64KiB: { baseline: large.baseline.map((x) => +x.toFixed(2)), subject: large.subject.map((x) => +x.toFixed(2)) },
      baseline64KiBMedianMs: +baseline64.toFixed(2),
      subject64KiBMedianMs: +subject64.toFixed(2),
      ratio64KiB: ratio64,
      pass64KiB: ratio64 <= TARGET,
    }
  },
}

export default definition
