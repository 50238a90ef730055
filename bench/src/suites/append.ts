// append: durable `append` of 1 KiB batches (the JSON lines of the batch
// come to ~1 KiB) against a raw `write` + `fsync` of the same bytes to a
// plain file (brief section 11, issue 3). Both sides use Node's asynchronous
// callback file API (the cheapest) and run one append after another. Ratio = subject / baseline; target
// <= 1.3: compression, the trailer, the lock check and the revision must cost
// little next to the fsync every durable append pays.
import { closeSync, fsync, mkdtempSync, openSync, rmSync, write } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import type { SessionLogOffset, SessionSeq, StoredSessionEvent } from '@dsh/session'
import { createJsonlPersistence, type JsonlPersistence } from '@dsh/session-persistence-jsonl'
import { type BenchDefinition, time } from '../harness.js'
import { benchHeader } from './inspect.js'

/** Appends per sample. */
const APPENDS = 300
const EVENTS_PER_BATCH = 8
const ID = 'bench-append'

let dir = ''
let persistence: JsonlPersistence | undefined
let raw: number | undefined
let rawOffset = 0
let next = 0
let batchBytes = 0
const target = { header: benchHeader(ID), inheritedEventCount: 0 as SessionLogOffset }

/** The next 1 KiB batch: eight streamed chunks of one assistant turn. */
function batch(first: number): StoredSessionEvent[] {
  return Array.from({ length: EVENTS_PER_BATCH }, (_, i) =>
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

function jsonLines(events: readonly StoredSessionEvent[]): Buffer {
  return Buffer.from(events.map((e) => `${JSON.stringify(e)}\n`).join(''))
}

const definition: BenchDefinition = {
  name: 'append',
  unit: `ms per ${APPENDS} durable appends of 1 KiB`,
  target: 1.3,
  compare: 'le',
  repeats: 15,
  async setup() {
    dir = mkdtempSync(join(tmpdir(), 'dsh-bench-append-'))
    persistence = createJsonlPersistence({ root: dir })
    // Materialize first: the bench measures appends, not the session's creation.
    await persistence.append(target, [])
    raw = openSync(join(dir, 'raw.jsonl'), 'w')
    batchBytes = jsonLines(batch(0)).length
  },
  async teardown() {
    if (raw !== undefined) closeSync(raw)
    await persistence?.close()
    rmSync(dir, { recursive: true, force: true })
  },
  baseline: {
    label: 'raw write + fsync of the same JSON lines',
    async run() {
      const batches = Array.from({ length: APPENDS }, (_, i) => jsonLines(batch(i * EVENTS_PER_BATCH)))
      return time(async () => {
        for (const bytes of batches) {
          await new Promise<void>((resolve, reject) =>
            write(raw!, bytes, 0, bytes.length, rawOffset, (error) => (error ? reject(error) : resolve())),
          )
          rawOffset += bytes.length
          await new Promise<void>((resolve, reject) => fsync(raw!, (error) => (error ? reject(error) : resolve())))
        }
      })
    },
  },
  subject: {
    label: 'persistence.append (zstd frame + CRC trailer, write + fsync)',
    async run() {
      const batches = Array.from({ length: APPENDS }, (_, i) => batch(next + i * EVENTS_PER_BATCH))
      next += APPENDS * EVENTS_PER_BATCH
      return time(async () => {
        for (const events of batches) await persistence!.append(target, events)
      })
    },
  },
  extra() {
    return { batchBytes, eventsPerBatch: EVENTS_PER_BATCH, appendsPerSample: APPENDS }
  },
}

export default definition
