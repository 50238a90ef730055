import { createRequire } from 'node:module'
import type { Compressor, Decompressor } from 'zstd-napi'
import { LOG_FILE_NAMES } from './root-marker.js'
import { LINE_TRAILER_PREFIX, lineTrailer, skippableTrailer, type TrailerFormat } from './trailer.js'
import type { JsonlCompression } from './types.js'
import { type FrameExtent, measureZstdFrame, rawZstdFrame, storedFramesContent } from './zstd-frames.js'

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
  /**
   * Whether a log's second append on leaves a preallocated tail that appends
   * overwrite (`log-padding.ts`): zstd logs, whose padding is a skippable
   * frame `zstd -dc` passes over. Plain logs stay plain lines for line tools.
   */
  readonly padsTail: boolean
  /** Whether batches write runs of like events as packed lines (`encodeEventLines`): zstd logs; plain logs keep one line per event. */
  readonly packsRuns: boolean
  /** Encodes one unit body, synchronously (a durable append waits for it; a thread-pool round trip costs more than small batches take). */
  encodeBody(plain: Buffer): Buffer
  /**
   * Encodes a header unit's body: for zstd a standard frame of raw (stored)
   * blocks, which `list` reads without loading a zstd binding (a header is a
   * few hundred bytes; compressing it saved about a third of them).
   */
  encodeHeaderBody(plain: Buffer): Buffer
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
  /** The same, synchronously (small bodies only: a header unit, one trailer's batch). */
  decodeBodySync(body: Buffer): Buffer
  /** The plaintexts of consecutive units, decoded together where the encoding allows. Rejects when the bytes do not decode to the recorded lengths. */
  decodeRun(buf: Buffer, units: readonly UnitRange[]): Promise<Buffer[]>
}

export function createCodec(compression: JsonlCompression): LogCodec {
  return compression === 'zstd' ? zstdCodec : plainCodec
}

/**
 * Runs of at most this many plaintext bytes are decoded synchronously (libzstd
 * through zstd-napi, on the calling thread); longer runs asynchronously on the
 * libuv pool (`@mongodb-js/zstd`), so reading a huge log never blocks the
 * event loop for long. Both decode any standard zstd frame.
 */
export const SYNC_DECODE_MAX = 256 * 1024

/**
 * One libzstd compression context for the process (level 3, the zstd
 * default; content size in every frame header, no frame checksum: the
 * trailer's CRC32s are the integrity check). Frames are single-shot, so the
 * shared context carries nothing from one frame to the next.
 */
let compressor: Compressor | undefined
let decompressor: Decompressor | undefined

/*
 * The zstd bindings are native modules that cost tens of milliseconds to load,
 * and a process that only lists sessions (through the change feed, and header
 * units of stored blocks, which are sliced, not decoded) may need neither. So neither is loaded at import: zstd-napi on the first frame
 * encoded or decoded synchronously (a synchronous require: the write path
 * stays free of thread-pool hops), @mongodb-js/zstd on the first large run
 * decoded (a dynamic import). `tests/lazy-zstd.e2e.spec.ts` pins this.
 */
let zstdNapi: typeof import('zstd-napi') | undefined
let mongodbZstd: Promise<typeof import('@mongodb-js/zstd')> | undefined

function loadZstdNapi(): typeof import('zstd-napi') {
  zstdNapi ??= createRequire(import.meta.url)('zstd-napi') as typeof import('zstd-napi')
  return zstdNapi
}

function decompressAsync(frames: Buffer): Promise<Buffer> {
  mongodbZstd ??= import('@mongodb-js/zstd')
  return mongodbZstd.then((zstd) => zstd.decompress(frames))
}

/**
 * Batch bodies of fewer plaintext bytes are stored as a raw-block frame, not
 * compressed. Compressing a few hundred bytes costs about as much as the rest
 * of a small durable append: 10-12 µs of its ~200 µs on this machine, paired
 * with SQLite commits (`bench append-sqlite`), and it saves a few hundred
 * bytes at most. Sessions are appended about one batch per turn, so such
 * batches are a small share of a log's bytes (`bench size`). A raw frame is
 * still a standard zstd frame (`zstd -dc` reads it); a run of them is read
 * without loading a binding (`storedFramesContent`).
 */
export const RAW_BODY_MAX = 1024

/** A batch body: a raw-block frame below `RAW_BODY_MAX` plaintext bytes, else one libzstd frame (`compressFrame`). */
export function encodeBatchBody(plain: Buffer): Buffer {
  return plain.length < RAW_BODY_MAX ? rawZstdFrame(plain) : compressFrame(plain)
}

/** Compresses `plain` into one standard zstd frame with libzstd (synchronously). */
export function compressFrame(plain: Uint8Array): Buffer {
  if (compressor === undefined) {
    compressor = new (loadZstdNapi().Compressor)()
    compressor.setParameters({ compressionLevel: 3, contentSizeFlag: true, checksumFlag: false })
  }
  return compressor.compress(plain)
}

/** Decompresses a concatenation of zstd frames (skippable frames included) synchronously. */
export function decompressFrames(frames: Uint8Array): Buffer {
  // Frames of stored blocks only (every header unit, every batch under
  // RAW_BODY_MAX): their content is sliced out, no binding loaded.
  const stored = storedFramesContent(frames)
  if (stored !== undefined) return stored
  decompressor ??= new (loadZstdNapi().Decompressor)()
  return decompressor.decompress(frames)
}

const zstdCodec: LogCodec = (() => {
  const trailerSize = skippableTrailer.size
  return {
    compression: 'zstd',
    logFileName: LOG_FILE_NAMES.zstd,
    trailer: skippableTrailer,
    padsTail: true,
    packsRuns: true,
    encodeBody: encodeBatchBody,
    encodeHeaderBody: rawZstdFrame,
    measureBody: measureZstdFrame,
    measureBodyByContent: measureZstdFrame,
    decodeBody: (body) => Promise.resolve().then(() => decompressFrames(body)),
    decodeBodySync: decompressFrames,
    async decodeRun(buf, units) {
      const first = units[0]
      const last = units.at(-1)
      if (!first || !last) return []
      // One call over the whole run (the trailers between the data frames are
      // skippable frames the decoder passes over): several times faster than
      // one call per frame.
      const expectedPlain = units.reduce((sum, u) => sum + u.plainLength, 0)
      const frames = buf.subarray(first.bodyStart, last.bodyEnd + trailerSize)
      const plain = expectedPlain <= SYNC_DECODE_MAX ? decompressFrames(frames) : await decompressAsync(frames)
      if (plain.length !== expectedPlain)
        throw new RangeError(`the run decompressed to ${plain.length} bytes, its trailers record ${expectedPlain}`)
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

const TRAILER_LINE_START = Buffer.from(`\n${LINE_TRAILER_PREFIX}`)
const EVENT_LINE_START = Buffer.from('{"type":')

const plainCodec: LogCodec = {
  compression: 'none',
  logFileName: LOG_FILE_NAMES.none,
  trailer: lineTrailer,
  padsTail: false,
  packsRuns: false,
  encodeBody: (plain) => plain,
  encodeHeaderBody: (plain) => plain,
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
  decodeBodySync: (body) => body,
  decodeRun(buf, units) {
    return Promise.resolve(units.map((u) => buf.subarray(u.bodyStart, u.bodyEnd)))
  },
}
