import { appendFileSync, readFileSync, renameSync, rmSync, statSync, truncateSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { SessionId, SessionLogOffset } from '@dsh/session'
import { createJsonlPersistence, JOURNAL_FILE, type JsonlPersistence } from '@dsh/session-persistence-jsonl'
import { afterEach, describe, expect, it } from 'vitest'
import { JournalWriter } from '../src/change-journal.js'
import { checkJournal, readJournalChanges } from '../src/change-journal-reader.js'
import { checkpointDistance } from '../src/log-padding.js'
import { eventsFrom, targetOf, tempDir } from './helpers.js'

const open: JsonlPersistence[] = []
const cleanups: Array<() => void> = []
afterEach(async () => {
  for (const p of open.splice(0)) await p.close()
  for (const cleanup of cleanups.splice(0)) cleanup()
})

/** A fresh root (per test) with a writer and a separate read-only follower. */
async function fixture() {
  const { dir, cleanup } = tempDir('dsh-jsonl-feed-')
  cleanups.push(cleanup)
  const writer = createJsonlPersistence({ root: dir })
  open.push(writer)
  for (const id of ['a', 'b', 'c']) await writer.append(targetOf(id), eventsFrom(0, 3))
  const reader = createJsonlPersistence({ root: dir, readOnly: true })
  open.push(reader)
  const journal = join(dir, JOURNAL_FILE)
  return { dir, writer, reader, journal }
}

const sorted = (ids: readonly string[]): string[] => [...ids].sort()

describe('the JSONL change journal', () => {
  it('a follower with nothing changed opens no log and reads no header', async () => {
    const { dir, reader } = await fixture()
    const { cursor } = await reader.changes()
    const fresh = createJsonlPersistence({ root: dir, readOnly: true })
    open.push(fresh)
    const result = await fresh.changes(cursor)
    expect(result).toMatchObject({ ids: [], rescan: false })
    expect(fresh.metrics).toMatchObject({ logOpens: 0, headerReads: 0, bodyReads: 0, rescans: 0 })
  })

  it('a deleted journal means one rescan, then exact results again', async () => {
    const { writer, reader, journal } = await fixture()
    const { cursor } = await reader.changes()
    await writer.append(targetOf('a'), eventsFrom(3, 1))
    // The writer's end record is written on the next turn of the event loop (or with its next begin).
    await new Promise((resolve) => setImmediate(resolve))
    rmSync(journal)
    const before = reader.metrics.rescans
    const first = await reader.changes(cursor)
    expect(first.rescan).toBe(true)
    expect(reader.metrics.rescans).toBe(before + 1)
    // Nothing written since: no second rescan.
    const quiet = await reader.changes(first.cursor)
    expect(quiet).toMatchObject({ ids: [], rescan: false })
    // A new writer re-creates the journal: the follower cannot know what the new one missed, so it rescans once more, then follows.
    const next = createJsonlPersistence({ root: writer.root })
    open.push(next)
    await writer.close()
    await next.append(targetOf('b'), eventsFrom(3, 1))
    const recreated = await reader.changes(quiet.cursor)
    expect(recreated.rescan).toBe(true)
    await next.append(targetOf('c'), eventsFrom(3, 1))
    expect(await reader.changes(recreated.cursor)).toMatchObject({ ids: ['c'], rescan: false })
  })

  it('a truncated journal means one rescan, then exact results', async () => {
    const { writer, reader, journal } = await fixture()
    const { cursor } = await reader.changes()
    await writer.append(targetOf('a'), eventsFrom(3, 1))
    truncateSync(journal, 40)
    const first = await reader.changes(cursor)
    expect(first.rescan).toBe(true)
    await writer.append(targetOf('b'), eventsFrom(3, 1))
    await writer.append(targetOf('c'), eventsFrom(3, 1))
    const next = await reader.changes(first.cursor)
    // The records after the cut-off record may be misaligned: either exact ids or (once) a rescan, never a wrong answer.
    if (next.rescan) {
      await writer.append(targetOf('a'), eventsFrom(4, 1))
      expect(await reader.changes(next.cursor)).toMatchObject({ ids: ['a'], rescan: false })
    } else {
      expect(sorted(next.ids)).toEqual(['b', 'c'])
    }
  })

  it('a journal truncated and regrown past the cursor is detected (the cursor names its last record)', async () => {
    const { writer, reader, journal } = await fixture()
    const { cursor } = await reader.changes()
    const size = readFileSync(journal).length
    truncateSync(journal, 32)
    // Regrow with other records beyond the old size (a turn of the event loop after each append writes its end:
    // back-to-back appends of one session would be one operation, one begin and one end).
    for (let i = 0; i < 8; i++) {
      await writer.append(targetOf('b'), eventsFrom(3 + i, 1))
      await new Promise((resolve) => setImmediate(resolve))
    }
    expect(readFileSync(journal).length).toBeGreaterThan(size)
    expect((await reader.changes(cursor)).rescan).toBe(true)
  })

  it('garbage in the journal means one rescan; the follower then continues after it', async () => {
    const { writer, reader, journal } = await fixture()
    expect(await writer.verifyChangeJournal()).toMatchObject({ ok: true, records: 6 })
    const { cursor } = await reader.changes()
    appendFileSync(journal, Buffer.from('this is not a journal record, just noise \u0000\u0001\u0002'))
    await writer.append(targetOf('a'), eventsFrom(3, 1))
    const first = await reader.changes(cursor)
    expect(first.rescan).toBe(true)
    await writer.append(targetOf('b'), eventsFrom(3, 1))
    expect(await reader.changes(first.cursor)).toMatchObject({ ids: ['b'], rescan: false })
    // verify reports the damage (the journal is append-only: it stays until the journal is replaced).
    expect(await writer.verifyChangeJournal()).toMatchObject({ ok: false, reason: expect.stringMatching(/damaged records/) })
  })

  it('a damaged journal header: readers rescan, the next writer starts a new journal, followers continue', async () => {
    const { dir, writer, reader, journal } = await fixture()
    const { cursor } = await reader.changes()
    const bytes = readFileSync(journal)
    bytes[0] = bytes[0]! ^ 0xff
    writeFileSync(journal, bytes)
    const damaged = await reader.changes(cursor)
    expect(damaged.rescan).toBe(true)
    expect(await reader.changes(damaged.cursor)).toMatchObject({ ids: [], rescan: false })
    const verification = await reader.verifyChangeJournal()
    expect(verification.ok).toBe(false)
    expect(verification.reason).toMatch(/header/)
    await writer.close()
    const next = createJsonlPersistence({ root: dir })
    open.push(next)
    expect((await next.verifyChangeJournal()).ok).toBe(true)
    await next.append(targetOf('a'), eventsFrom(3, 1))
    const replaced = await reader.changes(damaged.cursor)
    expect(replaced.rescan).toBe(true)
    await next.append(targetOf('c'), eventsFrom(3, 1))
    expect(await reader.changes(replaced.cursor)).toMatchObject({ ids: ['c'], rescan: false })
  })

  it('a writer whose journal was deleted under it writes to the new one: nothing is lost', async () => {
    const { writer, reader, journal } = await fixture()
    // The fixture's last end record goes out on the next turn of the event loop; once it has, the journal is deleted.
    await new Promise(setImmediate)
    rmSync(journal)
    const { cursor } = await reader.changes()
    await writer.append(targetOf('a'), eventsFrom(3, 1))
    // The writer re-created the journal; the follower (whose cursor says "no journal") rescans once, then follows.
    const first = await reader.changes(cursor)
    expect(first.rescan).toBe(true)
    await writer.append(targetOf('b'), eventsFrom(3, 1))
    expect(await reader.changes(first.cursor)).toMatchObject({ ids: ['b'], rescan: false })
  })

  it('back-to-back changes of one session are one operation: one begin before the first, one end after the last', async () => {
    const { dir, cleanup } = tempDir('dsh-jsonl-feed-')
    cleanups.push(cleanup)
    const path = join(dir, JOURNAL_FILE)
    const journal = new JournalWriter(dir)
    const { cursor } = await readJournalChanges(dir, undefined)
    const op = journal.begin('s')
    const size = statSync(path).size
    journal.end('s', op)
    // The end is held; a begin of the same session takes it back and continues the operation, writing nothing.
    for (let i = 0; i < 5; i++) {
      expect(journal.begin('s')).toBe(op)
      journal.end('s', op)
    }
    expect(statSync(path).size).toBe(size)
    // Another session's begin carries the held end along.
    const other = journal.begin('t')
    expect(other).not.toBe(op)
    journal.end('t', other)
    journal.close()
    expect(await checkJournal(dir)).toMatchObject({ ok: true, records: 4 })
    expect(sorted((await readJournalChanges(dir, cursor)).ids)).toEqual(['s', 't'])
  })

  it('a continued operation whose journal was moved away writes a new begin to the current journal', async () => {
    const { dir, cleanup } = tempDir('dsh-jsonl-feed-')
    cleanups.push(cleanup)
    const path = join(dir, JOURNAL_FILE)
    const journal = new JournalWriter(dir)
    const op = journal.begin('s')
    journal.end('s', op)
    renameSync(path, `${path}.moved`)
    // The held begin is in the moved file, which no follower reads: the change is announced in a new journal.
    const next = journal.begin('s')
    expect(next).not.toBe(op)
    const first = await readJournalChanges(dir, undefined)
    expect(first.rescan).toBe(true)
    // In flight at the rescan (its begin is in the new journal): reported when it ends.
    journal.end('s', next)
    expect(await readJournalChanges(dir, first.cursor)).toMatchObject({ ids: ['s'], rescan: false })
    journal.close()
  })

  it('the journal and every file are private (0600)', async () => {
    const { journal } = await fixture()
    const { statSync } = await import('node:fs')
    expect(statSync(journal).mode & 0o777).toBe(0o600)
  })
})

describe('appends from a fresh process verify the tail only', () => {
  it('reads the header and the last batch, not the whole log', async () => {
    const { dir, cleanup } = tempDir('dsh-jsonl-tail-')
    cleanups.push(cleanup)
    const p = createJsonlPersistence({ root: dir })
    for (let b = 0; b < 200; b++) await p.append(targetOf('big'), eventsFrom(b * 20, 20))
    await p.close()
    const size = readFileSync(p.logPath('big')).length
    const fresh = createJsonlPersistence({ root: dir })
    open.push(fresh)
    await fresh.append(targetOf('big'), eventsFrom(4000, 1))
    expect(fresh.metrics.tailVerifications).toBe(1)
    expect(fresh.metrics.bodyReads).toBe(0)
    // The header prefix, the units after the newest end slot (at most a sixteenth of the log: checkpointDistance) and the last batch.
    expect(fresh.metrics.bytesRead).toBeLessThan(checkpointDistance(size) + 4096)
    expect(fresh.metrics.bytesRead).toBeLessThan(size / 4)
    // A conflicting append is still refused (the tail says where the log ends).
    await expect(fresh.append(targetOf('big'), eventsFrom(4000, 1))).rejects.toMatchObject({ code: 'SESSION_PERSISTENCE_CONFLICT' })
    expect((await fresh.inspect(SessionId('big'))).events).toHaveLength(4001)
  })

  it('a suffix read reads only the batches that hold the suffix', async () => {
    const { dir, cleanup } = tempDir('dsh-jsonl-suffix-')
    cleanups.push(cleanup)
    const p = createJsonlPersistence({ root: dir })
    open.push(p)
    for (let b = 0; b < 200; b++) await p.append(targetOf('big'), eventsFrom(b * 20, 20))
    const size = readFileSync(p.logPath('big')).length
    const reader = createJsonlPersistence({ root: dir, readOnly: true })
    open.push(reader)
    const suffix = await reader.inspectFrom(SessionId('big'), SessionLogOffset(3990))
    expect(suffix.events.map((e) => e.seq)).toEqual(Array.from({ length: 10 }, (_, i) => 3990 + i))
    expect(reader.metrics.bodyReads).toBe(0)
    // The tail (as above) and the batches holding the suffix.
    expect(reader.metrics.bytesRead).toBeLessThan(checkpointDistance(size) + 4096)
    expect(reader.metrics.bytesRead).toBeLessThan(size / 4)
    const whole = await reader.inspect(SessionId('big'))
    expect(JSON.stringify(suffix.events)).toBe(JSON.stringify(whole.events.slice(3990)))
    expect(suffix.revision).toBe(whole.revision)
  })
})
