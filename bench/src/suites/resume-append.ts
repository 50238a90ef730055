// resume-append: a new process resuming a session whose transcript is
// 100 MiB of plaintext and appending one 1 KiB batch through a fresh JSONL
// backend, against a new process opening a plain file,
// appending the same bytes at its end and fsyncing (whole processes on both
// sides: `node` running each script). A fresh writer
// verifies the log's tail — the header unit, the last batch and its trailer
// — not the whole log (full verification stays in inspect, load and verify).
// Ratio = subject / baseline; target <= 2. Peak RSS and bytes read per
// resume are reported under `extra`.
import { execFileSync } from 'node:child_process'
import { closeSync, fsyncSync, mkdtempSync, openSync, rmSync, statSync, writeSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import type { SessionSeq, StoredSessionEvent } from '@dsh/session'
import { realisticTurns } from '@dsh/test-kit'
import { benchHeader, persistTurns } from '../fixtures/transcript.js'
import { type BenchDefinition, benchRoot, time } from '../harness.js'

const PLAINTEXT_BYTES = 100 * 1024 * 1024
const ID = 'bench-resume'
const EVENTS_PER_BATCH = 8

let dir = ''
let plainFile = ''
let next = 0
let logBytes = 0
const subjectReports: Array<{ bytesRead: number; maxRssKiB: number }> = []
const baselineRssKiB: number[] = []

/** The next 1 KiB batch: eight streamed chunks of one assistant turn. */
function batch(first: number): StoredSessionEvent[] {
  return Array.from({ length: EVENTS_PER_BATCH }, (_, i) => ({
    type: 'assistant/chunk',
    seq: (first + i) as SessionSeq,
    time: 1_800_000_000_000 + first + i,
    data: {
      turn: 999_999,
      index: first + i,
      delta: `chunk ${first + i} of a resumed answer: the quick brown fox jumps over ${(first * 7919) % 10007}`,
    },
  }))
}

const jsonLines = (events: readonly StoredSessionEvent[]): string => events.map((e) => `${JSON.stringify(e)}\n`).join('')

/** Runs an ES module body in a new `node` process (from the bench package, so workspace packages resolve). */
function node(script: string, input: string): string {
  return execFileSync(process.execPath, ['--input-type=module', '-e', script], { cwd: benchRoot, input, encoding: 'utf8' })
}

const BASELINE_SCRIPT = `import { closeSync, fsyncSync, openSync, readFileSync, writeSync } from 'node:fs'
const { file, bytes } = JSON.parse(readFileSync(0, 'utf8'))
const fd = openSync(file, 'a'); writeSync(fd, bytes); fsyncSync(fd); closeSync(fd)
process.stdout.write(JSON.stringify({ maxRssKiB: process.resourceUsage().maxRSS }))`

const SUBJECT_SCRIPT = `import { readFileSync } from 'node:fs'
import { createJsonlPersistence } from '@dsh/session-persistence-jsonl'
const { root, header, events } = JSON.parse(readFileSync(0, 'utf8'))
const persistence = createJsonlPersistence({ root })
await persistence.append({ header, inheritedEventCount: 0 }, events)
const bytesRead = persistence.metrics.bytesRead
await persistence.close()
process.stdout.write(JSON.stringify({ bytesRead, maxRssKiB: process.resourceUsage().maxRSS }))`

const definition: BenchDefinition = {
  name: 'resume-append',
  unit: 'ms per new process appending one durable 1 KiB batch',
  target: 2,
  compare: 'le',
  repeats: 11,
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
    label: 'new node process: open a plain file, append the same bytes, fsync',
    run() {
      const input = JSON.stringify({ file: plainFile, bytes: jsonLines(batch(next)) })
      return time(() => {
        baselineRssKiB.push((JSON.parse(node(BASELINE_SCRIPT, input)) as { maxRssKiB: number }).maxRssKiB)
      })
    },
  },
  subject: {
    label: 'new node process: fresh JSONL backend appends one 1 KiB batch (tail verification), close',
    run() {
      const input = JSON.stringify({ root: dir, header: benchHeader(ID), events: batch(next) })
      next += EVENTS_PER_BATCH
      return time(() => {
        subjectReports.push(JSON.parse(node(SUBJECT_SCRIPT, input)) as { bytesRead: number; maxRssKiB: number })
      })
    },
  },
  extra() {
    const last = subjectReports.at(-1)
    return {
      logMiB: +(logBytes / 2 ** 20).toFixed(2),
      bytesReadPerResume: last?.bytesRead,
      peakRssMiB: {
        baseline: Math.round(Math.max(...baselineRssKiB) / 1024),
        subject: Math.round(Math.max(...subjectReports.map((r) => r.maxRssKiB)) / 1024),
      },
      batchBytes: Buffer.byteLength(jsonLines(batch(0))),
    }
  },
}

export default definition
