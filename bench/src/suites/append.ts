// append: durable `append` of 1 KiB batches (the JSON lines of the batch
// come to ~1 KiB) against a raw `write` + `fsync` of the same bytes to a
// plain file, the baseline through Node's
// asynchronous callback file API, one append after another. Ratio = subject /
// baseline; target <= 1.3: compression, the trailer, the lock check and the
// revision must cost little next to the sync every durable append pays.
//
// The subject syncs a lone small batch inline with fdatasync (the same
// durability for appended data: the grown size is flushed with it; see the
// JSONL README's Durability section). So that the headline ratio does not
// flatter it, each round also times that same primitive raw — writeSync +
// fdatasyncSync, no thread-pool hop — and its median and the subject's ratio
// against it are reported under `extra`. The sides are paired call by call
// (see pairedRound); the headline baseline stays the asynchronous write +
// fsync, the least any durable append of those bytes does.
import { closeSync, fdatasyncSync, fsync, mkdtempSync, openSync, rmSync, write, writeSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import type { SessionLogOffset, SessionSeq, StoredSessionEvent } from '@dsh/session'
import { createJsonlPersistence, type JsonlPersistence } from '@dsh/session-persistence-jsonl'
import { benchHeader } from '../fixtures/transcript.js'
import { type BenchDefinition, median } from '../harness.js'

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
let rawSync: number | undefined
let rawSyncOffset = 0
const rawSyncSamples: number[] = []
const subjectSamples: number[] = []
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

/** The subject's half of the round the baseline side last ran (the harness asks for baseline, then subject). */
let pendingSubject: number | undefined

/**
 * One paired round: APPENDS batches per side, the three alternating call by
 * call (raw async write + fsync, persistence.append, raw writeSync +
 * fdatasyncSync), each call timed alone; ms per side. The disk here is shared
 * and its flush latency changes in bursts of seconds, so only calls made
 * microseconds apart see the same disk.
 */
async function pairedRound(): Promise<{ baseline: number; subject: number; rawSync: number }> {
  const raws = Array.from({ length: APPENDS }, (_, i) => jsonLines(batch(i * EVENTS_PER_BATCH)))
  const ours = Array.from({ length: APPENDS }, (_, i) => batch(next + i * EVENTS_PER_BATCH))
  next += APPENDS * EVENTS_PER_BATCH
  let baseline = 0n
  let subject = 0n
  let rawSyncTotal = 0n
  for (let i = 0; i < APPENDS; i++) {
    const bytes = raws[i]!
    const t0 = process.hrtime.bigint()
    await new Promise<void>((resolve, reject) =>
      write(raw!, bytes, 0, bytes.length, rawOffset, (error) => (error ? reject(error) : resolve())),
    )
    rawOffset += bytes.length
    await new Promise<void>((resolve, reject) => fsync(raw!, (error) => (error ? reject(error) : resolve())))
    const t1 = process.hrtime.bigint()
    await persistence!.append(target, ours[i]!)
    const t2 = process.hrtime.bigint()
    rawSyncOffset += writeSync(rawSync!, bytes, 0, bytes.length, rawSyncOffset)
    fdatasyncSync(rawSync!)
    const t3 = process.hrtime.bigint()
    baseline += t1 - t0
    subject += t2 - t1
    rawSyncTotal += t3 - t2
  }
  return { baseline: Number(baseline) / 1e6, subject: Number(subject) / 1e6, rawSync: Number(rawSyncTotal) / 1e6 }
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
    rawSync = openSync(join(dir, 'raw-sync.jsonl'), 'w')
    batchBytes = jsonLines(batch(0)).length
  },
  async teardown() {
    if (raw !== undefined) closeSync(raw)
    if (rawSync !== undefined) closeSync(rawSync)
    await persistence?.close()
    rmSync(dir, { recursive: true, force: true })
  },
  baseline: {
    label: 'raw write + fsync of the same JSON lines',
    async run() {
      const round = await pairedRound()
      pendingSubject = round.subject
      rawSyncSamples.push(round.rawSync)
      return round.baseline
    },
  },
  subject: {
    label: 'persistence.append (zstd frame + CRC trailer, write + fdatasync)',
    run() {
      if (pendingSubject === undefined) throw new Error('append: the subject sample comes from the paired round the baseline just ran')
      const sample = pendingSubject
      pendingSubject = undefined
      subjectSamples.push(sample)
      return sample
    },
  },
  extra() {
    // The warm-up round's samples are left out, as the harness leaves out its own.
    const sync = median(rawSyncSamples.slice(1))
    const subject = median(subjectSamples.slice(1))
    // (subjectSamples[0] is the warm-up's too: the harness's subject.run() is called for it.)
    return {
      batchBytes,
      eventsPerBatch: EVENTS_PER_BATCH,
      appendsPerSample: APPENDS,
      rawWriteSyncFdatasyncSyncMedianMs: +sync.toFixed(2),
      ratioVsRawFdatasyncSync: +(subject / sync).toFixed(3),
    }
  },
}

export default definition
