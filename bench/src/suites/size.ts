// size: bytes on disk of a realistic transcript persisted by the zstd JSONL
// backend against the same events as plain JSONL (one line per event, as a
// runtime's own transcript file would hold them).
// The events are appended as the coordinator batches a live session: about
// one durable batch per turn. Ratio = subject / baseline; target <= 0.25.
// Sizes are deterministic, so the medians are exact; the runs only repeat them.
import { mkdtempSync, rmSync, statSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import type { StoredSessionEvent } from '@dsh/session'
import { realisticTurns } from '@dsh/test-kit'
import { persistTurns } from '../fixtures/transcript.js'
import type { BenchDefinition } from '../harness.js'

const PLAINTEXT_BYTES = 20 * 1024 * 1024

let dir = ''
let turns: StoredSessionEvent[][] = []
let zstdBytes = 0
let plainBytes = 0
let plainLogBytes = 0

const definition: BenchDefinition = {
  name: 'size',
  unit: 'bytes on disk',
  target: 0.25,
  compare: 'le',
  repeats: 3,
  async setup() {
    dir = mkdtempSync(join(tmpdir(), 'dsh-bench-size-'))
    turns = realisticTurns(PLAINTEXT_BYTES, 11)
    plainBytes = turns.flat().reduce((n, e) => n + Buffer.byteLength(JSON.stringify(e)) + 1, 0)
    zstdBytes = statSync(await persistTurns(join(dir, 'zstd'), 'bench-size', turns, 'zstd')).size
    plainLogBytes = statSync(await persistTurns(join(dir, 'none'), 'bench-size', turns, 'none')).size
  },
  teardown() {
    rmSync(dir, { recursive: true, force: true })
  },
  baseline: {
    label: 'plain JSONL of the same events',
    run: () => plainBytes,
  },
  subject: {
    label: 'zstd JSONL log (header + per-turn frames and trailers)',
    run: () => zstdBytes,
  },
  extra() {
    const events = turns.reduce((n, t) => n + t.length, 0)
    return {
      turns: turns.length,
      events,
      eventsPerBatch: +(events / turns.length).toFixed(1),
      plaintextBytesPerBatch: Math.round(plainBytes / turns.length),
      compressionNoneLogBytes: plainLogBytes,
      trailerOverheadBytes: turns.length * 52,
    }
  },
}

export default definition
