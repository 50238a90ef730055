import { compress, decompress } from '@mongodb-js/zstd'
import { LINE_TRAILER_PREFIX, lineTrailer, skippableTrailer, type TrailerFormat } from './trailer.js'
import { type FrameExtent, measureZstdFrame } from './zstd-frames.js'
import { compressSmall, SMALL_INPUT_MAX } from './zstd-small.js'

export type JsonlCompression = 'zstd' | 'none'

/** A unit's stored body and plaintext sizes, as its trailer records them. */
export interface UnitRange {
  readonly bodyStart: number
  readonly bodyEnd: number
  readonly plainLength: number
}

/**
 * How one encoding stores a unit body (the header line, or a batch's event
 * lines) and finds it again. The log structure around it — body, trailer,
 * torn-tail and corruption rules — is shared (see `log-scan.ts`).
 */
export interface LogCodec {
  readonly compression: JsonlCompression
  readonly logFileName: string
  readonly trailer: TrailerFormat
  encodeBody(plain: Buffer): Promise<Buffer>
  /** The extent of the body starting at `pos`, from structure alone. */
  measureBody(buf: Buffer, pos: number): FrameExtent
  /**
   * A second, independent way to find where a batch body ends, used only to
   * tell a committed batch whose trailer is damaged from a torn write: for
   * zstd the frame structure again, for plain lines the run of event lines.
   */
  measureBodyByContent(buf: Buffer, pos: number): FrameExtent
  /** Decodes one body whose plaintext length is not known. */
  decodeBody(body: Buffer): Promise<Buffer>
  /** The plaintexts of consecutive units, decoded together where the encoding allows. Rejects when the bytes do not decode to the recorded lengths. */
  decodeRun(buf: Buffer, units: readonly UnitRange[]): Promise<Buffer[]>
}

export function createCodec(compression: JsonlCompression): LogCodec {
  return compression === 'zstd' ? zstdCodec : plainCodec
}

const zstdCodec: LogCodec = (() => {
  const trailerSize = skippableTrailer.size
  return {
    compression: 'zstd',
    logFileName: 'log.jsonl.zst',
    trailer: skippableTrailer,
    // Small batches are compressed here, synchronously: the native encoder's
    // thread-pool round trip would cost a durable append more than it saves.
    encodeBody: (plain) => (plain.length <= SMALL_INPUT_MAX ? Promise.resolve(compressSmall(plain)) : compress(plain)),
    measureBody: measureZstdFrame,
    measureBodyByContent: measureZstdFrame,
    decodeBody: (body) => decompress(body),
    async decodeRun(buf, units) {
      const first = units[0]
      const last = units.at(-1)
      if (!first || !last) return []
      // One call over the whole run (the trailers between the data frames are
      // skippable frames the decoder passes over): several times faster than
      // one call per frame.
      const plain = await decompress(buf.subarray(first.bodyStart, last.bodyEnd + trailerSize))
      const expected = units.reduce((sum, u) => sum + u.plainLength, 0)
      if (plain.length !== expected) throw new RangeError(`the run decompressed to ${plain.length} bytes, its trailers record ${expected}`)
      const out: Buffer[] = []
      let at = 0
      for (const unit of units) {
        out.push(plain.subarray(at, at + unit.plainLength))
        at += unit.plainLength
      }
      return out
    },
  }
})()

const TRAILER_LINE_START = Buffer.from('\n' + LINE_TRAILER_PREFIX)
const EVENT_LINE_START = Buffer.from('{"type":')

const plainCodec: LogCodec = {
  compression: 'none',
  logFileName: 'log.jsonl',
  trailer: lineTrailer,
  encodeBody: (plain) => Promise.resolve(plain),
  measureBody(buf, pos) {
    if (pos >= buf.length) return { status: 'incomplete' }
    if (buf[pos] === 0x7b && buf.toString('latin1', pos, pos + LINE_TRAILER_PREFIX.length) === LINE_TRAILER_PREFIX) {
      return { status: 'invalid', reason: 'a trailer line with no lines before it' }
    }
    const at = buf.indexOf(TRAILER_LINE_START, pos)
    return at === -1 ? { status: 'incomplete' } : { status: 'complete', end: at + 1 }
  },
  measureBodyByContent(buf, pos) {
    let at = pos
    while (at < buf.length && buf.subarray(at, at + EVENT_LINE_START.length).equals(EVENT_LINE_START)) {
      const newline = buf.indexOf(0x0a, at)
      if (newline === -1) break
      at = newline + 1
    }
    return at === pos ? { status: 'invalid', reason: 'no complete event line' } : { status: 'complete', end: at }
  },
  decodeBody: (body) => Promise.resolve(body),
  decodeRun(buf, units) {
    return Promise.resolve(units.map((u) => buf.subarray(u.bodyStart, u.bodyEnd)))
  },
}
