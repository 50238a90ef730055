import { createHash } from 'node:crypto'
import { mkdirSync, readdirSync, rmSync, statfsSync, truncateSync } from 'node:fs'
import { join } from 'node:path'
import { SessionId } from '@dsh/session'
import { createJsonlPersistence, type JsonlPersistence } from '@dsh/session-persistence-jsonl'
import { fill, mountTmpfs, unmount } from '@dsh/tooling/tmpfs'
import { afterEach, describe, expect, it } from 'vitest'
import { appendV0Batch, importV0, toDshEvent, writeV0Log } from '../src/index.js'
import { T0, tempDir, V0Builder } from './fixtures.js'

/**
 * A disk that fills up in the middle of importing one session, for real: a
 * 16 MiB tmpfs mounted for the test (we run as root here and in CI; a machine
 * where the mount is refused fails the test with the reason, it is never
 * skipped), filled with a filler file until only BUDGET bytes are free. The
 * v0 session (in a normal temp dir) holds ~4 MiB of random base64 that zstd
 * cannot shrink below the budget, so dozens of append batches are made and
 * one of them hits ENOSPC after several were committed.
 *
 * What `importV0` documents, and this proves with the real JSONL backend:
 * per-session faults never stop the run (the promise resolves, the session is
 * `failed` with `IMPORT_V0_PERSISTENCE_FAILED`); a failed write keeps what was
 * written ("the next run continues from what was written"), so the store
 * holds a contiguous, verified prefix of the converted events and nothing
 * acknowledged is lost; the report counts what was kept as written by the
 * run (the session's `appended`, the run's `appends`); once there is space
 * the next run appends exactly the rest (`updated`), and the run after that
 * finds it `unchanged`. The same holds for an update, whose new events are
 * held until the v0 log was read to its end and then appended in batches.
 */

const MOUNT_SIZE = '16m'
/** What is left free for the first run: the root, its journal and a few batches fit; the session (~3 MiB stored) does not. */
const BUDGET = 1024 * 1024
const TURNS = 64
/** Random base64 per turn (one user message each): ~48 KiB of entropy, ~4 MiB of text in all. */
const NOISE_CHARS = 64 * 1024
/** Every turn's big message fills a batch: one append per turn, dozens in all. */
const BATCH_BYTES = 32 * 1024
const ID = 'full-disk'
/** The update case: a session of BEFORE_TURNS imported with space, grown by GROWN_TURNS, then left UPDATE_BUDGET (a third of the growth). */
const BEFORE_TURNS = 16
const GROWN_TURNS = 32
const UPDATE_BUDGET = 512 * 1024

function freeBytes(dir: string): number {
  const stats = statfsSync(dir)
  return stats.bavail * stats.bsize
}

/** Deterministic text zstd cannot compress much: base64 of a SHA-256 counter stream. */
function noise(seed: string, chars: number): string {
  const blocks: Buffer[] = []
  for (let i = 0, bytes = 0; bytes * 4 < chars * 3; i++, bytes += 32) blocks.push(createHash('sha256').update(`${seed}:${i}`).digest())
  return Buffer.concat(blocks).toString('base64').slice(0, chars)
}

/** Everything under `dir`, relative, sorted. */
function listing(dir: string): string[] {
  return (readdirSync(dir, { recursive: true }) as string[]).sort()
}

const cleanups: (() => Promise<void> | void)[] = []
afterEach(async () => {
  // Last registered first: persistences close, then the tmpfs is unmounted, then the temp dirs go.
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup()
})

/** A JSONL root on a fresh tmpfs: `leave(bytes)` fills the tmpfs until only `bytes` are free, `unfill()` frees it again. */
function jsonlOnTmpfs(prefix: string): {
  root: string
  open: (readOnly?: boolean) => JsonlPersistence
  leave: (bytes: number) => void
  unfill: () => void
} {
  const base = tempDir(prefix)
  cleanups.push(() => rmSync(base, { recursive: true, force: true }))
  const mount = join(base, 'mnt')
  mkdirSync(mount, { mode: 0o700 })
  mountTmpfs(mount, MOUNT_SIZE)
  cleanups.push(() => unmount(mount))
  const root = join(mount, 'root')
  const filler = join(mount, 'filler')
  const opened: JsonlPersistence[] = []
  cleanups.push(async () => {
    for (const p of opened) await p.close().catch(() => undefined)
  })
  return {
    root,
    open: (readOnly = false) => {
      const p = createJsonlPersistence({ root, ...(readOnly ? { readOnly } : {}) })
      opened.push(p)
      return p
    },
    leave: (bytes) => {
      const filled = fill(filler)
      expect(freeBytes(mount)).toBe(0)
      truncateSync(filler, filled - bytes)
      expect(freeBytes(mount)).toBe(bytes)
    },
    unfill: () => rmSync(filler),
  }
}

/** The run's one session, failed because the disk filled up (typed, and telling the next run continues). */
function fullDiskFailure(report: Awaited<ReturnType<typeof importV0>>): Awaited<ReturnType<typeof importV0>>['sessions'][number] {
  const failure = report.sessions[0]
  expect(failure).toMatchObject({
    id: ID,
    status: 'failed',
    reason: {
      code: 'IMPORT_V0_PERSISTENCE_FAILED',
      message: expect.stringMatching(/SESSION_PERSISTENCE_IO.*ENOSPC.*the next run continues from what was written/s),
    },
  })
  return failure!
}

describe('importV0 into a JSONL root that runs out of space mid-session (ENOSPC on a real tmpfs)', () => {
  it('reports the session failed with IMPORT_V0_PERSISTENCE_FAILED, keeps a verified prefix, and the next run with space completes it', async () => {
    // The v0 source, in a normal temp dir.
    const from = tempDir('enospc-src')
    cleanups.push(() => rmSync(from, { recursive: true, force: true }))
    const b = new V0Builder()
    for (let turn = 1; turn <= TURNS; turn++) b.turn(turn, noise(`turn-${turn}`, NOISE_CHARS), `Answer ${turn}.`, { tool: turn % 4 === 0 })
    await writeV0Log(from, { id: ID, createdAt: T0, cwd: '/srv/full-disk', delegationDepth: 0 }, b.batches)
    const converted = b.events.map(toDshEvent)
    const total = converted.length
    const dry = await importV0({ from, dryRun: true, batchBytes: BATCH_BYTES })
    expect(dry.sessions).toEqual([expect.objectContaining({ id: ID, status: 'imported', events: total, appended: total })])

    // The target: a real tmpfs, filled until only BUDGET bytes are left.
    const { root, open, leave, unfill } = jsonlOnTmpfs('enospc-mnt')
    leave(BUDGET)

    // Run 1: the disk fills up after some batches were committed. The run resolves; the session is failed, typed.
    const first = open()
    const failedRun = await importV0({ from, persistence: first, batchBytes: BATCH_BYTES })
    expect(failedRun).toMatchObject({ dryRun: false, imported: 0, updated: 0, unchanged: 0, failed: 1 })
    expect(failedRun.sessions).toHaveLength(1)
    const failure = fullDiskFailure(failedRun)
    const committedBatches = first.metrics.appends
    expect(committedBatches).toBeGreaterThan(1) // it failed mid-session, not at the first write
    // The run reports the batches it committed (and kept) as its own, not 0.
    expect(failedRun.appends).toBe(committedBatches)
    await first.close()

    // What was acknowledged is kept and consistent: a contiguous prefix of the converted events, no torn bytes,
    // no temporary file or lock left behind.
    const reader = open(true)
    expect(await reader.stat(SessionId(ID))).toBeDefined()
    const kept = await reader.inspect(SessionId(ID))
    const n = kept.events.length
    expect(n).toBeGreaterThan(0)
    expect(n).toBeLessThan(total)
    expect(kept.events.map((e) => e.seq)).toEqual(Array.from({ length: n }, (_, i) => i))
    expect(kept.events).toEqual(converted.slice(0, n))
    expect(await reader.verify(SessionId(ID))).toMatchObject({ events: n, tornBytes: 0 })
    expect(listing(root).filter((name) => name.includes('.tmp-') || name.endsWith('writer.lock'))).toEqual([])
    // The failed session's `appended` is exactly what a fresh reader finds stored: the events this run wrote and kept.
    expect(failure?.appended).toBe(n)

    // Run 2, with space again: only the rest is appended, and the session is whole.
    unfill()
    const second = open()
    const resumed = await importV0({ from, persistence: second, batchBytes: BATCH_BYTES })
    expect(resumed).toMatchObject({ imported: 0, updated: 1, unchanged: 0, failed: 0 })
    expect(resumed.sessions).toEqual([expect.objectContaining({ id: ID, status: 'updated', events: total, appended: total - n })])
    expect(resumed.sessions[0]?.reason).toBeUndefined()
    expect(resumed.appends).toBeGreaterThan(0)
    expect(resumed.appends).toBe(second.metrics.appends)
    await second.close()
    const whole = open(true)
    const stored = await whole.inspect(SessionId(ID))
    expect(stored.events).toHaveLength(dry.sessions[0]?.events as number)
    expect(stored.events).toEqual(converted)
    expect(await whole.verify(SessionId(ID))).toMatchObject({ events: total, tornBytes: 0 })

    // Run 3: nothing left to do.
    const third = open()
    const again = await importV0({ from, persistence: third, batchBytes: BATCH_BYTES })
    expect(again).toMatchObject({ imported: 0, updated: 0, unchanged: 1, failed: 0, appends: 0 })
    expect(again.sessions).toEqual([expect.objectContaining({ id: ID, status: 'unchanged', events: total, appended: 0 })])
    expect(third.metrics.appends).toBe(0)
  })

  it('reports an update whose held suffix hits ENOSPC part-way as failed with what it kept, and the next run completes it', async () => {
    const from = tempDir('enospc-update-src')
    cleanups.push(() => rmSync(from, { recursive: true, force: true }))
    const header = { id: ID, createdAt: T0, cwd: '/srv/full-disk', delegationDepth: 0 }
    const b = new V0Builder()
    for (let turn = 1; turn <= BEFORE_TURNS; turn++)
      b.turn(turn, noise(`turn-${turn}`, NOISE_CHARS), `Answer ${turn}.`, { tool: turn % 4 === 0 })
    const path = await writeV0Log(from, header, b.batches)
    const before = b.events.length
    const { open, leave, unfill } = jsonlOnTmpfs('enospc-update-mnt')

    // Run 1, with space: the whole session.
    const first = open()
    const imported = await importV0({ from, persistence: first, batchBytes: BATCH_BYTES })
    expect(imported).toMatchObject({ imported: 1, failed: 0 })
    expect(imported.sessions).toEqual([expect.objectContaining({ id: ID, status: 'imported', events: before, appended: before })])
    await first.close()

    // The session grows in the harness: one v0 batch (frame) per turn, about three times what will be left free.
    for (let turn = BEFORE_TURNS + 1; turn <= BEFORE_TURNS + GROWN_TURNS; turn++) {
      const start = b.events.length
      b.turn(turn, noise(`turn-${turn}`, NOISE_CHARS), `Answer ${turn}.`, { tool: turn % 4 === 0 })
      await appendV0Batch(path, b.events.slice(start))
    }
    const converted = b.events.map(toDshEvent)
    const total = converted.length

    // Run 2: the held suffix is appended at the end, batch by batch, until the disk is full.
    leave(UPDATE_BUDGET)
    const second = open()
    const failedRun = await importV0({ from, persistence: second, batchBytes: BATCH_BYTES })
    expect(failedRun).toMatchObject({ imported: 0, updated: 0, unchanged: 0, failed: 1 })
    const failure = fullDiskFailure(failedRun)
    // An update's suffix is held until the log was read to its end: every event was read when the write failed.
    expect(failure.events).toBe(total)
    const committedBatches = second.metrics.appends
    expect(committedBatches).toBeGreaterThan(1) // part of the suffix was written, not none of it
    expect(failedRun.appends).toBe(committedBatches)
    await second.close()

    // What it kept: a verified, contiguous prefix longer than the imported one, exactly `appended` events longer.
    const reader = open(true)
    const kept = await reader.inspect(SessionId(ID))
    const m = kept.events.length
    expect(m).toBeGreaterThan(before)
    expect(m).toBeLessThan(total)
    expect(kept.events).toEqual(converted.slice(0, m))
    expect(await reader.verify(SessionId(ID))).toMatchObject({ events: m, tornBytes: 0 })
    expect(failure?.appended).toBe(m - before)

    // Run 3, with space again: the rest.
    unfill()
    const third = open()
    const resumed = await importV0({ from, persistence: third, batchBytes: BATCH_BYTES })
    expect(resumed).toMatchObject({ imported: 0, updated: 1, unchanged: 0, failed: 0 })
    expect(resumed.sessions).toEqual([expect.objectContaining({ id: ID, status: 'updated', events: total, appended: total - m })])
    expect(resumed.appends).toBe(third.metrics.appends)
    await third.close()
    const whole = open(true)
    expect((await whole.inspect(SessionId(ID))).events).toEqual(converted)
    expect(await whole.verify(SessionId(ID))).toMatchObject({ events: total, tornBytes: 0 })
  })
})
