import { spawnSync } from 'node:child_process'
import { appendFileSync, chmodSync, existsSync, readFileSync, statSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { SessionId } from '@dsh/session'
import { createJsonlPersistence, JOURNAL_FILE, type JsonlPersistence } from '@dsh/session-persistence-jsonl'
import { afterEach, describe, expect, it } from 'vitest'
import { DEFAULT_JOURNAL_LIMIT, JournalWriter } from '../src/change-journal.js'
import { isSealed } from '../src/change-journal-compaction.js'
import { checkJournal, readJournalChanges } from '../src/change-journal-reader.js'
import { lockPathOf } from '../src/journal-lock.js'
import { decodeJournalHeader, decodeLayout, encodeRecord, HEADER_BYTES, MAX_BASE_FRAME, recordIdentity } from '../src/journal-records.js'
import { eventsFrom, targetOf, tempDir } from './helpers.js'

const open: Array<JsonlPersistence | JournalWriter> = []
const cleanups: Array<() => void> = []
afterEach(async () => {
  for (const p of open.splice(0)) await p.close()
  for (const cleanup of cleanups.splice(0)) cleanup()
})

function root(): string {
  const { dir, cleanup } = tempDir('dsh-jsonl-compaction-', { memory: true })
  cleanups.push(cleanup)
  return dir
}

function writerOf(dir: string, limit?: number): { journal: JournalWriter; compactions: () => number } {
  let compactions = 0
  const journal = new JournalWriter(dir, { ...(limit === undefined ? {} : { limit }), onCompaction: () => compactions++ })
  open.push(journal)
  return { journal, compactions: () => compactions }
}

/** One change of `id`, as the log side records it: a begin before, an end after. */
function change(journal: JournalWriter, id: string): void {
  journal.end(id, journal.begin(id))
}

const sorted = (ids: Iterable<string>): string[] => [...ids].sort()

/** The summary record of a session: 48 bytes plus its id as JSON (`journal-records.ts`). */
const summaryBytes = (id: string): number => 48 + Buffer.byteLength(JSON.stringify(id))

function layoutOf(path: string) {
  const head = readFileSync(path).subarray(0, HEADER_BYTES + MAX_BASE_FRAME)
  expect(decodeJournalHeader(head)).toBeDefined()
  return decodeLayout(head)!
}

describe('the change journal is compacted behind a horizon', () => {
  it('50,000 changes over 500 sessions: the journal never exceeds 1 MiB + the summary of the sessions changed since the horizon', async () => {
    const dir = root()
    const path = join(dir, JOURNAL_FILE)
    const { journal, compactions } = writerOf(dir)
    const ids = Array.from({ length: 500 }, (_, i) => `session-${String(i).padStart(3, '0')}`)
    // One write carries the previous change's held end and this change's begin.
    const write = encodeRecord({ kind: 'e', id: ids[0]!, op: 'ffffffffffff.zzzz', writer: recordIdentity() }).length * 2
    // The bound (README): limit + header + base + one write past the limit + one summary record per session + one in flight.
    const bound = DEFAULT_JOURNAL_LIMIT + HEADER_BYTES + MAX_BASE_FRAME + write + ids.reduce((n, id) => n + summaryBytes(id), 0) + write
    let largest = 0
    let total = 0
    for (let i = 0; i < 50_000; i++) {
      const before = statSync(path).size
      change(journal, ids[(i * 7919) % ids.length]!)
      const size = statSync(path).size
      if (size > before) total += size - before
      largest = Math.max(largest, size)
    }
    journal.flush()
    expect(largest).toBeLessThanOrEqual(bound)
    expect(statSync(path).size).toBeLessThanOrEqual(bound)
    // What the changes wrote (about 8 MiB) is many times the limit: the journal was compacted again and again.
    expect(total).toBeGreaterThan(6 * DEFAULT_JOURNAL_LIMIT)
    expect(compactions()).toBeGreaterThanOrEqual(6)
    expect(await checkJournal(dir)).toMatchObject({ ok: true })
    console.log(
      `50,000 changes over 500 sessions: ${total} bytes written, largest journal ${largest} (bound ${bound}), ${compactions()} compactions`,
    )
  })

  it('a follower polling every 100 changes is answered exactly across every compaction, never with a rescan', async () => {
    const dir = root()
    // 100 changes write about 16 KB: at most one compaction between two polls, so the cursor is never behind the horizon.
    const { journal, compactions } = writerOf(dir, 24 * 1024)
    let { cursor } = await readJournalChanges(dir, undefined)
    let changed = new Set<string>()
    for (let i = 0; i < 5_000; i++) {
      const id = `s${(i * 7919) % 313}`
      change(journal, id)
      changed.add(id)
      if (i % 100 === 99) {
        const result = await readJournalChanges(dir, cursor)
        expect(result.rescan).toBe(false)
        expect(sorted(result.ids)).toEqual(sorted(changed))
        cursor = result.cursor
        changed = new Set()
      }
    }
    expect(compactions()).toBeGreaterThan(20)
  })

  it('a follower one compaction behind is answered from the summary: exactly the sessions changed after its cursor', async () => {
    const dir = root()
    const { journal } = writerOf(dir)
    for (const id of ['early-1', 'early-2', 'both']) change(journal, id)
    const { cursor } = await readJournalChanges(dir, undefined)
    for (const id of ['late-1', 'both', 'late-2', 'late-1']) change(journal, id)
    journal.flush()
    expect(journal.compact()).toBe(true)
    const layout = layoutOf(journal.path)
    expect(layout.horizon).toBe(HEADER_BYTES)
    expect(layout.base).toBeGreaterThan(HEADER_BYTES)
    const result = await readJournalChanges(dir, cursor)
    expect(result).toMatchObject({ rescan: false })
    expect(sorted(result.ids)).toEqual(['both', 'late-1', 'late-2'])
    // It continues from the base like any follower.
    change(journal, 'after')
    expect(await readJournalChanges(dir, result.cursor)).toMatchObject({ ids: ['after'], rescan: false })
  })

  it('a follower at the head is not disturbed by a compaction, before it or at its base', async () => {
    const dir = root()
    const { journal } = writerOf(dir)
    for (let i = 0; i < 50; i++) change(journal, `s${i % 7}`)
    journal.flush()
    const head = await readJournalChanges(dir, undefined)
    const size = statSync(journal.path).size
    const ino = statSync(journal.path).ino
    expect(journal.compact()).toBe(true)
    // The journal was replaced by a smaller one (a new file, the same lifecycle).
    expect(statSync(journal.path).ino).not.toBe(ino)
    expect(statSync(journal.path).size).toBeLessThan(size)
    const quiet = await readJournalChanges(dir, head.cursor)
    expect(quiet).toMatchObject({ ids: [], rescan: false })
    // At the base now (the cursor names the seal the compaction read up to): changes after it are exact.
    change(journal, 's3')
    change(journal, 'new')
    const next = await readJournalChanges(dir, quiet.cursor)
    expect(next.rescan).toBe(false)
    expect(sorted(next.ids)).toEqual(['new', 's3'])
    // A second compaction: the follower at the head is again undisturbed.
    expect(journal.compact()).toBe(true)
    expect(await readJournalChanges(dir, next.cursor)).toMatchObject({ ids: [], rescan: false })
  })

  it('a follower behind the horizon gets the typed resync (rescanReason behind-horizon) and one counted rescan, then every change', async () => {
    const dir = root()
    const writer = createJsonlPersistence({ root: dir, journalLimit: 4096 })
    open.push(writer)
    const reader = createJsonlPersistence({ root: dir, readOnly: true })
    open.push(reader)
    for (let i = 0; i < 6; i++) await writer.append(targetOf(`s${i}`), eventsFrom(0, 2))
    const start = await reader.changes()
    expect(start).toMatchObject({ rescan: true, rescanReason: 'no-cursor' })
    // Enough changes for two compactions: the horizon passes the cursor.
    const next = new Map<string, number>(Array.from({ length: 6 }, (_, i) => [`s${i}`, 2]))
    for (let i = 0; writer.metrics.journalCompactions < 2; i++) {
      const id = `s${i % 6}`
      await writer.append(targetOf(id), eventsFrom(next.get(id)!, 1))
      next.set(id, next.get(id)! + 1)
    }
    await new Promise(setImmediate)
    const before = { ...reader.metrics }
    const behind = await reader.changes(start.cursor)
    expect(behind).toMatchObject({ ids: [], rescan: true, rescanReason: 'behind-horizon' })
    expect(reader.metrics.rescans - before.rescans).toBe(1)
    expect(reader.metrics.horizonRescans - before.horizonRescans).toBe(1)
    // The one rescan: list everything (no log body read).
    const listed = new Map((await reader.list()).map((r) => [r.header.id as string, r.revision]))
    expect(listed.size).toBe(6)
    // Then it follows exactly: an append, a new session, a delete.
    await writer.append(targetOf('s2'), eventsFrom(next.get('s2')!, 1))
    await writer.append(targetOf('fresh'), eventsFrom(0, 1))
    expect(await writer.delete(SessionId('s4'))).toBe(true)
    const followed = await reader.changes(behind.cursor)
    expect(followed.rescan).toBe(false)
    expect(sorted(followed.ids)).toEqual(['fresh', 's2', 's4'])
    for (const id of followed.ids) {
      const revision = await reader.stat(SessionId(id))
      if (revision === undefined) listed.delete(id)
      else listed.set(id, revision)
    }
    for (const record of await reader.list()) expect(listed.get(record.header.id)).toBe(record.revision)
    expect(listed.size).toBe(6)
    expect(reader.metrics.rescans - before.rescans).toBe(1)
  })

  it('a writer past journalLimit compacts on its own, counted in metrics; a bad limit is refused', async () => {
    const dir = root()
    const writer = createJsonlPersistence({ root: dir, journalLimit: 2048 })
    open.push(writer)
    for (let i = 0; i < 60; i++) await writer.append(targetOf(`s${i % 4}`), eventsFrom(Math.floor(i / 4), 1))
    expect(writer.metrics.journalCompactions).toBeGreaterThan(0)
    const layout = layoutOf(join(dir, JOURNAL_FILE))
    expect(statSync(join(dir, JOURNAL_FILE)).size - layout.start).toBeLessThanOrEqual(2048 + 1024)
    expect(statSync(join(dir, JOURNAL_FILE)).mode & 0o777).toBe(0o600)
    expect(existsSync(lockPathOf(join(dir, JOURNAL_FILE)))).toBe(false)
    for (const bad of [0, -1, 1.5, Number.NaN])
      expect(() => createJsonlPersistence({ root: dir, journalLimit: bad })).toThrow(
        expect.objectContaining({ code: 'JSONL_PERSISTENCE_INVALID_OPTIONS' }),
      )
  })

  it('operations in flight at a compaction stay pending in the summary until they end', async () => {
    const dir = root()
    const { journal } = writerOf(dir)
    const { cursor } = await readJournalChanges(dir, undefined)
    const op = journal.begin('slow')
    change(journal, 'quick')
    expect(journal.compact()).toBe(true)
    // 'slow' is in flight: reported, and again on the next call, until its end.
    const first = await readJournalChanges(dir, cursor)
    expect(sorted(first.ids)).toEqual(['quick', 'slow'])
    expect((await readJournalChanges(dir, first.cursor)).ids).toEqual(['slow'])
    journal.end('slow', op)
    const ended = await readJournalChanges(dir, first.cursor)
    expect(ended.ids).toEqual(['slow'])
    expect((await readJournalChanges(dir, ended.cursor)).ids).toEqual([])
  })
})

describe('a sealed journal', () => {
  /** A pid that no longer runs (a process that exited). */
  function deadPid(): number {
    const child = spawnSync(process.execPath, ['-e', 'process.stdout.write(String(process.pid))'], { encoding: 'utf8' })
    return Number(child.stdout)
  }

  /** What a compactor killed between its seal and its rename leaves: its lock, the journal sealed (0400), its seal record. */
  function sealAsDeadCompactor(path: string): void {
    const pid = deadPid()
    const nonce = 'deadbeefdeadbeefdeadbeef'
    writeFileSync(lockPathOf(path), `${JSON.stringify({ host: recordIdentity()[0], pid, start: null, thread: 0, nonce })}\n`)
    chmodSync(path, 0o400)
    appendFileSync(path, encodeRecord({ kind: 'x', id: '', op: nonce, writer: [recordIdentity()[0], pid, null] }))
  }

  it('a follower waits at the seal; the next writer completes the compaction of a dead process; the follower continues without a rescan', async () => {
    const dir = root()
    const { journal } = writerOf(dir)
    for (const id of ['a', 'b']) change(journal, id)
    journal.flush()
    const { cursor } = await readJournalChanges(dir, undefined)
    change(journal, 'c')
    journal.flush()
    sealAsDeadCompactor(journal.path)
    // The follower reads up to the seal and waits there: 'c' now, nothing after.
    const atSeal = await readJournalChanges(dir, cursor)
    expect(atSeal).toMatchObject({ ids: ['c'], rescan: false })
    expect(await readJournalChanges(dir, atSeal.cursor)).toMatchObject({ ids: [], rescan: false })
    const ino = statSync(journal.path).ino
    // A writer finds the journal sealed by a dead process: it compacts it, then records its change in the new journal.
    change(journal, 'd')
    journal.flush()
    expect(statSync(journal.path).ino).not.toBe(ino)
    expect(isSealed(statSync(journal.path).mode)).toBe(false)
    expect(existsSync(lockPathOf(journal.path))).toBe(false)
    expect(await readJournalChanges(dir, atSeal.cursor)).toMatchObject({ ids: ['d'], rescan: false })
    expect(await checkJournal(dir)).toMatchObject({ ok: true })
  })

  it('a seal left in an unsealed journal (a compaction that failed) is read past', async () => {
    const dir = root()
    const { journal } = writerOf(dir)
    change(journal, 'a')
    journal.flush()
    const { cursor } = await readJournalChanges(dir, undefined)
    appendFileSync(journal.path, encodeRecord({ kind: 'x', id: '', op: 'failed', writer: recordIdentity() }))
    change(journal, 'b')
    journal.flush()
    const first = await readJournalChanges(dir, cursor)
    expect(first).toMatchObject({ ids: [], rescan: false })
    expect(await readJournalChanges(dir, first.cursor)).toMatchObject({ ids: ['b'], rescan: false })
    expect(await checkJournal(dir)).toMatchObject({ ok: true, records: 5 })
  })
})
