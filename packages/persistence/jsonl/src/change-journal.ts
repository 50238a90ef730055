import { closeSync, constants, fstatSync, openSync, statSync } from 'node:fs'
import { join } from 'node:path'
import { persistenceError } from '@dsh/session-persistence/backend'
import { awaitUnsealed, compactJournal, isSealed, publishJournal, readAtSync, writeAll } from './change-journal-compaction.js'
import { labelOf } from './errors.js'
import { isErrno, randomHex } from './fs-io.js'
import { decodeJournalHeader, decodeLayout, encodeRecord, HEADER_BYTES, MAX_BASE_FRAME, recordIdentity } from './journal-records.js'

/**
 * The root's change journal: the JSONL backend's change feed.
 *
 * Invariants:
 * - Every writer appends a `begin` record naming the session before it
 *   changes that session's log (create, append, truncate, repair, delete) and
 *   an `end` record after (success or failure). Records are appended with one
 *   `write` on an `O_APPEND` descriptor, so concurrent writers never
 *   interleave; after each write the writer checks that the journal path
 *   still names the file it wrote to and that the file is not sealed for a
 *   compaction, and writes the record again to the current journal if not (a
 *   deleted, replaced or compacted journal).
 * - `end` records are held until the next turn of the event loop (or the
 *   next record written). A `begin` for a session whose `end` is still held
 *   writes nothing: it drops that `end` and continues its operation, once
 *   the path is checked to still name the unsealed file holding the
 *   operation's `begin` (else it writes a new `begin` as above). So
 *   back-to-back changes of one session (a burst of appends) are one
 *   operation, one `begin` before the first change and one `end` after the
 *   last: every change still lies between a written `begin` and its `end`.
 * - A reader (`change-journal-reader.ts`) reports an id when it reads its
 *   `begin`, keeps it pending (and reports it again on every call) until it
 *   reads the matching `end` or finds the writer process dead, and then
 *   reports it once more. So every change that became durable is reported by
 *   some call made after it became durable, whatever point a writer crashed at.
 * - The journal is bounded: past `limit` bytes of verbatim records a writer
 *   compacts it behind a horizon (`change-journal-compaction.ts`); a cursor
 *   from before the horizon answers `rescan: true` (`behind-horizon`).
 * - Anything the reader cannot vouch for — no journal, a damaged header, a
 *   damaged or truncated record region, another journal lifecycle (deleted
 *   and re-created), a cursor minted before the machine rebooted (records not
 *   yet on disk may have been lost with the page cache) — answers
 *   `rescan: true` once, with a cursor the reader can continue from.
 *
 * The journal is never fsynced: a process crash keeps everything written (the
 * page cache survives it), and a power loss is caught by the boot id in the
 * cursor. Deleting it costs every reader one rescan.
 *
 * Its bytes and the cursors are `journal-records.ts`'s. A record names its
 * writer process (`process-identity.ts`: host, pid and start time), so a pid
 * reused by a later process never keeps a dead writer's change pending.
 */
export const JOURNAL_FILE = 'changes.journal'

/** Verbatim bytes of the change journal past which a writer compacts it (see `change-journal-compaction.ts`). */
export const DEFAULT_JOURNAL_LIMIT = 1024 * 1024

/** An `end` record not yet written. */
interface HeldEnd {
  readonly id: string
  readonly op: string
}

export interface JournalWriterOptions {
  /** Verbatim bytes past which this writer compacts the journal (default `DEFAULT_JOURNAL_LIMIT`). */
  readonly limit?: number
  /** Called after each compaction this writer made. */
  readonly onCompaction?: () => void
}

/** The open writers of each journal in this process: a reader here first writes their held `end` records (exact in-process answers). */
const writersByPath = new Map<string, Set<JournalWriter>>()

/** Writes the held `end` records of this process's writers of the journal at `path`. */
export function flushWriters(path: string): void {
  for (const writer of writersByPath.get(path) ?? []) writer.flush()
}

/** The writer's side: appends begin/end records around every change of a log. */
export class JournalWriter {
  readonly path: string
  readonly #limit: number
  readonly #onCompaction: (() => void) | undefined
  #fd: number | undefined
  #ino = -1
  /** Physical offset of the first verbatim record of the open journal (after a compacted one's summary). */
  #start = HEADER_BYTES
  /** Verbatim bytes from which a compaction is tried again after one failed or was not needed (another process compacting). */
  #retryAt = 0
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
  constructor(root: string, options: JournalWriterOptions = {}) {
    this.path = join(root, JOURNAL_FILE)
    this.#limit = options.limit ?? DEFAULT_JOURNAL_LIMIT
    this.#onCompaction = options.onCompaction
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
        `Could not record a change of session ${labelOf(id)} in the change journal ${this.path} (${(error as Error).message}); nothing was changed.`,
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

  /**
   * Compacts the journal now (whatever its size), unless another process is
   * compacting it; whether this call did. Never throws: a journal that could
   * not be compacted stays as it is. For tests and maintenance; writers
   * compact on their own past `limit`.
   */
  compact(): boolean {
    return this.#compact(0)
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
    for (let attempt = 0; attempt < 8; attempt++) {
      writeAll(this.#open(), frame)
      const stats = statSync(this.path, { throwIfNoEntry: false })
      if (stats?.ino === this.#ino) {
        if (!isSealed(stats.mode)) {
          const verbatim = stats.size - this.#start
          if (verbatim > Math.max(this.#limit, this.#retryAt) && !this.#compact(this.#limit)) this.#retryAt = verbatim + this.#limit / 4
          return
        }
        // Sealed by a compaction that may have read up to its seal before this write: wait for it, then write again.
        awaitUnsealed(this.path, this.#ino, this.#limit)
      }
      // The journal was deleted, replaced or compacted while we held it: write to the current one too.
      this.#closeFd()
    }
    throw new Error('the change journal keeps being replaced')
  }

  /**
   * Compacts past `limit` verbatim bytes; on success this process's writers
   * of the compacted file move to the new one. Their held operations are in
   * its summary (this process is alive), so they may continue there.
   */
  #compact(limit: number): boolean {
    let replaced: number | undefined
    try {
      replaced = compactJournal(this.path, limit)
    } catch {
      // Not compacted (and unsealed again).
    }
    if (replaced === undefined) return false
    this.#retryAt = 0
    this.#onCompaction?.()
    for (const writer of writersByPath.get(this.path) ?? [this]) if (writer.#ino === replaced) writer.#reopen()
    return true
  }

  #reopen(): void {
    this.#closeFd()
    try {
      this.#open()
    } catch {
      // Opened again at the next record.
    }
  }

  /** Whether the journal path still names the unsealed file this writer holds open (not deleted, moved, replaced or being compacted). */
  #stillCurrent(): boolean {
    if (this.#fd === undefined) return false
    const stats = statSync(this.path, { throwIfNoEntry: false })
    return stats !== undefined && stats.ino === this.#ino && !isSealed(stats.mode)
  }

  #open(): number {
    if (this.#fd !== undefined) return this.#fd
    for (let attempt = 0; attempt < 4; attempt++) {
      let fd: number
      try {
        // O_NONBLOCK: a FIFO in the journal's place is refused below instead of blocking the writer.
        fd = openSync(this.path, constants.O_RDWR | constants.O_APPEND | constants.O_NOFOLLOW | constants.O_NONBLOCK)
      } catch (error) {
        if (isErrno(error, 'ELOOP', 'EISDIR')) throw notAJournal(this.path, error)
        // EACCES: sealed by a compaction (mode 0400); the writer appends once it is replaced.
        if (isErrno(error, 'EACCES')) {
          const stats = statSync(this.path, { throwIfNoEntry: false })
          if (stats !== undefined && isSealed(stats.mode)) {
            awaitUnsealed(this.path, stats.ino, this.#limit)
            continue
          }
        }
        if (!isErrno(error, 'ENOENT')) throw error
        publishJournal(this.path, undefined)
        continue
      }
      if (!fstatSync(fd).isFile()) {
        closeSync(fd)
        throw notAJournal(this.path)
      }
      const head = readAtSync(fd, 0, HEADER_BYTES + MAX_BASE_FRAME)
      const layout = decodeJournalHeader(head) === undefined ? undefined : decodeLayout(head)
      if (layout === undefined) {
        // A damaged journal header (or base record): start a new lifecycle (readers rescan once).
        const { ino } = fstatSync(fd)
        closeSync(fd)
        publishJournal(this.path, ino)
        continue
      }
      this.#fd = fd
      this.#ino = fstatSync(fd).ino
      this.#start = layout.start
      this.#retryAt = 0
      return fd
    }
    throw new Error(`the change journal ${this.path} kept being replaced while it was opened (other writers compacting it); retry`)
  }
}

/** A symbolic link, directory or other non-regular file where the journal should be: never followed, never replaced by a writer. */
function notAJournal(path: string, cause?: unknown): Error {
  return new Error(
    `${path} is not a regular file (a symbolic link, directory or FIFO); the change journal is never followed out of the root: remove it, and the next writer creates a new journal (followers rescan once)`,
    cause === undefined ? {} : { cause },
  )
}

function encodeEnd({ id, op }: HeldEnd): Buffer {
  return encodeRecord({ kind: 'e', id, op, writer: recordIdentity() })
}
