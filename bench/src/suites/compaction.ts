// compaction: what a compaction buys the next request, and what a cold read
// after it costs. A session of tool-using turns (a question, an 80 B chunk, a
// tool call with a 2 KiB result, an answer) grows on a host over a zstd JSONL
// root with the SQLite checkpoint cache until its estimate (characters / 4)
// reaches 80% of a 128k-token window; the compaction service then compacts
// there (a bounded summarizer stands in for the model: at most 4,000
// characters, as a summary is).
//
// Ratio: the serialized size of the next Chat Completions request after the
// compaction (subject) over the same request without it (baseline);
// subject / baseline, target <= 0.25. Requirements, counted (never timed):
// after three more turns (the last left open) a second process's cold
// `contextOf` reads at most one checkpoint from the cache, then only the
// events after its cut (one ranged read through a counting persistence
// wrapper, no whole-log read), and answers the live context.
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { type CompactionWorkload, requestBytes, runCompactionWorkload } from '../fixtures/compaction.js'
import type { BenchDefinition } from '../harness.js'

const WINDOW = 128_000
const FRACTION = 0.8

let dir: string | undefined
let workload: CompactionWorkload | undefined

const definition: BenchDefinition = {
  name: 'compaction',
  unit: 'bytes',
  target: 0.25,
  compare: 'le',
  ratio: 'subject/baseline',
  repeats: 3,
  async setup() {
    dir = mkdtempSync(join(tmpdir(), 'dsh-bench-compaction-'))
    workload = await runCompactionWorkload({ root: join(dir, 'root'), window: WINDOW, fraction: FRACTION })
  },
  teardown() {
    if (dir !== undefined) rmSync(dir, { recursive: true, force: true })
    dir = undefined
  },
  baseline: {
    label: `next request without compaction at ${FRACTION * 100}% of a ${WINDOW / 1000}k window`,
    run: () => requestBytes(workload!.uncompacted),
  },
  subject: { label: 'next request after the compaction', run: () => requestBytes(workload!.compacted) },
  extra() {
    const w = workload!
    return {
      window: WINDOW,
      fraction: FRACTION,
      turnsBeforeCompaction: w.turns - 3,
      estimateAtCompaction: w.estimateBefore,
      budget: w.budget,
      estimateAfter: w.tokensAfter,
      shadowedMessages: w.shadowed,
      requestBytes: { uncompacted: requestBytes(w.uncompacted), compacted: requestBytes(w.compacted) },
      coldRead: {
        checkpointLookups: w.cold.checkpointLookups,
        checkpointHits: w.cold.checkpointHits,
        checkpointCut: w.cold.checkpointCut,
        compactionEndSeq: w.compactionEndSeq,
        lastSeq: w.lastSeq,
        eventsReadAfterCut: w.cold.eventsAfterCut,
        rangeReads: w.cold.reads.ranges,
        wholeLogReads: w.cold.reads.whole,
        equalsLive: w.cold.equalsLive,
      },
    }
  },
  requirements() {
    const w = workload!
    return {
      compactedAtTheBudget: w.estimateBefore >= w.budget,
      coldReadAtMostOneCheckpoint: w.cold.checkpointLookups <= 1 && w.cold.checkpointHits <= 1,
      coldReadOnlyTheEventsAfterTheCut: w.cold.eventsAfterCut === w.lastSeq - w.cold.checkpointCut && w.cold.reads.whole === 0,
      coldAnswerEqualsLive: w.cold.equalsLive,
    }
  },
}

export default definition
