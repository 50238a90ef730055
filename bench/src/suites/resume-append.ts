// resume-append: a fresh backend (a new process resuming a session) appending
// one 1 KiB batch to a session whose transcript is 100 MiB of plaintext
// (issue 12 item 4), against opening a plain file, appending the same bytes
// at its end and fsyncing. A fresh writer verifies the log's tail — the
// header unit, the last batch and its trailer — not the whole log (full
// verification stays in inspect, load and verify). Both sides include open
// and close. Ratio = subject / baseline; target <= 2.
import { closeSync, fsyncSync, mkdtempSync, openSync, rmSync, statSync, writeSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import type { SessionLogOffset, SessionSeq, StoredSessionEvent } from '@dsh/session'
import { createJsonlPersistence } from '@dsh/session-persistence-jsonl'
import { type BenchDefinition, time } from '../harness.js'
import { benchHeader, persistTurns, realisticTurns } from './inspect.js'

const PLAINTEXT_BYTES = 100 * 1024 * 1024
const ID = 'bench-resume'
const EVENTS_PER_BATCH = 8

let dir = ''
let plainFile = ''
let next = 0
let logBytes = 0
let bytesReadPerResume = 0
const target = { header: benchHeader(ID), inheritedEventCount: 0 as SessionLogOffset }

/** The next 1 KiB batch: eight streamed chunks of one assistant turn. */
function batch(first: number): StoredSessionEvent[] {
  return Array.from({ length: EVENTS_PER_BATCH }, (_, i) =>
    Object.freeze({
      type: 'assistant/chunk',
      seq: (first + i) as SessionSeq,
      time: 1_800_000_000_000 + first + i,
      data: Object.freeze({ turn: 999_999, index: first + i, delta: `chunk ${first + i} of a resumed answer: the quick brown fox jumps over ${(first * 7919) % 10007}` }),
    }),
  )
}

const jsonLines = (events: readonly StoredSessionEvent[]): Buffer => Buffer.from(events.map((e) => `${JSON.stringify(e)}\n`).join(''))

const definition: BenchDefinition = {
  name: 'resume-append',
  unit: 'ms per fresh open + one durable 1 KiB append + close',
  target: 2,
  compare: 'le',
  repeats: 15,
  async setup() {
    dir = mkdtempSync(join(tmpdir(), 'dsh-bench-resume-'))
    const turns = realisticTurns(PLAINTEXT_BYTES)
    next = turns.reduce((n, t) => n + t.length, 0)
    const file = await persistTurns(dir, ID, turns)
    logBytes = statSync(file).size
    // The plain file the baseline appends to: as large as the log, so both append at the end of a big file.
    plainFile = join(dir, 'plain.jsonl')
    const fd = openSync(plainFile, 'w')
    const chunk = Buffer.alloc(1 << 20, 0x61)
    for (let written = 0; written < logBytes; written += chunk.length) writeSync(fd, chunk)
    fsyncSync(fd)
    closeSync(fd)
  },
  teardown() {
    rmSync(dir, { recursive: true, force: true })
  },
  baseline: {
    label: 'open a plain file, append the same bytes, fsync, close',
    run() {
      const bytes = jsonLines(batch(next))
      return time(() => {
        const fd = openSync(plainFile, 'a')
        writeSync(fd, bytes)
        fsyncSync(fd)
        closeSync(fd)
      })
    },
  },
  subject: {
    label: 'fresh backend: append one 1 KiB batch (tail verification), close',
    async run() {
      const events = batch(next)
      next += EVENTS_PER_BATCH
      let bytesRead = 0
      const ms = await time(async () => {
        const persistence = createJsonlPersistence({ root: dir })
        await persistence.append(target, events)
        bytesRead = persistence.metrics.bytesRead
        await persistence.close()
      })
      bytesReadPerResume = bytesRead
      return ms
    },
  },
  extra() {
    return { logMiB: +(logBytes / 2 ** 20).toFixed(2), bytesReadPerResume, batchBytes: jsonLines(batch(0)).length }
  },
}

export default definition
