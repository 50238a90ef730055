import { crc32 } from 'node:zlib'
import { ownIdentity, type ProcessIdentity } from './process-identity.js'

/**
 * The change journal's bytes (see `change-journal.ts` for what they mean):
 * a 32-byte header (`DSHJ`, version u32, 16-byte lifecycle id, CRC32 of the
 * 24 bytes before, 4 zero bytes), then records: `DSHR`, payload length u32,
 * CRC32 of the payload u32, payload (UTF-8 JSON
 * `{"k":"b"|"e","id":…,"op":…,"w":[host,pid,start]}`), little-endian; and
 * the cursors readers continue from. Pure encoding and decoding: no I/O.
 */

const HEADER_MAGIC = 0x4a485344 // 'DSHJ'
const RECORD_MAGIC = 0x52485344 // 'DSHR'
export const RECORD_MAGIC_BYTES = Buffer.from('DSHR', 'latin1')
export const HEADER_BYTES = 32
const RECORD_HEAD = 12
const JOURNAL_VERSION = 1
const MAX_PAYLOAD = 64 * 1024

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

/** A journal header of lifecycle `lifecycle` (32 hex digits). */
export function encodeJournalHeader(lifecycle: string): Buffer {
  const header = Buffer.alloc(HEADER_BYTES)
  header.writeUInt32LE(HEADER_MAGIC, 0)
  header.writeUInt32LE(JOURNAL_VERSION, 4)
  header.write(lifecycle, 8, 'hex')
  header.writeUInt32LE(crc32(header.subarray(0, 24)), 24)
  return header
}

export interface JournalRecord {
  readonly kind: 'b' | 'e'
  readonly id: string
  readonly op: string
  readonly writer: WriterIdentity
}

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
  /** Offset after the last record read (for `damaged`, the size seen). */
  readonly offset: number
  /** Length and CRC of the frame that ends at `offset` (0, 0 right after the header). */
  readonly lastLength: number
  readonly lastCrc: number
  readonly pending: readonly Pending[]
}

export const CURSOR_PREFIX = 'j1.'

export function decodeJournalHeader(buf: Buffer): string | undefined {
  if (buf.length < HEADER_BYTES || buf.readUInt32LE(0) !== HEADER_MAGIC || buf.readUInt32LE(4) !== JOURNAL_VERSION) return undefined
  if (crc32(buf.subarray(0, 24)) !== buf.readUInt32LE(24)) return undefined
  return buf.toString('hex', 8, 24)
}

export function encodeRecord(record: JournalRecord): Buffer {
  const payload = Buffer.from(JSON.stringify({ k: record.kind, id: record.id, op: record.op, w: record.writer }), 'utf8')
  if (payload.length > MAX_PAYLOAD) throw new RangeError('a change journal record is too large')
  const frame = Buffer.allocUnsafe(RECORD_HEAD + payload.length)
  frame.writeUInt32LE(RECORD_MAGIC, 0)
  frame.writeUInt32LE(payload.length, 4)
  frame.writeUInt32LE(crc32(payload), 8)
  payload.copy(frame, RECORD_HEAD)
  return frame
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

export interface Walk {
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
export function walk(buf: Buffer, start: number, pendingIn: readonly Pending[], resync = false): Walk {
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
