import { constants, promises as fsp, readFileSync } from 'node:fs'
import type { FileHandle } from 'node:fs/promises'
import { join } from 'node:path'
import type { SessionRescanReason } from '@dsh/session-persistence'
import { persistenceError } from '@dsh/session-persistence/backend'
import { flushWriters, JOURNAL_FILE } from './change-journal.js'
import { isSealed } from './change-journal-compaction.js'
import { isErrno, readAt } from './fs-io.js'
import {
  type CursorState,
  decodeCursor,
  decodeJournalHeader,
  decodeLayout,
  encodeCursor,
  HEADER_BYTES,
  identityOf,
  type JournalLayout,
  logicalOf,
  MAX_BASE_FRAME,
  type Pending,
  physicalOf,
  readFrame,
  readSummary,
  type Walk,
  walk,
} from './journal-records.js'
import { isAlive } from './process-identity.js'

/**
 * The reader's side of the change journal (`change-journal.ts` states the
 * invariants): `changes(since)` over the journal of a root. Reads the journal
 * only, never a log; a follower with a cursor at or after the base reads the
 * journal's first bytes (header and base record) and the records after its
 * cursor, so its cost is O(changes since).
 *
 * - A cursor at or after the base continues exactly: the record it names
 *   (the one ending at its offset, or at the base the seal the compaction
 *   read up to) must be there, else the journal was truncated and regrown.
 * - A cursor between the horizon and the base is answered from the summary:
 *   the sessions whose last change there lies after it, those it held
 *   pending, and the operations in flight at the base (still pending).
 * - A cursor before the horizon answers `rescan: true`, `behind-horizon`.
 * - A follower that reaches a seal while the journal is sealed waits there
 *   (answering what it holds pending): what follows the seal goes to the
 *   compacted journal, where it continues from the base.
 */
export interface JournalChanges {
  readonly ids: readonly string[]
  readonly cursor: string
  readonly rescan: boolean
  /** Why a rescan is needed. */
  readonly reason?: SessionRescanReason
  /** What happened, in words (for `verify` and logs). */
  readonly detail?: string
}

const bootId = readBootId()

type Followed = { readonly result: JournalChanges } | { readonly damage: string }

/** `changes(since)` over the journal of `root`. */
export async function readJournalChanges(root: string, since: string | undefined): Promise<JournalChanges> {
  const path = join(root, JOURNAL_FILE)
  flushWriters(path)
  const state = decodeCursor(since)
  let handle: FileHandle
  try {
    handle = await openJournal(path)
  } catch (error) {
    if ((error as { code?: string }).code === 'SESSION_PERSISTENCE_IO') throw error
    if (!isErrno(error, 'ENOENT'))
      throw persistenceError('SESSION_PERSISTENCE_IO', `Could not read the change journal ${path}: ${(error as Error).message}.`, {
        cause: error,
      })
    const cursor = encodeCursor({ lifecycle: 'none', boot: bootId, offset: 0, lastLength: 0, lastCrc: 0, pending: [] })
    // No journal, and none when the cursor was minted: no writer wrote since (writers create it before any change).
    if (state !== undefined && state.lifecycle === 'none' && state.boot === bootId) return { ids: [], cursor, rescan: false }
    return since === undefined
      ? { ids: [], cursor, rescan: true, reason: 'no-cursor', detail: 'no cursor' }
      : { ids: [], cursor, rescan: true, reason: 'feed-lost', detail: 'the change journal is missing' }
  }
  try {
    const stats = await handle.stat()
    const size = stats.size
    const head = await readAt(handle, 0, Math.min(size, HEADER_BYTES + MAX_BASE_FRAME))
    const lifecycle = decodeJournalHeader(head)
    const layout = lifecycle === undefined ? undefined : decodeLayout(head)
    if (lifecycle === undefined || layout === undefined || layout.start > size) {
      // A damaged header: nothing can be followed, but an unchanged file means no writer wrote since.
      const mark = `damaged:${stats.ino}`
      const cursor = encodeCursor({ lifecycle: mark, boot: bootId, offset: size, lastLength: 0, lastCrc: 0, pending: [] })
      if (state !== undefined && state.lifecycle === mark && state.boot === bootId && state.offset === size)
        return { ids: [], cursor, rescan: false }
      return { ids: [], cursor, rescan: true, reason: 'feed-lost', detail: 'the change journal header is damaged' }
    }
    let reason: readonly [SessionRescanReason, string] | undefined
    if (state === undefined)
      reason = since === undefined ? ['no-cursor', 'no cursor'] : ['unknown-cursor', 'the cursor is not a change journal cursor']
    else if (state.lifecycle !== lifecycle) reason = ['feed-lost', 'the change journal was re-created since the cursor']
    else if (state.boot !== bootId) reason = ['feed-lost', 'the machine restarted since the cursor']
    else if (state.offset > logicalOf(layout, size)) reason = ['feed-lost', 'the change journal was truncated']
    else if (state.offset < layout.horizon) reason = ['behind-horizon', 'the change journal was compacted past the cursor']
    if (reason === undefined && state !== undefined) {
      const followed =
        state.offset < layout.base
          ? await fromSummary(handle, lifecycle, layout, size, state)
          : await fromTail(handle, lifecycle, layout, size, state, isSealed(stats.mode))
      if ('result' in followed) return followed.result
      reason = ['feed-lost', followed.damage]
    }
    return await rescan(handle, lifecycle, layout, size, reason ?? ['no-cursor', 'no cursor'])
  } finally {
    await handle.close()
  }
}

/** A cursor at or after the base: the records after it. */
async function fromTail(
  handle: FileHandle,
  lifecycle: string,
  layout: JournalLayout,
  size: number,
  state: CursorState,
  sealed: boolean,
): Promise<Followed> {
  const named = { damage: 'the change journal does not hold the record the cursor names' }
  const at = physicalOf(layout, state.offset)
  if (state.offset === layout.base && state.lastLength > 0) {
    // The record before the base is the seal of the journal this one replaced.
    if (state.lastLength !== layout.anchorLength || state.lastCrc !== layout.anchorCrc) return named
    const buf = await readAt(handle, at, size - at)
    return follow(lifecycle, layout, at, state, walk(buf, 0, state.pending))
  }
  const from = at - state.lastLength
  if (from < layout.start) return named
  const buf = await readAt(handle, from, size - from)
  if (state.lastLength > 0) {
    const last = readFrame(buf, 0)
    if (last.status !== 'record' || last.end !== state.lastLength || last.crc !== state.lastCrc) return named
    // Stopped at a seal: wait there while the journal is sealed (what follows goes to the compacted journal).
    if (last.record.kind === 'x' && sealed) {
      const waiting: Walk = {
        reported: [],
        pending: [...state.pending],
        end: state.lastLength,
        lastLength: 0,
        lastCrc: 0,
        damaged: false,
        sealed,
      }
      return follow(lifecycle, layout, from, state, waiting)
    }
  }
  return follow(lifecycle, layout, from, state, walk(buf, state.lastLength, state.pending))
}

/** A cursor between the horizon and the base: the summary, then the verbatim records. */
async function fromSummary(
  handle: FileHandle,
  lifecycle: string,
  layout: JournalLayout,
  size: number,
  state: CursorState,
): Promise<Followed> {
  const buf = await readAt(handle, layout.summaryStart, size - layout.summaryStart)
  const summary = readSummary(buf.subarray(0, layout.summaryBytes))
  if (summary === undefined) return { damage: 'the change journal summary is damaged' }
  const ids = state.pending.map((p) => p.id)
  for (const changed of summary.changed) if (changed.at > state.offset) ids.push(changed.id)
  const anchored: CursorState = { ...state, lastLength: layout.anchorLength, lastCrc: layout.anchorCrc }
  const walked = walk(buf, layout.summaryBytes, summary.inFlight)
  return follow(lifecycle, layout, layout.summaryStart, anchored, walked, ids)
}

/**
 * The answer after `walked` (a walk of bytes that start at physical
 * `bufStart`): the ids it read, those still pending (and those resolved by
 * their writer's death, once more), and the cursor after them (naming
 * `state`'s last record when it read none).
 */
function follow(
  lifecycle: string,
  layout: JournalLayout,
  bufStart: number,
  state: CursorState,
  walked: Walk,
  before: readonly string[] = [],
): Followed {
  if (walked.damaged) return { damage: 'the change journal holds damaged records' }
  const ids = new Set([...before, ...walked.reported])
  const pending: Pending[] = []
  for (const entry of walked.pending) {
    // Still in flight: report it again; resolved by its writer's death: report it a last time.
    ids.add(entry.id)
    if (isAlive(identityOf(entry.writer))) pending.push(entry)
  }
  const moved = walked.lastLength > 0
  const cursor = encodeCursor({
    lifecycle,
    boot: bootId,
    offset: logicalOf(layout, bufStart + walked.end),
    lastLength: moved ? walked.lastLength : state.lastLength,
    lastCrc: moved ? walked.lastCrc : state.lastCrc,
    pending,
  })
  return { result: { ids: [...ids], cursor, rescan: false } }
}

/** The caller lists everything; what is in flight at this point must still be reported when it ends. */
async function rescan(
  handle: FileHandle,
  lifecycle: string,
  layout: JournalLayout,
  size: number,
  [reason, detail]: readonly [SessionRescanReason, string],
): Promise<JournalChanges> {
  const buf = await readAt(handle, 0, size)
  const inFlight = readSummary(buf.subarray(layout.summaryStart, layout.start))?.inFlight ?? []
  const walked = walk(buf, layout.start, inFlight, true)
  const pending = walked.pending.filter((entry) => isAlive(identityOf(entry.writer)))
  const atBase = walked.end === layout.start
  const cursor = encodeCursor({
    lifecycle,
    boot: bootId,
    offset: logicalOf(layout, walked.end),
    lastLength: atBase ? layout.anchorLength : walked.lastLength,
    lastCrc: atBase ? layout.anchorCrc : walked.lastCrc,
    pending,
  })
  return { ids: [], cursor, rescan: true, reason, detail }
}

/**
 * Opens the journal for reading: never through a symbolic link, and without
 * waiting (O_NONBLOCK) on a FIFO planted in its place, which is refused like
 * anything else that is not a regular file (`SESSION_PERSISTENCE_IO`).
 */
async function openJournal(path: string): Promise<FileHandle> {
  const handle = await fsp.open(path, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK)
  if ((await handle.stat()).isFile()) return handle
  await handle.close()
  throw persistenceError(
    'SESSION_PERSISTENCE_IO',
    `The change journal ${path} is not a regular file (a FIFO, device or directory); remove it: the next writer creates a new journal and followers rescan once.`,
    { details: { path } },
  )
}

/** The kernel's boot id: a cursor minted before a reboot may predate records lost with the page cache. */
function readBootId(): string {
  try {
    return readFileSync('/proc/sys/kernel/random/boot_id', 'utf8').trim()
  } catch {
    return 'unknown'
  }
}

/** A full check of the journal (for `verify`): whether a follower could read every record from the start. */
export async function checkJournal(root: string): Promise<{ readonly ok: boolean; readonly reason?: string; readonly records: number }> {
  const path = join(root, JOURNAL_FILE)
  let buf: Buffer
  try {
    const handle = await openJournal(path)
    try {
      buf = await handle.readFile()
    } finally {
      await handle.close()
    }
  } catch (error) {
    if (isErrno(error, 'ENOENT')) return { ok: false, reason: 'the change journal is missing (readers rescan once)', records: 0 }
    return { ok: false, reason: `the change journal cannot be read (${(error as Error).message})`, records: 0 }
  }
  const layout = decodeJournalHeader(buf) === undefined ? undefined : decodeLayout(buf)
  if (layout === undefined || layout.start > buf.length)
    return { ok: false, reason: 'the change journal header is damaged (readers rescan once)', records: 0 }
  const summary = readSummary(buf.subarray(layout.summaryStart, layout.start))
  if (summary === undefined) return { ok: false, reason: 'the change journal summary is damaged (readers rescan once)', records: 0 }
  let records = summary.changed.length + summary.inFlight.length
  // Seals left by compactions that failed are read past, as followers do once the journal is unsealed.
  for (let at = layout.start; ; ) {
    const walked = walk(buf, at, [])
    records += walked.reported.length + (walked.sealed ? 1 : 0)
    if (walked.damaged)
      return { ok: false, reason: `the change journal holds damaged records at byte ${walked.end} (readers rescan once)`, records }
    if (!walked.sealed) return { ok: true, records }
    at = walked.end
  }
}
