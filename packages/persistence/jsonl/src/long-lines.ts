import { createRequire } from 'node:module'
import { crc32 } from 'node:zlib'
import type { StoredSessionEvent } from '@dsh/session'
import { elidedEvent, LINE_MAX_BYTES } from '@dsh/session-persistence/backend'
import type * as Binding from 'zstd-napi/binding.js'
import type { LogCodec } from './codec.js'
import { parseEventLines } from './log-format.js'
import type { TrailerFields } from './trailer.js'

/*
 * Batches whose plaintext is over `LINE_MAX_BYTES` are read without holding
 * their plaintext: decoded a chunk at a time (`forEachPlainChunk`), split into
 * lines there, each line kept only up to the cap. A line over the cap (a log
 * written before the event cap, or by another writer) is never materialized:
 * its first bytes name its type, seq and time, and it comes back as an elided
 * event (`event/elided`, reason `line-too-large`). The batch is still checked
 * whole: its plaintext length and CRC32 against its trailer, its event count.
 * Memory stays at the cap plus a chunk, whatever the line.
 */

/** Plaintext bytes decoded at a time. */
const CHUNK = 1024 * 1024
/** Bytes of a long line kept to read its type, seq, time (and a packed line's time gaps) from. */
const HEAD = 64 * 1024

let binding: typeof Binding | undefined

/** Calls `each` with the plaintext of one unit body, a chunk at a time (the chunk's buffer is reused: copy what is kept). Throws when the body does not decode to its end. */
export function forEachPlainChunk(codec: LogCodec, body: Buffer, each: (chunk: Buffer) => void): void {
  if (codec.compression !== 'zstd') {
    for (let at = 0; at < body.length; at += CHUNK) each(body.subarray(at, Math.min(body.length, at + CHUNK)))
    return
  }
  binding ??= createRequire(import.meta.url)('zstd-napi/binding.js') as typeof Binding
  const ctx = new binding.DCtx()
  const out = Buffer.allocUnsafe(CHUNK)
  let input = body
  for (;;) {
    const [remaining, produced, read] = ctx.decompressStream(out, input)
    input = input.subarray(read)
    if (produced > 0) each(out.subarray(0, produced))
    if (remaining === 0) {
      // The frame is decoded and flushed.
      if (input.length > 0) throw new Error(`${input.length} bytes follow the frame`)
      return
    }
    if (read === 0 && produced === 0) throw new Error('the frame ends before its last block')
  }
}

/** The plaintext length and CRC32 of a unit body, decoded a chunk at a time. */
export function plainDigest(codec: LogCodec, body: Buffer): { length: number; crc: number } {
  let length = 0
  let crc = 0
  forEachPlainChunk(codec, body, (chunk) => {
    length += chunk.length
    crc = crc32(chunk, crc)
  })
  return { length, crc }
}

/**
 * The events of one committed batch read a chunk at a time (its lines over
 * `LINE_MAX_BYTES` elided), pushed onto `into`; returns why the batch does
 * not read back as its trailer records, or `undefined`.
 */
export function decodeLongUnit(
  codec: LogCodec,
  buf: Buffer,
  unit: { readonly bodyStart: number; readonly bodyEnd: number; readonly trailer: TrailerFields },
  into: StoredSessionEvent[],
): string | undefined {
  const { firstSeq, count, plainLength, plainCrc } = unit.trailer
  const start = into.length
  let length = 0
  let crc = 0
  let fault: string | undefined
  // The line being read: its pieces while it is within the cap, its head always, its length.
  let pieces: Buffer[] = []
  let head = Buffer.alloc(0)
  let lineBytes = 0
  const endLine = (): void => {
    if (fault !== undefined) return
    const seq = firstSeq + (into.length - start)
    if (lineBytes <= LINE_MAX_BYTES) {
      pieces.push(NEWLINE)
      fault = parseEventLines(Buffer.concat(pieces), seq, undefined, into)
    } else {
      fault = elideLine(head, lineBytes, seq, into)
    }
    pieces = []
    head = Buffer.alloc(0)
    lineBytes = 0
  }
  const addPiece = (piece: Buffer): void => {
    if (head.length < HEAD) head = Buffer.concat([head, piece.subarray(0, HEAD - head.length)])
    lineBytes += piece.length
    if (lineBytes <= LINE_MAX_BYTES) pieces.push(Buffer.from(piece))
    else pieces = []
  }
  try {
    forEachPlainChunk(codec, buf.subarray(unit.bodyStart, unit.bodyEnd), (chunk) => {
      length += chunk.length
      crc = crc32(chunk, crc)
      for (let at = 0; at < chunk.length; ) {
        const newline = chunk.indexOf(0x0a, at)
        addPiece(chunk.subarray(at, newline === -1 ? chunk.length : newline))
        if (newline === -1) break
        endLine()
        at = newline + 1
      }
    })
  } catch (error) {
    return `the unit does not decode (${(error as Error).message})`
  }
  if (length !== plainLength) return `the unit decodes to ${length} bytes, its trailer records ${plainLength}`
  if (crc !== plainCrc) return 'CRC32 mismatch'
  if (lineBytes > 0) return 'the batch does not end with a newline'
  if (fault !== undefined) return fault
  const read = into.length - start
  return read === count ? undefined : `the batch holds ${read} events, its trailer records ${count}`
}

const NEWLINE = Buffer.from('\n')
/** How every event line starts (`encodeEventLines` writes the keys in this order). */
const LINE_START = /^\{"type":("(?:[^"\\]|\\.)*"),"seq":(\d+),"time":(-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?),("run":\{"dt":\[)?/

/** The elided event(s) of a line over the cap, read from its head: one, or one per event of a packed line. */
function elideLine(head: Buffer, bytes: number, seq: number, into: StoredSessionEvent[]): string | undefined {
  const text = head.toString('utf8')
  const match = LINE_START.exec(text)
  if (match === null) return `the line for seq ${seq} is over the read cap and does not start as an event line`
  const type = JSON.parse(match[1]!) as string
  if (Number(match[2]) !== seq) return `expected seq ${seq}, found ${match[2]}`
  let time = Number(match[3])
  const gaps: number[] = []
  if (match[4] !== undefined) {
    // A packed line: its time gaps come first, so its events can be counted and timed without its data.
    const from = match[0].length - 1
    const close = text.indexOf(']', from)
    const dt = close === -1 ? undefined : (JSON.parse(text.slice(from, close + 1)) as unknown)
    if (!Array.isArray(dt) || !dt.every((gap) => Number.isSafeInteger(gap)))
      return `the packed line at seq ${seq} is over the read cap and its time gaps cannot be read`
    gaps.push(...(dt as number[]))
  }
  const share = Math.ceil(bytes / (gaps.length + 1))
  for (let k = 0; k <= gaps.length; k++) {
    into.push(deepFrozen(elidedEvent(seq + k, time, { bytes: share, reason: 'line-too-large', type })))
    time += gaps[k] ?? 0
  }
  return undefined
}

function deepFrozen(event: ReturnType<typeof elidedEvent>): StoredSessionEvent {
  Object.freeze(event.data.elided)
  Object.freeze(event.data)
  return Object.freeze(event) as unknown as StoredSessionEvent
}
