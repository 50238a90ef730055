// soak: 1,000,000 small appends (one event, one durable batch each) over
// 10,000 sessions through a host on the JSONL store, 64 sessions live at a
// time (each takes 10 appends a visit, then goes cold and is restored on its
// next visit), a follower reading the change feed every 1,000 appends, and a
// listing (`listSessions`, limit 50, as the index and its overlay answer it)
// with a sample every 10,000 appends. It runs in a process of its own
// (fixtures/soak-process.ts) on a root under bench/.fixtures.
//
// The journal bound, stated before measuring (fixtures/soak.ts,
// `soakJournalBound`): with L = 1 MiB (the journal limit), S = 10,000
// sessions, F = 64 changes in flight at most (the live sessions), |s| = an
// id's length as JSON (12) and r = 96 + |s| + |host| one change record,
//
//   journal bytes ≤ L + 192 + S·(48 + |s|) + F·r + (F + 1)·r
//
// (header and base record; a summary record per session changed between the
// horizon and the base; the operations in flight at the base; the write that
// crosses the limit). About 1.65 MB here, where an uncompacted journal would
// hold every change ever made.
//
// Verdict: the listing's median time over the last 8 samples (subject)
// against its median over the first 8 samples after warm-up (baseline, once
// every session exists), target <= 1.5; and, as requirements, the journal
// under the bound after every round of appends, the RSS of the last sample
// at most 1.2× the first after warm-up, and a follower that never fell
// behind the compaction horizon (no rescan after its first call).
//
// DSH_SOAK_APPENDS, DSH_SOAK_SESSIONS and DSH_SOAK_LIST_EVERY run a smaller form; `extra` records
// which ran. Build first: `npx turbo run build --filter=@dsh/bench...`.
import { spawnSync } from 'node:child_process'
import { mkdirSync, rmSync } from 'node:fs'
import { join } from 'node:path'
import type { SoakOptions, SoakResult, SoakSample } from '../fixtures/soak.js'
import { soakJournalBound, soakJournalBoundTerms } from '../fixtures/soak.js'
import { type BenchDefinition, benchRoot } from '../harness.js'

const APPENDS = Number(process.env.DSH_SOAK_APPENDS ?? 1_000_000)
const SESSIONS = Number(process.env.DSH_SOAK_SESSIONS ?? 10_000)
const LIST_EVERY = Number(process.env.DSH_SOAK_LIST_EVERY ?? 10_000)
const FOLLOW_EVERY = 1_000
const WORKING_SET = 64
/** Samples per window (the harness's warm-up call and 7 repeats). */
const WINDOW = 8
const MAX_RSS_GROWTH = 1.2
const work = join(benchRoot, '.fixtures', 'soak')
const child = join(benchRoot, 'dist', 'fixtures', 'soak-process.js')

let samples: SoakSample[] = []
let result: Omit<SoakResult, 'samples'> | undefined
let elapsedMs = 0
let first: SoakSample[] = []
let last: SoakSample[] = []
let baselineAt = 0
let subjectAt = 0

const mib = (bytes: number): number => Math.round((bytes / 2 ** 20) * 10) / 10
const warm = (): SoakSample[] => samples.filter((s) => s.warm)

const definition: BenchDefinition = {
  name: 'soak',
  unit: 'ms',
  target: 1.5,
  compare: 'le',
  repeats: WINDOW - 1,
  setup() {
    rmSync(work, { recursive: true, force: true })
    mkdirSync(work, { recursive: true })
    const options: SoakOptions = {
      root: join(work, 'root'),
      appends: APPENDS,
      sessions: SESSIONS,
      listEvery: LIST_EVERY,
      followEvery: FOLLOW_EVERY,
      workingSet: WORKING_SET,
    }
    const start = process.hrtime.bigint()
    const run = spawnSync(process.execPath, [child, JSON.stringify(options)], {
      cwd: benchRoot,
      encoding: 'utf8',
      maxBuffer: 256 * 1024 * 1024,
      stdio: ['ignore', 'pipe', 'inherit'],
    })
    elapsedMs = Number(process.hrtime.bigint() - start) / 1e6
    if (run.status !== 0) throw new Error(`soak: the soak process exited ${run.status}`)
    samples = []
    for (const line of run.stdout.split('\n').filter(Boolean)) {
      const parsed = JSON.parse(line) as { sample?: SoakSample; result?: Omit<SoakResult, 'samples'> }
      if (parsed.sample !== undefined) samples.push(parsed.sample)
      if (parsed.result !== undefined) result = parsed.result
    }
    const after = warm()
    if (after.length < 2 * WINDOW)
      throw new Error(`soak: ${after.length} samples after warm-up; the two windows need ${2 * WINDOW} (more appends per session).`)
    first = after.slice(0, WINDOW)
    last = after.slice(-WINDOW)
    rmSync(work, { recursive: true, force: true })
  },
  baseline: {
    label: `listing (limit 50), the first ${WINDOW} samples after warm-up`,
    run: () => first[baselineAt++ % WINDOW]!.listingMs,
  },
  subject: {
    label: `listing (limit 50), the last ${WINDOW} samples`,
    run: () => last[subjectAt++ % WINDOW]!.listingMs,
  },
  requirements() {
    const bound = soakJournalBound(SESSIONS, WORKING_SET)
    const after = warm()
    return {
      journalUnderBound: result !== undefined && result.journalPeak <= bound && samples.every((s) => s.journalBytes <= bound),
      rssFlat: after.at(-1)!.rss <= MAX_RSS_GROWTH * after[0]!.rss,
      followerNeverBehind: result?.followerRescans === 0,
    }
  },
  extra() {
    const after = warm()
    return {
      appends: result?.appends,
      sessions: SESSIONS,
      longForm: APPENDS === 1_000_000 && SESSIONS === 10_000,
      workingSet: WORKING_SET,
      soakMinutes: Math.round(elapsedMs / 6000) / 10,
      journalBound: soakJournalBoundTerms(SESSIONS, WORKING_SET),
      journalPeakBytes: result?.journalPeak,
      journalCompactions: result?.compactions,
      follower: { calls: result?.followerCalls, sessionsSeen: result?.followerSeen, rescansAfterFirst: result?.followerRescans },
      samples: samples.length,
      warmFromAppends: after[0]?.appends,
      rssMiB: { firstWarm: mib(after[0]!.rss), last: mib(after.at(-1)!.rss), max: mib(Math.max(...after.map((s) => s.rss))) },
      heapAfterGcMiB: { firstWarm: mib(after[0]!.heapUsed), last: mib(after.at(-1)!.heapUsed) },
      listingLogOpensMax: Math.max(...after.map((s) => s.listingLogOpens)),
      series: samples
        .filter((_, i) => i % 10 === 9 || i === 0)
        .map((s) => ({ appends: s.appends, journal: s.journalBytes, rssMiB: mib(s.rss), listingMs: Math.round(s.listingMs * 10) / 10 })),
    }
  },
}

export default definition
