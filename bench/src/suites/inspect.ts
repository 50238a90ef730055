// inspect: a cold `inspect` (a fresh backend, nothing cached) of one session
// whose transcript is 100 MiB of plaintext with a realistic event mix — most
// events are small `assistant/chunk` deltas, plus user messages, whole
// assistant messages, tool calls and large tool results, one durable batch
// per turn — against the least a reader can do with the same file to have
// its events: read it, decompress every frame in one call, `JSON.parse` every
// line and, since log format 4 stores a run of
// like events as one packed line, make each packed line's events (plain
// objects, nothing checked or frozen: what the import benchmark's baseline
// does with the harness's packed rows). Ratio = subject / baseline; target
// <= 1.5. Peak RSS of each side, measured in a fresh process, is reported
// under `extra`.
import { execFileSync } from 'node:child_process'
import { mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import type { SessionId } from '@dsh/session'
import { createJsonlPersistence } from '@dsh/session-persistence-jsonl'
import { realisticTurns } from '@dsh/test-kit'
import { decompress } from '@mongodb-js/zstd'
import { persistTurns } from '../fixtures/transcript.js'
import { type BenchDefinition, benchRoot, time } from '../harness.js'

const PLAINTEXT_BYTES = 100 * 1024 * 1024

const ID = 'bench-inspect'
let dir = ''
let file = ''
let events = 0
let baselineLines = 0
let fileBytes = 0
let peakRss: { baseline: number; subject: number } | undefined

/** Peak RSS (MiB) of a fresh process running `script` (an ES module body). */
function peakRssOf(script: string): number {
  const out = execFileSync(
    process.execPath,
    ['--input-type=module', '-e', `${script}\nprocess.stdout.write(String(process.resourceUsage().maxRSS))`],
    { cwd: benchRoot, encoding: 'utf8', maxBuffer: 1 << 20 },
  )
  return Math.round(Number(out) / 1024)
}

/**
 * The events of a packed line (log format 4, see the JSONL backend's README):
 * `dt.length + 1` events from `seq`, event k at `time` plus the first k gaps,
 * each data key holding the array's k-th value or the one shared value.
 * Plain objects, nothing checked: the least a reader does with the line.
 */
function expandRun(
  record: { type: string; seq: number; time: number; run: { dt: number[]; data: Record<string, unknown> } },
  into: unknown[],
): void {
  const { dt, data: columns } = record.run
  const keys = Object.keys(columns)
  let time = record.time
  for (let k = 0; k <= dt.length; k++) {
    if (k > 0) time += dt[k - 1]!
    const data: Record<string, unknown> = {}
    for (const key of keys) {
      const value = columns[key]
      data[key] = Array.isArray(value) ? value[k] : value
    }
    into.push({ type: record.type, seq: record.seq + k, time, data })
  }
}

const definition: BenchDefinition = {
  name: 'inspect',
  unit: 'ms per cold read of a 100 MiB transcript',
  target: 1.5,
  compare: 'le',
  repeats: 7,
  async setup() {
    dir = mkdtempSync(join(tmpdir(), 'dsh-bench-inspect-'))
    const turns = realisticTurns(PLAINTEXT_BYTES)
    events = turns.reduce((n, t) => n + t.length, 0)
    file = await persistTurns(dir, ID, turns)
  },
  teardown() {
    // Peak RSS is measured here: the harness calls `extra` after `teardown`.
    try {
      peakRss = {
        baseline: peakRssOf(`import { readFileSync } from 'node:fs'; import { decompress } from '@mongodb-js/zstd'
const text = (await decompress(readFileSync(${JSON.stringify(file)}))).toString('utf8'); const parsed = []
const expandRun = ${expandRun.toString()}
for (let s = 0, e = text.indexOf('\\n'); e !== -1; s = e + 1, e = text.indexOf('\\n', s)) { const r = JSON.parse(text.slice(s, e)); if (r.run === undefined) parsed.push(r); else expandRun(r, parsed) }`),
        subject: peakRssOf(`import { createJsonlPersistence } from '@dsh/session-persistence-jsonl'
const o = await createJsonlPersistence({ root: ${JSON.stringify(dir)} }).inspect(${JSON.stringify(ID)}); if (o.events.length !== ${events}) throw new Error('short read')`),
      }
      fileBytes = statSync(file).size
    } finally {
      rmSync(dir, { recursive: true, force: true })
    }
  },
  baseline: {
    label: 'read + one decompress of all frames + JSON.parse every line + the events of packed lines',
    async run() {
      return time(async () => {
        const text = (await decompress(readFileSync(file))).toString('utf8')
        // Kept, like any reader that returns what it read (the subject returns every event).
        const parsed: unknown[] = []
        let lines = 0
        for (let start = 0, end = text.indexOf('\n'); end !== -1; start = end + 1, end = text.indexOf('\n', start)) {
          const record = JSON.parse(text.slice(start, end))
          lines++
          if (record.run === undefined) parsed.push(record)
          else expandRun(record, parsed)
        }
        baselineLines = lines
        // The header line, then one event per seq.
        if (parsed.length !== events + 1) throw new Error(`the baseline read ${parsed.length - 1} events, expected ${events}`)
      })
    },
  },
  subject: {
    label: 'cold inspect (fresh backend: verify, decode, freeze)',
    async run() {
      const persistence = createJsonlPersistence({ root: dir })
      const ms = await time(async () => {
        const observation = await persistence.inspect(ID as SessionId)
        if (observation.events.length !== events)
          throw new Error(`inspect returned ${observation.events.length} events, expected ${events}`)
      })
      await persistence.close()
      return ms
    },
  },
  extra() {
    return {
      events,
      linesParsedByBaseline: baselineLines,
      plaintextMiB: +(PLAINTEXT_BYTES / 2 ** 20).toFixed(1),
      fileMiB: +(fileBytes / 2 ** 20).toFixed(2),
      peakRssMiB: { ...peakRss, note: 'each side alone in a fresh process, holding every parsed event' },
    }
  },
}

export default definition
