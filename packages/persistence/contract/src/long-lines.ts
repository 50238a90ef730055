import { crc32 } from 'node:zlib'
import { elidedEvent, LINE_MAX_BYTES } from '@dsh/protocol/limits'
import type { StoredSessionEvent } from '@dsh/session'

/*
 * Reading a batch that may hold a line over `LINE_MAX_BYTES` without holding
 * that line: its plaintext is fed a chunk at a time (`CappedLines.push`), each
 * line is kept only while it is within the cap, and a longer one is handed
 * over as its first bytes and its length, from which `elidedLineEvents` makes
 * the elided event(s) standing in for it. Every backend reads long batches
 * this way, so a stored line over the cap comes back the same from each.
 */

/** Bytes of a long line kept to read its type, seq, time (and a packed line's time gaps) from. */
const HEAD = 64 * 1024
const EMPTY = Buffer.alloc(0)

/** Splits plaintext fed a chunk at a time into lines; the length and CRC32 of everything fed are kept for the batch's check. */
export class CappedLines {
  /** Plaintext bytes fed so far. */
  length = 0
  /** CRC32 of the plaintext fed so far. */
  crc = 0
  private pieces: Buffer[] = []
  private head = EMPTY
  private lineBytes = 0

  /**
   * `onLine`: a line within the cap (without its newline); `onLong`: the
   * first bytes of a line over it and its length (its other bytes are
   * dropped as they come).
   */
  constructor(
    private readonly onLine: (line: Buffer) => void,
    private readonly onLong: (head: Buffer, bytes: number) => void,
  ) {}

  /** Feeds a chunk of plaintext (copied where kept: the caller may reuse its buffer). */
  push(chunk: Buffer): void {
    this.length += chunk.length
    this.crc = crc32(chunk, this.crc)
    for (let at = 0; at < chunk.length; ) {
      const newline = chunk.indexOf(0x0a, at)
      this.add(chunk.subarray(at, newline === -1 ? chunk.length : newline))
      if (newline === -1) return
      if (this.lineBytes <= LINE_MAX_BYTES) this.onLine(this.pieces.length === 1 ? (this.pieces[0] as Buffer) : Buffer.concat(this.pieces))
      else this.onLong(this.head, this.lineBytes)
      this.pieces = []
      this.head = EMPTY
      this.lineBytes = 0
      at = newline + 1
    }
  }

  /** Bytes fed after the last newline (0: the plaintext so far ends with one). */
  get unterminated(): number {
    return this.lineBytes
  }

  private add(piece: Buffer): void {
    if (this.head.length < HEAD) this.head = Buffer.concat([this.head, piece.subarray(0, HEAD - this.head.length)])
    this.lineBytes += piece.length
    if (this.lineBytes <= LINE_MAX_BYTES) this.pieces.push(Buffer.from(piece))
    else this.pieces = []
  }
}

/** How every stored event line starts (writers put the keys in this order); a packed line of runs continues with its time gaps. */
const LINE_START = /^\{"type":("(?:[^"\\]|\\.)*"),"seq":(\d+),"time":(-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?),("run":\{"dt":\[)?/

/**
 * The deep-frozen elided event(s) standing in for a line over the cap, read
 * from its first bytes: one, or one per event of a packed line (whose time
 * gaps come before its data), each with the line's type and its share of the
 * line's bytes. A reason string when the head does not read as an event line
 * of `seq`.
 */
export function elidedLineEvents(head: Buffer, bytes: number, seq: number): StoredSessionEvent[] | string {
  const text = head.toString('utf8')
  const match = LINE_START.exec(text)
  if (match === null) return `the line for seq ${seq} is over the read cap and does not start as an event line`
  const type = JSON.parse(match[1] as string) as string
  if (Number(match[2]) !== seq) return `expected seq ${seq}, found ${match[2]}`
  let time = Number(match[3])
  const gaps: number[] = []
  if (match[4] !== undefined) {
    const from = match[0].length - 1
    const close = text.indexOf(']', from)
    const dt = close === -1 ? undefined : (JSON.parse(text.slice(from, close + 1)) as unknown)
    if (!Array.isArray(dt) || !dt.every((gap) => Number.isSafeInteger(gap)))
      return `the packed line at seq ${seq} is over the read cap and its time gaps cannot be read`
    gaps.push(...(dt as number[]))
  }
  const share = Math.ceil(bytes / (gaps.length + 1))
  const events: StoredSessionEvent[] = []
  for (let k = 0; k <= gaps.length; k++) {
    const event = elidedEvent(seq + k, time, { bytes: share, reason: 'line-too-large', type })
    Object.freeze(event.data.elided)
    Object.freeze(event.data)
    events.push(Object.freeze(event) as unknown as StoredSessionEvent)
    time += gaps[k] ?? 0
  }
  return events
}
