import { crc32 } from 'node:zlib'
import { ownIdentity, type ProcessIdentity } from './process-identity.js'

/**
 * The change journal's bytes (see `change-journal.ts` for what they mean),
 * little-endian:
 *
 * - a 32-byte header: `DSHJ`, version u32 (2), 16-byte lifecycle id, flags
 *   u32 (bit 0: compacted), CRC32 of the 28 bytes before;
 * - in a compacted journal, a **base** record, then the **summary**: one
 *   record per session changed between the horizon and the base (`s`: the id
 *   and the logical offset after its last change there) and one per operation
 *   in flight at the base (`o`: like a `begin`);
 * - the **verbatim** records: `b` (begin) and `e` (end), and in a sealed
 *   journal (one being compacted) an `x` seal.
 *
 * Every record is framed: `DSHR`, payload length u32, CRC32 of the payload
 * u32, payload (UTF-8 JSON, `{"k":…}`). Offsets in cursors and in the base
 * and summary are **logical**: a journal that was never compacted has
 * logical = physical offsets; a compacted one maps the logical `base` to the
 * physical start of its verbatim records, so offsets keep growing across
 * compactions and a cursor stays meaningful after one. Pure encoding and
 * decoding: no I/O.
 */

const HEADER_MAGIC = 0x4a485344 // 'DSHJ'
const RECORD_MAGIC = 0x52485344 // 'DSHR'
export const RECORD_MAGIC_BYTES = Buffer.from('DSHR', 'latin1')
export const HEADER_BYTES = 32
export const RECORD_HEAD = 12
const JOURNAL_VERSION = 2
const MAX_PAYLOAD = 64 * 1024
/** The largest base record (five 16-digit numbers and the keys): a reader of a journal's start reads this much after the header. */
export const MAX_BASE_FRAME = 160

/** The writer identity in records: host, pid and Linux process start time (so a reused pid is not mistaken for the writer). */
export type WriterIdentity = readonly [host: string, pid: number, start: string | null]

/** This process in records (`ownIdentity`, computed at the first record written). */
export function recordIdentity(): WriterIdentity {
  const { host, pid, start } = ownIdentity()
  return [host, pid, start]
}

/** The process a record's writer field names. */
export function identityOf([host, pid, start]: WriterIdentity): ProcessIdentity {
  return { host, pid, start }
}

const COMPACTED = 1

/** A journal header of lifecycle `lifecycle` (32 hex digits); `compacted`: a base record and a summary follow. */
export function encodeJournalHeader(lifecycle: string, compacted = false): Buffer {
  const header = Buffer.alloc(HEADER_BYTES)
  header.writeUInt32LE(HEADER_MAGIC, 0)
  header.writeUInt32LE(JOURNAL_VERSION, 4)
  header.write(lifecycle, 8, 'hex')
  header.writeUInt32LE(compacted ? COMPACTED : 0, 24)
  header.writeUInt32LE(crc32(header.subarray(0, 28)), 28)
  return header
}

/** A change record: `b` begin, `e` end, `o` an operation in flight at a compaction's base, `x` a seal (`op` names the compaction). */
export interface ChangeRecord {
  readonly kind: 'b' | 'e' | 'o' | 'x'
  readonly id: string
  readonly op: string
  readonly writer: WriterIdentity
}

/** A summary record: session `id` changed last before logical offset `at`. */
export interface SummaryRecord {
  readonly kind: 's'
  readonly id: string
  readonly at: number
}

/** Where a compacted journal's records stand (its base record). */
export interface JournalBase {
  /** Logical offset of the horizon: a cursor before it cannot be followed. */
  readonly horizon: number
  /** Logical offset of the first verbatim record (the end of the seal the compaction read up to). */
  readonly base: number
  /** Length and CRC of the record that ended at `base` (the seal): a cursor at `base` names it. */
  readonly anchorLength: number
  readonly anchorCrc: number
  /** Bytes of summary records after the base record. */
  readonly summaryBytes: number
}

export type JournalRecord = ChangeRecord | SummaryRecord | ({ readonly kind: 'h' } & JournalBase)

export interface Pending {
  readonly op: string
  readonly id: string
  readonly writer: WriterIdentity
}

/** What a cursor says: where the reader stopped and what was in flight there. */
export interface CursorState {
  /** The journal lifecycle, `none` (no journal), or `damaged:<ino>` (an unreadable header). */
  readonly lifecycle: string
  readonly boot: string
  /** Logical offset after the last record read (for `damaged`, the size seen). */
  readonly offset: number
  /** Length and CRC of the frame that ends at `offset` (0, 0 right after the header). */
  readonly lastLength: number
  readonly lastCrc: number
  readonly pending: readonly Pending[]
}

export const CURSOR_PREFIX = 'j2.'

/** The lifecycle a journal header names; `undefined` when it is damaged or of another version. */
export function decodeJournalHeader(buf: Buffer): string | undefined {
  if (buf.length < HEADER_BYTES || buf.readUInt32LE(0) !== HEADER_MAGIC || buf.readUInt32LE(4) !== JOURNAL_VERSION) return undefined
  if (crc32(buf.subarray(0, 28)) !== buf.readUInt32LE(28)) return undefined
  return buf.toString('hex', 8, 24)
}

function frame(payload: Buffer): Buffer {
  if (payload.length > MAX_PAYLOAD) throw new RangeError('a change journal record is too large')
  const out = Buffer.allocUnsafe(RECORD_HEAD + payload.length)
  out.writeUInt32LE(RECORD_MAGIC, 0)
  out.writeUInt32LE(payload.length, 4)
  out.writeUInt32LE(crc32(payload), 8)
  payload.copy(out, RECORD_HEAD)
  return out
}

export function encodeRecord(record: JournalRecord): Buffer {
  let json: string
  if (record.kind === 's') json = JSON.stringify({ k: 's', id: record.id, a: record.at })
  else if (record.kind === 'h')
    json = JSON.stringify({
      k: 'h',
      h: record.horizon,
      p: record.base,
      l: record.anchorLength,
      c: record.anchorCrc,
      n: record.summaryBytes,
    })
  else json = JSON.stringify({ k: record.kind, id: record.id, op: record.op, w: record.writer })
  return frame(Buffer.from(json, 'utf8'))
}

export type FrameRead =
  | { readonly status: 'record'; readonly record: JournalRecord; readonly end: number; readonly crc: number }
  | { readonly status: 'incomplete' }
  | { readonly status: 'damaged' }

export function readFrame(buf: Buffer, at: number): FrameRead {
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
    const raw = JSON.parse(payload.toString('utf8')) as Record<string, unknown>
    const k = raw.k
    if (k === 's') return typeof raw.id === 'string' && isCount(raw.a) ? { kind: 's', id: raw.id, at: raw.a } : undefined
    if (k === 'h') {
      const { h, p, l, c, n } = raw
      if (!isCount(h) || !isCount(p) || !isCount(l) || !isCount(c) || !isCount(n) || h > p || p - l < HEADER_BYTES) return undefined
      return { kind: 'h', horizon: h, base: p, anchorLength: l, anchorCrc: c, summaryBytes: n }
    }
    const w = raw.w as unknown[]
    if ((k !== 'b' && k !== 'e' && k !== 'o' && k !== 'x') || typeof raw.id !== 'string' || typeof raw.op !== 'string') return undefined
    if (
      !Array.isArray(w) ||
      w.length !== 3 ||
      typeof w[0] !== 'string' ||
      typeof w[1] !== 'number' ||
      (w[2] !== null && typeof w[2] !== 'string')
    )
      return undefined
    return { kind: k, id: raw.id, op: raw.op, writer: [w[0], w[1], w[2]] }
  } catch {
    return undefined
  }
}

/**
 * Where a journal's records are, read from its first bytes (at least
 * `HEADER_BYTES + MAX_BASE_FRAME` of them, or the whole file when shorter;
 * the header checked by `decodeJournalHeader`): the verbatim records start at
 * physical `start`, which is logical `base`. A journal never compacted has
 * its verbatim records right after the header (horizon = base = start = 32).
 * `undefined`: a compacted journal whose base record is damaged.
 */
export interface JournalLayout extends JournalBase {
  /** Physical offset of the first summary record (after the base record). */
  readonly summaryStart: number
  /** Physical offset of the first verbatim record. */
  readonly start: number
}

export function decodeLayout(head: Buffer): JournalLayout | undefined {
  if ((head.readUInt32LE(24) & COMPACTED) === 0)
    return {
      horizon: HEADER_BYTES,
      base: HEADER_BYTES,
      anchorLength: 0,
      anchorCrc: 0,
      summaryBytes: 0,
      summaryStart: HEADER_BYTES,
      start: HEADER_BYTES,
    }
  const first = readFrame(head, HEADER_BYTES)
  if (first.status !== 'record' || first.record.kind !== 'h') return undefined
  const { horizon, base, anchorLength, anchorCrc, summaryBytes } = first.record
  return { horizon, base, anchorLength, anchorCrc, summaryBytes, summaryStart: first.end, start: first.end + summaryBytes }
}

/** The logical offset of physical offset `physical` of a verbatim record (see `JournalLayout`). */
export function logicalOf(layout: JournalLayout, physical: number): number {
  return physical - layout.start + layout.base
}

/** The physical offset of logical offset `logical` (at or after `layout.base`). */
export function physicalOf(layout: JournalLayout, logical: number): number {
  return logical - layout.base + layout.start
}

/** A compacted journal's summary: the sessions changed after each logical offset, and the operations in flight at its base. */
export interface Summary {
  readonly changed: readonly SummaryRecord[]
  readonly inFlight: readonly Pending[]
}

/** Reads the summary records of `buf` (which starts at the summary); `undefined` when one is damaged or of another kind. */
export function readSummary(buf: Buffer): Summary | undefined {
  const changed: SummaryRecord[] = []
  const inFlight: Pending[] = []
  for (let at = 0; at < buf.length; ) {
    const read = readFrame(buf, at)
    if (read.status !== 'record') return undefined
    const { record } = read
    if (record.kind === 's') changed.push(record)
    else if (record.kind === 'o') inFlight.push({ op: record.op, id: record.id, writer: record.writer })
    else return undefined
    at = read.end
  }
  return { changed, inFlight }
}

/**
 * Whether the incomplete frame at `at` is torn rather than still being
 * written: a complete frame follows it. A write that failed part-way (a full
 * disk) leaves its partial frame in place, and later writers append after
 * it; such a frame is damage, never the end of the records.
 */
export function isTorn(buf: Buffer, at: number): boolean {
  for (let next = buf.indexOf(RECORD_MAGIC_BYTES, at + 1); next !== -1; next = buf.indexOf(RECORD_MAGIC_BYTES, next + 1))
    if (readFrame(buf, next).status === 'record') return true
  return false
}

export interface Walk {
  readonly reported: string[]
  readonly pending: Pending[]
  /** Offset (in the buffer) after the last complete record. */
  readonly end: number
  readonly lastLength: number
  readonly lastCrc: number
  readonly damaged: boolean
  /** The walk stopped after a seal: the journal is being compacted (or a compaction of it failed). */
  readonly sealed: boolean
}

/**
 * Reads verbatim records from `start` to the last complete one, or to the
 * first seal (included). `resync` skips damaged regions (to the next frame
 * that checks out) instead of stopping at them. A torn frame (`isTorn`) is a
 * damaged region.
 */
export function walk(buf: Buffer, start: number, pendingIn: readonly Pending[], resync = false): Walk {
  const reported: string[] = []
  const pending = new Map(pendingIn.map((p) => [p.op, p]))
  let at = start
  let lastLength = 0
  let lastCrc = 0
  for (;;) {
    const read = readFrame(buf, at)
    if (read.status === 'incomplete' && !isTorn(buf, at)) break
    if (read.status !== 'record' || (read.record.kind !== 'b' && read.record.kind !== 'e' && read.record.kind !== 'x')) {
      if (!resync) return { reported, pending: [...pending.values()], end: at, lastLength, lastCrc, damaged: true, sealed: false }
      // Skip to the next frame that may check out; damage at the very end is skipped whole
      // (writers append after it), so a damaged tail costs one rescan, not one per call.
      const next = buf.indexOf(RECORD_MAGIC_BYTES, at + 1)
      at = next === -1 ? buf.length : next
      lastLength = 0
      lastCrc = 0
      if (next === -1) break
      continue
    }
    const { record } = read
    lastLength = read.end - at
    lastCrc = read.crc
    at = read.end
    if (record.kind === 'x') return { reported, pending: [...pending.values()], end: at, lastLength, lastCrc, damaged: false, sealed: true }
    reported.push(record.id)
    if (record.kind === 'b') pending.set(record.op, { op: record.op, id: record.id, writer: record.writer })
    else if (record.kind === 'e') pending.delete(record.op)
  }
  return { reported, pending: [...pending.values()], end: at, lastLength, lastCrc, damaged: false, sealed: false }
}

export function encodeCursor(state: CursorState): string {
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

export function decodeCursor(cursor: string | undefined): CursorState | undefined {
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
