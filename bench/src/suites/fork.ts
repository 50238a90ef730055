// fork: a durable fork of a session whose transcript is 100 MiB of plaintext
// by a fresh backend (nothing of the source cached),
// against copying the source's log file (the `cp` command — a whole-process
// baseline — then fsync of the copy and of its directory:
// what a fork costs when it copies the transcript, as agent tools do, made as
// durable as the fork is — the fork is acknowledged only once its log and its
// directory entries are on disk, so a copy that skipped the directory's fsync
// could vanish in a crash and would not be the same operation). The fork is stored by
// reference: its log holds its header (source, cut, logId, prefix length,
// CRC of the batch at the cut) and its own events, so it costs reading the
// source's header and last trailer and writing a few hundred bytes.
// Ratio = subject / baseline; target <= 0.2, and the fork's log <= 4 KiB
// (reported under `extra`, checked in `pass` through `target`'s note).
import { execFileSync } from 'node:child_process'
import { closeSync, fsyncSync, mkdtempSync, openSync, rmSync, statSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { setFlagsFromString } from 'node:v8'
import { runInNewContext } from 'node:vm'
import { SessionId, type SessionLogOffset, type SessionSeq, type StoredSessionEvent } from '@dsh/session'
import { createJsonlPersistence } from '@dsh/session-persistence-jsonl'
import { realisticTurns } from '@dsh/test-kit'
import { benchHeader, persistTurns } from '../fixtures/transcript.js'
import { type BenchDefinition, time } from '../harness.js'

const PLAINTEXT_BYTES = 100 * 1024 * 1024
const SOURCE = 'bench-fork-source'

let dir = ''
let sourceFile = ''
let seed: readonly StoredSessionEvent[] = []
let forks = 0
let sourceLogBytes = 0
let copies = 0
const forkLogBytes: number[] = []

/** The child's own first events after the cut (a subagent's setup). */
function ownEvents(cut: number): StoredSessionEvent[] {
  return [
    Object.freeze({ type: 'turn/start', seq: cut as SessionSeq, time: 1_800_000_000_000, data: Object.freeze({ turn: 1_000_000 }) }),
    Object.freeze({
      type: 'user/message',
      seq: (cut + 1) as SessionSeq,
      time: 1_800_000_000_001,
      data: Object.freeze({ text: 'continue from here in a forked subagent' }),
    }),
  ]
}

/** A full garbage collection, outside the timed sections of both sides. */
const gc: () => void = (() => {
  setFlagsFromString('--expose-gc')
  return runInNewContext('gc') as () => void
})()

/** CPU this process used (all its threads), in microseconds. */
function cpuMicros(): number {
  const { user, system } = process.cpuUsage()
  return user + system
}

/**
 * Before every sample of either side, outside its timing: a full GC (the
 * seed fills the heap), `sync` (the previous sample's 20 MB copy and its
 * removal must not be written back during the next sample's fsyncs), then a
 * wait until V8's background threads are idle. `gc()` returns while the
 * concurrent sweeping it started over the seed's heap is still running, and
 * that work would land inside the next timed sample and inflate whichever
 * side runs next (the figures are in
 * docs/decisions/2026-12-04-bench-measurement.md). Bounded by a count of 5 ms
 * windows, never by a deadline: idle means a window in which this process
 * used under 0.5 ms of CPU.
 */
async function quiesce(): Promise<void> {
  gc()
  execFileSync('sync')
  for (let window = 0; window < 100; window++) {
    const before = cpuMicros()
    await new Promise((resolve) => setTimeout(resolve, 5))
    if (cpuMicros() - before < 500) break
  }
}

const definition: BenchDefinition = {
  name: 'fork',
  unit: 'ms per durable fork of a 100 MiB-plaintext session',
  target: 0.2,
  compare: 'le',
  repeats: 11,
  async setup() {
    dir = mkdtempSync(join(tmpdir(), 'dsh-bench-fork-'))
    sourceFile = await persistTurns(dir, SOURCE, realisticTurns(PLAINTEXT_BYTES))
    sourceLogBytes = statSync(sourceFile).size
    // The seed a live fork carries in memory (the coordinator passes it with the first batch).
    const reader = createJsonlPersistence({ root: dir, readOnly: true })
    seed = (await reader.inspect(SessionId(SOURCE))).events
    await reader.close()
  },
  teardown() {
    rmSync(dir, { recursive: true, force: true })
  },
  baseline: {
    label: 'cp (the command) of the source log file, then fsync of the copy and its directory',
    async run() {
      const target = join(dir, `copy-${copies++}.jsonl.zst`)
      await quiesce()
      return time(() => {
        execFileSync('cp', [sourceFile, target])
        for (const path of [target, dir]) {
          const fd = openSync(path, 'r')
          fsyncSync(fd)
          closeSync(fd)
        }
      }).finally(() => rmSync(target, { force: true }))
    },
  },
  subject: {
    label: 'fresh backend: append(forkSource) of the fork (reference + own events), durable',
    async run() {
      const id = `bench-fork-child-${forks++}`
      const cut = seed.length
      const header = Object.freeze({ ...benchHeader(id), isSeeded: true, parentSession: SessionId(SOURCE), delegationDepth: 1 })
      const batch = [...seed, ...ownEvents(cut)]
      const persistence = createJsonlPersistence({ root: dir })
      await quiesce()
      const ms = await time(() =>
        persistence.append({ header, inheritedEventCount: cut as SessionLogOffset, forkSource: SessionId(SOURCE) }, batch),
      )
      forkLogBytes.push(statSync(persistence.logPath(id)).size)
      await persistence.close()
      return ms
    },
  },
  extra() {
    const maxForkLog = Math.max(...forkLogBytes)
    return {
      seedEvents: seed.length,
      sourceLogMiB: +(sourceLogBytes / 2 ** 20).toFixed(2),
      forkLogBytes: maxForkLog,
      forkLogTarget: '<= 4096 bytes',
      forkLogPass: maxForkLog <= 4096,
    }
  },
}

export default definition
