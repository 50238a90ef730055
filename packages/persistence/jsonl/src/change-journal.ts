import {
  closeSync,
  constants,
  promises as fsp,
  fstatSync,
  fsyncSync,
  linkSync,
  openSync,
  readFileSync,
  readSync,
  renameSync,
  statSync,
  unlinkSync,
  writeSync,
} from 'node:fs'
import type { FileHandle } from 'node:fs/promises'
import { join } from 'node:path'
import { persistenceError } from '@dsh/session-persistence/backend'
import { isErrno, randomHex, tempSibling } from './fs-io.js'
import {
  decodeCursor,
  decodeJournalHeader,
  encodeCursor,
  encodeJournalHeader,
  encodeRecord,
  HEADER_BYTES,
  identityOf,
  type Pending,
  readFrame,
  recordIdentity,
  walk,
} from './journal-records.js'
import { isAlive } from './process-identity.js'

/**
 * The root's change journal: the JSONL backend's change feed.
 *
 * Invariants:
 * - Every writer appends a `begin` record naming the session before it
 *   changes that session's log (create, append, truncate, repair, delete) and
 *   an `end` record after (success or failure). Records are appended with one
 *   `write` on an `O_APPEND` descriptor, so concurrent writers never
 *   interleave; after each write the writer checks that the journal path
 *   still names the file it wrote to, and writes the record again to the
 *   current journal if it does not (a deleted or replaced journal).
 * - `end` records are held until the next turn of the event loop (or the
 *   next record written). A `begin` for a session whose `end` is still held
 *   writes nothing: it drops that `end` and continues its operation, once
 *   the path is checked to still name the file holding the operation's
 *   `begin` (else it writes a new `begin` as above). So back-to-back changes
 *   of one session (a burst of appends) are one operation, one `begin` before
 *   the first change and one `end` after the last: every change still lies
 *   between a written `begin` and its `end`.
 * - A reader reports an id when it reads its `begin`, keeps it pending (and
 *   reports it again on every call) until it reads the matching `end` or finds
 *   the writer process dead, and then reports it once more. So every change
 *   that became durable is reported by some call made after it became
 *   durable, whatever point a writer crashed at.
 * - Anything the reader cannot vouch for — no journal, a damaged header, a
 *   damaged or truncated record region, another journal lifecycle (deleted
 *   and re-created), a cursor minted before the machine rebooted (records not
 *   yet on disk may have been lost with the page cache) — answers
 *   `rescan: true` once, with a cursor the reader can continue from.
 *
 * The journal is never fsynced: a process crash keeps everything written (the
 * page cache survives it), and a power loss is caught by the boot id in the
 * cursor. It only grows; deleting it costs every reader one rescan.
 *
 * Its bytes and the cursors are `journal-records.ts`'s. A record names its
 * writer process (`process-identity.ts`: host, pid and start time), so a pid
 * reused by a later process never keeps a dead writer's change pending.
 */
export const JOURNAL_FILE = 'changes.journal'

/** An `end` record not yet written. */
interface HeldEnd {
  readonly id: string
  readonly op: string
}

export interface JournalChanges {
  readonly ids: readonly string[]
  readonly cursor: string
  readonly rescan: boolean
  /** Why a rescan is needed (for `verify` and logs). */
  readonly reason?: string
}

const bootId = readBootId()

/** The open writers of each journal in this process: a reader here first writes their held `end` records (exact in-process answers). */
const writersByPath = new Map<string, Set<JournalWriter>>()

/** The writer's side: appends begin/end records around every change of a log. */
export class JournalWriter {
  readonly path: string
  #fd: number | undefined
  #ino = -1
  #counter = 0
  readonly #instance = randomHex(6)
  /**
   * `end` records not yet written: they ride along with the next `begin`, are
   * taken back by a `begin` of the same session (its operation continues),
   * or are written on the next turn of the event loop. Until then a follower
   * keeps reporting the id (over-reporting, never missing); if the process
   * dies first, its death resolves them.
   */
  #ends: HeldEnd[] = []
  #flushScheduled = false
  #closed = false

  /** Opens (creating if needed) the root's journal at once, so readers over a new root can follow it from its first change. */
  constructor(root: string) {
    this.path = join(root, JOURNAL_FILE)
    this.#open()
    let writers = writersByPath.get(this.path)
    if (writers === undefined) {
      writers = new Set()
      writersByPath.set(this.path, writers)
    }
    writers.add(this)
  }

  /** Records the intent to change `id`; returns the operation token for `end`. Throws `SESSION_PERSISTENCE_IO` (before anything changed). */
  begin(id: string): string {
    try {
      // A change right after another of the same session continues its operation (see the invariants).
      const held = this.#ends.findIndex((end) => end.id === id)
      if (held !== -1 && this.#stillCurrent()) return this.#ends.splice(held, 1)[0]!.op
      const op = `${this.#instance}.${(this.#counter++).toString(36)}`
      const ends = this.#ends
      this.#ends = []
      const record = encodeRecord({ kind: 'b', id, op, writer: recordIdentity() })
      this.#append(ends.length === 0 ? record : Buffer.concat([...ends.map(encodeEnd), record]))
      return op
    } catch (error) {
      throw persistenceError(
        'SESSION_PERSISTENCE_IO',
        `Could not record a change of session ${JSON.stringify(id).slice(0, 80)} in the change journal ${this.path} (${(error as Error).message}); nothing was changed.`,
        { cause: error },
      )
    }
  }

  /**
   * Records that the operation ended (committed or not). Never throws: the
   * change is already durable, and a reader keeps the id pending (reporting
   * it) until this record or the writer's death.
   */
  end(id: string, op: string): void {
    this.#ends.push({ id, op })
    if (this.#flushScheduled) return
    this.#flushScheduled = true
    setImmediate(() => {
      this.#flushScheduled = false
      this.flush()
    })
  }

  /** Writes the `end` records still held. Never throws (see `end`). */
  flush(): void {
    if (this.#ends.length === 0 || this.#closed) return
    const ends = this.#ends
    this.#ends = []
    try {
      this.#append(Buffer.concat(ends.map(encodeEnd)))
    } catch {
      // Readers keep reporting the ids while this process lives, then once more.
    }
  }

  close(): void {
    this.flush()
    this.#closed = true
    const writers = writersByPath.get(this.path)
    writers?.delete(this)
    if (writers?.size === 0) writersByPath.delete(this.path)
    this.#closeFd()
  }

  #closeFd(): void {
    if (this.#fd !== undefined) closeSync(this.#fd)
    this.#fd = undefined
  }

  /** Appends whole frames with one write (concurrent writers never interleave within one `O_APPEND` write). */
  #append(frame: Buffer): void {
    for (let attempt = 0; attempt < 4; attempt++) {
      writeAll(this.#open(), frame)
      if (this.#stillCurrent()) return
      // The journal was deleted or replaced while we held it: write to the current one too.
      this.#closeFd()
    }
    throw new Error('the change journal keeps being replaced')
  }

  /** Whether the journal path still names the file this writer holds open (not deleted, moved or replaced). */
  #stillCurrent(): boolean {
    if (this.#fd === undefined) return false
    const stats = statSync(this.path, { throwIfNoEntry: false })
    return stats !== undefined && stats.ino === this.#ino
  }

  #open(): number {
    if (this.#fd !== undefined) return this.#fd
    for (let attempt = 0; attempt < 4; attempt++) {
      let fd: number
      try {
        fd = openSync(this.path, constants.O_RDWR | constants.O_APPEND | constants.O_NOFOLLOW)
      } catch (error) {
        if (!isErrno(error, 'ENOENT')) throw error
        createJournal(this.path, false)
        continue
      }
      const header = Buffer.alloc(HEADER_BYTES)
      const headerOk = readFullySync(fd, header, 0) === HEADER_BYTES && decodeJournalHeader(header) !== undefined
      if (!headerOk) {
        // A damaged journal header: start a new lifecycle (readers rescan once).
        closeSync(fd)
        createJournal(this.path, true)
        continue
      }
      this.#fd = fd
      this.#ino = fstatSync(fd).ino
      return fd
    }
    throw new Error('could not open the change journal')
  }
}

/** Publishes a new, empty journal with a fresh lifecycle (`replace`: over a damaged one). */
function createJournal(path: string, replace: boolean): void {
  const header = encodeJournalHeader(randomHex(16))
  const temp = tempSibling(path)
  const fd = openSync(temp, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL, 0o600)
  try {
    writeAll(fd, header)
    fsyncSync(fd)
  } finally {
    closeSync(fd)
  }
  try {
    if (replace) renameSync(temp, path)
    else linkSync(temp, path)
  } catch (error) {
    if (!isErrno(error, 'EEXIST')) throw error
  } finally {
    try {
      unlinkSync(temp)
    } catch {
      // renamed away
    }
  }
}

function encodeEnd({ id, op }: HeldEnd): Buffer {
  return encodeRecord({ kind: 'e', id, op, writer: recordIdentity() })
}

/** The reader's side: `changes(since)` over the journal of `root`. Reads the journal only, never a log. */
export async function readJournalChanges(root: string, since: string | undefined): Promise<JournalChanges> {
  const path = join(root, JOURNAL_FILE)
  for (const writer of writersByPath.get(path) ?? []) writer.flush()
  const state = decodeCursor(since)
  let handle: FileHandle
  try {
    handle = await fsp.open(path, constants.O_RDONLY | constants.O_NOFOLLOW)
  } catch (error) {
    if (!isErrno(error, 'ENOENT'))
      throw persistenceError('SESSION_PERSISTENCE_IO', `Could not read the change journal ${path}: ${(error as Error).message}.`, {
        cause: error,
      })
    const cursor = encodeCursor({ lifecycle: 'none', boot: bootId, offset: 0, lastLength: 0, lastCrc: 0, pending: [] })
    // No journal, and none when the cursor was minted: no writer wrote since (writers create it before any change).
    if (state !== undefined && state.lifecycle === 'none' && state.boot === bootId) return { ids: [], cursor, rescan: false }
    return { ids: [], cursor, rescan: true, reason: since === undefined ? 'no cursor' : 'the change journal is missing' }
  }
  try {
    const stats = await handle.stat()
    const size = stats.size
    const header = await readRange(handle, 0, HEADER_BYTES)
    const lifecycle = decodeJournalHeader(header)
    if (lifecycle === undefined) {
      // A damaged header: nothing can be followed, but an unchanged file means no writer wrote since.
      const mark = `damaged:${stats.ino}`
      const cursor = encodeCursor({ lifecycle: mark, boot: bootId, offset: size, lastLength: 0, lastCrc: 0, pending: [] })
      if (state !== undefined && state.lifecycle === mark && state.boot === bootId && state.offset === size)
        return { ids: [], cursor, rescan: false }
      return { ids: [], cursor, rescan: true, reason: 'the change journal header is damaged' }
    }
    let reason: string | undefined
    if (state === undefined) reason = since === undefined ? 'no cursor' : 'the cursor is not a change journal cursor'
    else if (state.lifecycle !== lifecycle) reason = 'the change journal was re-created since the cursor'
    else if (state.boot !== bootId) reason = 'the machine restarted since the cursor'
    else if (state.offset > size) reason = 'the change journal was truncated'
    if (reason === undefined && state !== undefined) {
      const from = state.offset - state.lastLength
      const buf = await readRange(handle, from, size - from)
      if (state.lastLength > 0) {
        const last = readFrame(buf, 0)
        if (last.status !== 'record' || last.end !== state.lastLength || last.crc !== state.lastCrc)
          reason = 'the change journal does not hold the record the cursor names'
      }
      if (reason === undefined) {
        const walked = walk(buf, state.lastLength, state.pending)
        if (!walked.damaged) {
          const ids = new Set(walked.reported)
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
            offset: from + walked.end,
            lastLength: moved ? walked.lastLength : state.lastLength,
            lastCrc: moved ? walked.lastCrc : state.lastCrc,
            pending,
          })
          return { ids: [...ids], cursor, rescan: false }
        }
        reason = 'the change journal holds damaged records'
      }
    }
    // Rescan: the caller lists everything; what is in flight at this point must still be reported when it ends.
    const buf = await readRange(handle, 0, size)
    const walked = walk(buf, HEADER_BYTES, [], true)
    const pending = walked.pending.filter((entry) => isAlive(identityOf(entry.writer)))
    const cursor = encodeCursor({
      lifecycle,
      boot: bootId,
      offset: walked.end,
      lastLength: walked.lastLength,
      lastCrc: walked.lastCrc,
      pending,
    })
    return { ids: [], cursor, rescan: true, reason: reason ?? 'no cursor' }
  } finally {
    await handle.close()
  }
}

async function readRange(handle: FileHandle, position: number, length: number): Promise<Buffer> {
  const out = Buffer.allocUnsafe(Math.max(0, length))
  let done = 0
  while (done < length) {
    const { bytesRead } = await handle.read(out, done, length - done, position + done)
    if (bytesRead === 0) break
    done += bytesRead
  }
  return out.subarray(0, done)
}

function writeAll(fd: number, data: Buffer): void {
  let done = 0
  while (done < data.length) done += writeSync(fd, data, done, data.length - done)
}

function readFullySync(fd: number, into: Buffer, position: number): number {
  let done = 0
  while (done < into.length) {
    const n = readSync(fd, into, done, into.length - done, position + done)
    if (n === 0) break
    done += n
  }
  return done
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
    buf = await fsp.readFile(path, { flag: constants.O_RDONLY | constants.O_NOFOLLOW })
  } catch (error) {
    if (isErrno(error, 'ENOENT')) return { ok: false, reason: 'the change journal is missing (readers rescan once)', records: 0 }
    return { ok: false, reason: `the change journal cannot be read (${(error as Error).message})`, records: 0 }
  }
  if (decodeJournalHeader(buf.subarray(0, HEADER_BYTES)) === undefined)
    return { ok: false, reason: 'the change journal header is damaged (readers rescan once)', records: 0 }
  const walked = walk(buf, HEADER_BYTES, [])
  const records = walked.reported.length
  if (walked.damaged)
    return { ok: false, reason: `the change journal holds damaged records at byte ${walked.end} (readers rescan once)`, records }
  return { ok: true, records }
}
