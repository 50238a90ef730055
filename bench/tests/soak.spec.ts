import { tempDir } from '@dsh/test-kit'
import { afterEach, describe, expect, it } from 'vitest'
import { runSoak, type SoakSample, soakJournalBound } from '../src/fixtures/soak.js'

// The soak benchmark's short form, for CI: the same workload (fixtures/soak.ts)
// with its counts scaled down, and every verdict in counts and bytes, none in
// time. The journal limit is a quarter of the default so that 20,000 appends
// compact the journal several times, as the long form's million does.

const APPENDS = 20_000
const SESSIONS = 500
const WORKING_SET = 64
const PER_VISIT = 10
const LIST_EVERY = 500
const JOURNAL_LIMIT = 256 * 1024
/** At most this many distinct sessions are appended to between two samples: the working set, rotated at most once more. */
const VISITED_PER_SAMPLE = WORKING_SET * (Math.ceil(LIST_EVERY / (WORKING_SET * PER_VISIT)) + 1)
/** A listing reads one header slot walk per log it opens: at most 16 KiB (the most a writer leaves after a slot). */
const MAX_READ_PER_OPEN = 16 * 1024

const cleanups: Array<() => void> = []
afterEach(() => {
  for (const cleanup of cleanups.splice(0)) cleanup()
})

describe('soak (short form)', () => {
  it('20,000 appends over 500 sessions: the journal stays under its stated bound, listings and memory do not grow with the appends, the follower never falls behind', async () => {
    const { dir, cleanup } = tempDir('dsh-soak-', { memory: true })
    cleanups.push(cleanup)
    const bound = soakJournalBound(SESSIONS, WORKING_SET, JOURNAL_LIMIT)
    const result = await runSoak({
      root: dir,
      appends: APPENDS,
      sessions: SESSIONS,
      listEvery: LIST_EVERY,
      followEvery: 1_000,
      workingSet: WORKING_SET,
      perVisit: PER_VISIT,
      journalLimit: JOURNAL_LIMIT,
      settleBeforeListing: true,
    })
    expect(result.appends).toBe(APPENDS)
    expect(result.journalBound).toBe(bound)

    // The journal: compacted again and again, never above the bound (checked after every round of appends).
    expect(result.compactions).toBeGreaterThanOrEqual(3)
    expect(result.journalPeak).toBeLessThanOrEqual(bound)
    for (const sample of result.samples) expect(sample.journalBytes, `after ${sample.appends} appends`).toBeLessThanOrEqual(bound)

    // The follower kept up: every session seen, no rescan after its first call.
    expect(result.followerSeen).toBe(SESSIONS)
    expect(result.followerRescans).toBe(0)

    const warm = result.samples.filter((sample) => sample.warm)
    expect(warm.length).toBeGreaterThanOrEqual(20)
    const explain = (s: SoakSample): string =>
      `after ${s.appends} appends: ${s.listingLogOpens} logs opened, ${s.listingBytesRead} bytes read, index catch-up read ${s.settleRead} logs`
    for (const sample of warm) {
      expect(sample.listed).toBe(50)
      // Memory holds the working set, not the sessions visited so far.
      expect(sample.liveSessions).toBeLessThanOrEqual(WORKING_SET)
      // A listing over a current index opens at most the logs whose change is still in flight (one per live session),
      // whatever was appended before; the catch-up reads at most what changed since the last sample.
      expect(sample.listingLogOpens, explain(sample)).toBeLessThanOrEqual(WORKING_SET)
      expect(sample.listingBytesRead, explain(sample)).toBeLessThanOrEqual(sample.listingLogOpens * MAX_READ_PER_OPEN)
      expect(sample.settleRead ?? Number.NaN, explain(sample)).toBeLessThanOrEqual(VISITED_PER_SAMPLE)
    }
    // The heap after a full collection is flat: the last sample at most 1.2x the first after warm-up.
    const first = warm[0]!
    const last = warm.at(-1)!
    expect(last.heapUsed, `heap ${first.heapUsed} -> ${last.heapUsed} bytes`).toBeLessThanOrEqual(1.2 * first.heapUsed)
  }, 600_000)
})
