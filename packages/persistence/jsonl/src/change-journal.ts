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
import { crc32 } from 'node:zlib'
import { persistenceError } from './errors.js'
import { isErrno, randomHex, tempSibling } from './fs-io.js'

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
 * Layout: a 32-byte header (`DSHJ`, version u32, 16-byte lifecycle id, CRC32
 * of the 24 bytes before, 4 zero bytes), then records: `DSHR`, payload
 * length u32, CRC32 of the payload u32, payload (UTF-8 JSON
 * `{"k":"b"|"e","id":…,"op":…,"w":[host,pid,start]}`), little-endian.
 */
export const JOURNAL_FILE = 'changes.journal'

const HEADER_MAGIC = 0x4a485344 // 'DSHJ'
const RECORD_MAGIC = 0x52485344 // 'DSHR'
const RECORD_MAGIC_BYTES = Buffer.from('DSHR', 'latin1')
const HEADER_BYTES = 32
const RECORD_HEAD = 12
const JOURNAL_VERSION = 1
const MAX_PAYLOAD = 64 * 1024

/** The writer identity in records: host, pid and Linux process start time (so a reused pid is not mistaken for the writer). */
export type WriterIdentity = readonly [host: string, pid: number, start: string | null]

interface JournalRecord {
  readonly kind: 'b' | 'e'
  readonly id: string
  readonly op: string
  readonly writer: WriterIdentity
}

/** An `end` record not yet written. */
interface HeldEnd {
  readonly id: string
  readonly op: string
}

interface Pending {
  readonly op: string
  readonly id: string
  readonly writer: WriterIdentity
}

/** What a cursor says: where the reader stopped and what was in flight there. */
interface CursorState {
  /** The journal lifecycle, `none` (no journal), or `damaged:<ino>` (an unreadable header). */
  readonly lifecycle: string
  readonly boot: string
  /** Offset after the last record read (for `damaged`, the size seen). */
  readonly offset: number
  /** Length and CRC of the frame that ends at `offset` (0, 0 right after the header). */
  readonly lastLength: number
  readonly lastCrc: number
  readonly pending: readonly Pending[]
}

export interface JournalChanges {
  readonly ids: readonly string[]
  readonly cursor: string
  readonly rescan: boolean
  /** Why a rescan is needed (for `verify` and logs). */
  readonly reason?: string
}

const CURSOR_PREFIX = 'j1.'
/** This process's identity in records: computed at the first write or liveness check (a follower that finds nothing in flight loads no `node:os` and reads no /proc file). */
let ownIdentityValue: WriterIdentity | undefined
function ownIdentity(): WriterIdentity {
  ownIdentityValue ??= [process.getBuiltinModule('node:os').hostname(), process.pid, processStart(process.pid)]
  return ownIdentityValue
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

  /** Opens (creating if needed) the root's journal now, so readers over a new root can follow it from its first change. */
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
      const record = encodeRecord({ kind: 'b', id, op, writer: ownIdentity() })
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
      const headerOk = readFullySync(fd, header, 0) === HEADER_BYTES && decodeHeader(header) !== undefined
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
  const header = Buffer.alloc(HEADER_BYTES)
  header.writeUInt32LE(HEADER_MAGIC, 0)
  header.writeUInt32LE(JOURNAL_VERSION, 4)
  header.write(randomHex(16), 8, 'hex')
  header.writeUInt32LE(crc32(header.subarray(0, 24)), 24)
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

function decodeHeader(buf: Buffer): string | undefined {
  if (buf.length < HEADER_BYTES || buf.readUInt32LE(0) !== HEADER_MAGIC || buf.readUInt32LE(4) !== JOURNAL_VERSION) return undefined
  if (crc32(buf.subarray(0, 24)) !== buf.readUInt32LE(24)) return undefined
  return buf.toString('hex', 8, 24)
}

function encodeEnd({ id, op }: HeldEnd): Buffer {
  return encodeRecord({ kind: 'e', id, op, writer: ownIdentity() })
}

function encodeRecord(record: JournalRecord): Buffer {
  const payload = Buffer.from(JSON.stringify({ k: record.kind, id: record.id, op: record.op, w: record.writer }), 'utf8')
  if (payload.length > MAX_PAYLOAD) throw new RangeError('a change journal record is too large')
  const frame = Buffer.allocUnsafe(RECORD_HEAD + payload.length)
  frame.writeUInt32LE(RECORD_MAGIC, 0)
  frame.writeUInt32LE(payload.length, 4)
  frame.writeUInt32LE(crc32(payload), 8)
  payload.copy(frame, RECORD_HEAD)
  return frame
}

type FrameRead =
  | { readonly status: 'record'; readonly record: JournalRecord; readonly end: number; readonly crc: number }
  | { readonly status: 'incomplete' }
  | { readonly status: 'damaged' }

function readFrame(buf: Buffer, at: number): FrameRead {
  if (at + RECORD_HEAD > buf.length) return { status: 'incomplete' }
  if (buf.readUInt32LE(at) !== RECORD_MAGIC) return { status: 'damaged' }
  const length = buf.readUInt32LE(at + 4)
  if (length === 0 || length > MAX_PAYLOAD) return { status: 'damaged' }
  const end = at + RECORD_HEAD + length
  if (end > buf.length) return { status: 'incomplete' }
  const crc = buf.readUInt32LE(at + 8)
  if (crc32(buf.subarray(at + RECORD_HEAD, end)) !== crc) return { status: 'damaged' }
  const record = parsePayload(buf.subarray(at + RECORD_HEAD, end))
  return record === undefined ? { status: 'damaged' } : { status: 'record', record, end, crc }
}

function parsePayload(payload: Buffer): JournalRecord | undefined {
  try {
    const raw = JSON.parse(payload.toString('utf8')) as { k?: unknown; id?: unknown; op?: unknown; w?: unknown }
    const w = raw.w as unknown[]
    if ((raw.k !== 'b' && raw.k !== 'e') || typeof raw.id !== 'string' || typeof raw.op !== 'string' || !Array.isArray(w) || w.length !== 3)
      return undefined
    if (typeof w[0] !== 'string' || typeof w[1] !== 'number' || (w[2] !== null && typeof w[2] !== 'string')) return undefined
    return { kind: raw.k, id: raw.id, op: raw.op, writer: [w[0], w[1], w[2]] }
  } catch {
    return undefined
  }
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
    // No journal now and none when the cursor was minted: no writer wrote since (writers create it before any change).
    if (state !== undefined && state.lifecycle === 'none' && state.boot === bootId) return { ids: [], cursor, rescan: false }
    return { ids: [], cursor, rescan: true, reason: since === undefined ? 'no cursor' : 'the change journal is missing' }
  }
  try {
    const stats = await handle.stat()
    const size = stats.size
    const header = await readRange(handle, 0, HEADER_BYTES)
    const lifecycle = decodeHeader(header)
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
          reason = 'the change journal no longer holds the record the cursor names'
      }
      if (reason === undefined) {
        const walked = walk(buf, state.lastLength, state.pending)
        if (!walked.damaged) {
          const ids = new Set(walked.reported)
          const pending: Pending[] = []
          for (const entry of walked.pending) {
            // Still in flight: report it again; resolved by its writer's death: report it a last time.
            ids.add(entry.id)
            if (writerAlive(entry.writer)) pending.push(entry)
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
    // Rescan: the caller lists everything now; what is in flight now must still be reported when it ends.
    const buf = await readRange(handle, 0, size)
    const walked = walk(buf, HEADER_BYTES, [], true)
    const pending = walked.pending.filter((entry) => writerAlive(entry.writer))
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

interface Walk {
  readonly reported: string[]
  readonly pending: Pending[]
  /** Offset (in the buffer) after the last complete record. */
  readonly end: number
  readonly lastLength: number
  readonly lastCrc: number
  readonly damaged: boolean
}

/**
 * Reads records from `start` to the last complete one. `resync` skips damaged
 * regions (to the next frame that checks out) instead of stopping at them.
 */
function walk(buf: Buffer, start: number, pendingIn: readonly Pending[], resync = false): Walk {
  const reported: string[] = []
  const pending = new Map(pendingIn.map((p) => [p.op, p]))
  let at = start
  let lastLength = 0
  let lastCrc = 0
  for (;;) {
    const frame = readFrame(buf, at)
    if (frame.status === 'incomplete') break
    if (frame.status === 'damaged') {
      if (!resync) return { reported, pending: [...pending.values()], end: at, lastLength, lastCrc, damaged: true }
      // Skip to the next frame that may check out; damage at the very end is skipped whole
      // (writers append after it), so a damaged tail costs one rescan, not one per call.
      const next = buf.indexOf(RECORD_MAGIC_BYTES, at + 1)
      at = next === -1 ? buf.length : next
      lastLength = 0
      lastCrc = 0
      if (next === -1) break
      continue
    }
    const { record } = frame
    reported.push(record.id)
    if (record.kind === 'b') pending.set(record.op, { op: record.op, id: record.id, writer: record.writer })
    else pending.delete(record.op)
    lastLength = frame.end - at
    lastCrc = frame.crc
    at = frame.end
  }
  return { reported, pending: [...pending.values()], end: at, lastLength, lastCrc, damaged: false }
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

function encodeCursor(state: CursorState): string {
  const body = JSON.stringify([
    state.lifecycle,
    state.boot,
    state.offset,
    state.lastLength,
    state.lastCrc,
    state.pending.map((p) => [p.op, p.id, ...p.writer]),
  ])
  return CURSOR_PREFIX + Buffer.from(body, 'utf8').toString('base64url')
}

function decodeCursor(cursor: string | undefined): CursorState | undefined {
  if (typeof cursor !== 'string' || !cursor.startsWith(CURSOR_PREFIX)) return undefined
  try {
    const raw = JSON.parse(Buffer.from(cursor.slice(CURSOR_PREFIX.length), 'base64url').toString('utf8')) as unknown[]
    if (!Array.isArray(raw)) return undefined
    const [lifecycle, boot, offset, lastLength, lastCrc, pending] = raw
    if (
      typeof lifecycle !== 'string' ||
      typeof boot !== 'string' ||
      !isCount(offset) ||
      !isCount(lastLength) ||
      !isCount(lastCrc) ||
      !Array.isArray(pending)
    )
      return undefined
    const followable = lifecycle !== 'none' && !lifecycle.startsWith('damaged:')
    if (lastLength > offset || (followable && offset - lastLength < HEADER_BYTES)) return undefined
    const entries: Pending[] = []
    for (const entry of pending as unknown[]) {
      if (!Array.isArray(entry) || entry.length !== 5) return undefined
      const [op, id, host, pid, start] = entry as unknown[]
      if (
        typeof op !== 'string' ||
        typeof id !== 'string' ||
        typeof host !== 'string' ||
        typeof pid !== 'number' ||
        (start !== null && typeof start !== 'string')
      )
        return undefined
      entries.push({ op, id, writer: [host, pid, start] })
    }
    return { lifecycle, boot, offset, lastLength, lastCrc, pending: entries }
  } catch {
    return undefined
  }
}

function isCount(value: unknown): value is number {
  return typeof value === 'number' && Number.isSafeInteger(value) && value >= 0
}

/** Whether the writer of a record may still be running (another host: assumed alive). */
function writerAlive([host, pid, start]: WriterIdentity): boolean {
  const own = ownIdentity()
  if (host !== own[0]) return true
  if (pid === process.pid) return start === own[2]
  try {
    process.kill(pid, 0)
  } catch (error) {
    if (isErrno(error, 'ESRCH')) return false
  }
  if (start !== null) {
    const now = processStart(pid)
    if (now !== null && now !== start) return false
  }
  return true
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

/** Process start time from /proc (Linux); null where unavailable. */
function processStart(pid: number): string | null {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8')
    return stat.slice(stat.lastIndexOf(')') + 2).split(' ')[19] ?? null
  } catch {
    return null
  }
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
  if (decodeHeader(buf.subarray(0, HEADER_BYTES)) === undefined)
    return { ok: false, reason: 'the change journal header is damaged (readers rescan once)', records: 0 }
  const walked = walk(buf, HEADER_BYTES, [])
  const records = walked.reported.length
  if (walked.damaged)
    return { ok: false, reason: `the change journal holds damaged records at byte ${walked.end} (readers rescan once)`, records }
  return { ok: true, records }
}
