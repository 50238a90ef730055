import { appendFileSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import { createJsonlPersistence, JOURNAL_FILE, type JsonlPersistence } from '@dsh/session-persistence-jsonl'
import { afterEach, describe, expect, it } from 'vitest'
import { JournalWriter } from '../src/change-journal.js'
import { encodeRecord, recordIdentity } from '../src/journal-records.js'
import { eventsFrom, targetOf, tempDir } from './helpers.js'

/**
 * A journal write that fails part-way (a full disk) leaves a partial frame;
 * later writers append whole records after it. The partial frame here is
 * written by hand: the first bytes of a record whose declared length reaches
 * past everything appended after it, as a torn write leaves it.
 */
const open: JsonlPersistence[] = []
const cleanups: Array<() => void> = []
afterEach(async () => {
  for (const p of open.splice(0)) await p.close()
  for (const cleanup of cleanups.splice(0)) cleanup()
})

async function fixture() {
  const { dir, cleanup } = tempDir('dsh-jsonl-feed-torn-')
  cleanups.push(cleanup)
  const writer = createJsonlPersistence({ root: dir })
  open.push(writer)
  for (const id of ['a', 'b']) await writer.append(targetOf(id), eventsFrom(0, 3))
  const reader = createJsonlPersistence({ root: dir, readOnly: true })
  open.push(reader)
  return { dir, writer, reader, journal: join(dir, JOURNAL_FILE) }
}

/** The first `keep` bytes of a begin record of a long id (declared length about 4 KB). */
function tornFrame(keep: number): Buffer {
  const whole = encodeRecord({ kind: 'b', id: 'l'.repeat(4000), op: 'torn.0', writer: recordIdentity() })
  return whole.subarray(0, keep)
}

describe('a torn change journal record', () => {
  it.each([100, 7])('a change acknowledged after a torn record (%i bytes kept) is never invisible to a follower', async (keep) => {
    const { writer, reader, journal } = await fixture()
    const { cursor } = await reader.changes()
    appendFileSync(journal, tornFrame(keep))
    await writer.append(targetOf('b'), eventsFrom(3, 1))
    const size = readFileSync(journal).length
    // Everything appended after the torn frame still lies inside its declared length.
    expect(size).toBeLessThan(4000)
    const first = await reader.changes(cursor)
    expect(first).toMatchObject({ rescan: true, rescanReason: 'feed-lost' })
    // One rescan: the follower then continues after the damage, exactly.
    await writer.append(targetOf('a'), eventsFrom(3, 1))
    expect(await reader.changes(first.cursor)).toMatchObject({ ids: ['a'], rescan: false })
    expect(await writer.verifyChangeJournal()).toMatchObject({ ok: false, reason: expect.stringMatching(/damaged records/) })
  })

  it('a torn record at the end with nothing after it is the end of the records (a write may still be under way)', async () => {
    const { writer, reader, journal } = await fixture()
    const { cursor } = await reader.changes()
    appendFileSync(journal, tornFrame(100))
    expect(await reader.changes(cursor)).toMatchObject({ ids: [], rescan: false })
    expect(await writer.verifyChangeJournal()).toMatchObject({ ok: true })
  })

  it('a compaction across a torn record moves the horizon: a follower before it rescans', async () => {
    const { dir, writer, reader, journal } = await fixture()
    const { cursor } = await reader.changes()
    appendFileSync(journal, tornFrame(100))
    await writer.append(targetOf('b'), eventsFrom(3, 1))
    const compactor = new JournalWriter(dir)
    try {
      expect(compactor.compact()).toBe(true)
    } finally {
      compactor.close()
    }
    expect(await reader.changes(cursor)).toMatchObject({ rescan: true })
  })
})
