import { tempDir } from '@dsh/test-kit'
import { afterEach, describe, expect, it } from 'vitest'
import { requestBytes, runCompactionWorkload } from '../src/fixtures/compaction.js'

// The compaction benchmark's short form, for CI: the same workload
// (fixtures/compaction.ts) at a 32k-token window, every verdict a size or a
// count, none a time.

const cleanups: Array<() => void> = []
afterEach(() => {
  for (const cleanup of cleanups.splice(0)) cleanup()
})

describe('compaction (short form)', () => {
  it('after a compaction at 80% of the window the next request is at most 25% of the uncompacted one; a cold contextOf reads one checkpoint and only the events after it', async () => {
    const { dir, cleanup } = tempDir('dsh-bench-compaction-')
    cleanups.push(cleanup)
    const w = await runCompactionWorkload({ root: dir, window: 32_000, fraction: 0.8 })
    expect(w.estimateBefore).toBeGreaterThanOrEqual(w.budget)
    expect(w.budget).toBe(25_600)
    expect(w.shadowed).toBeGreaterThan(0)
    const before = requestBytes(w.uncompacted)
    const after = requestBytes(w.compacted)
    expect(before).toBeGreaterThan(4 * w.budget * 0.9)
    expect(after).toBeLessThanOrEqual(0.25 * before)

    // The cold read: one checkpoint lookup that hit, a header read, then one ranged read of exactly the events after the cut.
    expect(w.cold.checkpointLookups).toBe(1)
    expect(w.cold.checkpointHits).toBe(1)
    expect(w.cold.reads.whole).toBe(0)
    expect(w.cold.reads.ranges.filter((r) => r.limit !== 0)).toEqual([
      { from: w.cold.checkpointCut, limit: undefined, events: w.lastSeq - w.cold.checkpointCut },
    ])
    // The checkpoint is one written after the compaction: nothing before it is read again.
    expect(w.cold.checkpointCut).toBeGreaterThanOrEqual(w.compactionEndSeq)
    expect(w.cold.eventsAfterCut).toBeLessThanOrEqual(w.lastSeq - w.compactionEndSeq)
    expect(w.cold.equalsLive).toBe(true)
  })
})
