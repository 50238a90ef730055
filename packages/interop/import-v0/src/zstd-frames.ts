import { createRequire } from 'node:module'
import { V0_FRAME_MAX_BYTES } from '@dsh/protocol/limits'
import type * as Binding from 'zstd-napi/binding.js'
import { ImportV0Error } from './errors.js'

/**
 * The v0 frame layer: a log is a plain concatenation of standard zstd frames
 * with the content-checksum flag, frame 0 the header line, every later frame
 * one append batch. No skippable frames.
 *
 * Invariants: a complete frame either decodes with a matching checksum or is
 * reported (damaged / checksum); only the LAST frame may be incomplete (a torn
 * tail) and what it decodes to before the tear is handed back as `torn` for
 * the caller to keep complete lines from — the same prefix the harness reads.
 */

const require = createRequire(import.meta.url)
const binding: typeof Binding = require('zstd-napi/binding.js')

export const ZSTD_MAGIC = 0xfd2fb528
const SKIPPABLE_MASK = 0xfffffff0
const SKIPPABLE_MAGIC = 0x184d2a50

export interface DecodedFrames {
  /** The plaintext of each complete frame, in order. */
  readonly frames: Buffer[]
  /** The plaintext of every complete frame, contiguous (`frames` are views into it). */
  readonly plain: Buffer
  /** Where each complete frame's plaintext ends in `plain`. */
  readonly ends: number[]
  /** What an incomplete final frame decoded to before the tear (possibly empty); `undefined` when the log ends on a frame boundary. */
  readonly torn: Buffer | undefined
  /** Bytes of the incomplete final frame (0 without one). */
  readonly tornBytes: number
}

let sharedDctx: Binding.DCtx | undefined

function dctx(): Binding.DCtx {
  sharedDctx ??= new binding.DCtx()
  return sharedDctx
}

/** Where one complete frame is in the log, and the plaintext size its header states (`null`: not stated). */
export interface FrameSpan {
  readonly offset: number
  readonly size: number
  readonly content: number | null
}

/** The complete frames of a log, found from their headers alone (nothing decoded), and an incomplete last one. */
export interface FrameScan {
  readonly spans: FrameSpan[]
  /** The incomplete final frame (`rest` = its bytes, possibly fewer than 4), or `undefined` when the log ends on a frame boundary. */
  readonly torn: { readonly rest: Buffer; readonly offset: number } | undefined
}

/**
 * Finds the complete frames of a v0 zstd log (at most `maxFrames`) without
 * decoding them. Throws `ImportV0Error` for bytes that are not a zstd frame
 * where one must start.
 */
export function scanFrames(bytes: Buffer, maxFrames = Number.POSITIVE_INFINITY): FrameScan {
  const spans: FrameSpan[] = []
  let offset = 0
  let torn: FrameScan['torn']
  while (offset < bytes.length && spans.length < maxFrames) {
    const rest = bytes.subarray(offset)
    if (rest.length < 4) {
      torn = { rest, offset }
      break
    }
    const magic = rest.readUInt32LE(0)
    if (magic !== ZSTD_MAGIC) {
      if (offset === 0 || (magic & SKIPPABLE_MASK) >>> 0 === SKIPPABLE_MAGIC) {
        throw new ImportV0Error(
          'IMPORT_V0_FOREIGN_MAGIC',
          `${offset === 0 ? 'The log' : `The bytes at offset ${offset}`} start with 0x${magic.toString(16).padStart(8, '0')}, not a zstd frame: not a v0 log (v0 logs hold only standard zstd frames${offset === 0 ? '' : ', never skippable ones — is this a dsh root?'}).`,
          { details: { offset } },
        )
      }
      throw new ImportV0Error(
        'IMPORT_V0_DAMAGED_FRAME',
        `Frame ${spans.length} at offset ${offset} does not start with the zstd magic; the log is damaged there.`,
        {
          details: { offset, frame: spans.length },
        },
      )
    }
    let size: number
    try {
      size = binding.findFrameCompressedSize(rest)
    } catch {
      // Not a complete frame: the torn tail (keep what it decodes to), or damage we only learn about by decoding.
      torn = { rest, offset }
      break
    }
    let content: number | null
    try {
      content = binding.getFrameContentSize(rest)
    } catch (error) {
      throw frameError(error, offset, spans.length)
    }
    if (content !== null && content > V0_FRAME_MAX_BYTES) throw frameTooLarge(offset, spans.length, content)
    spans.push({ offset, size, content })
    offset += size
  }
  return { spans, torn }
}

/**
 * Splits and decodes the frames of a v0 zstd log (at most `maxFrames` complete
 * ones), on the calling thread. Throws `ImportV0Error` with a frame-level code.
 * Frames whose header states their content size (as every harness frame does)
 * decode straight into one shared buffer, without a copy per frame.
 */
export function decodeFrames(bytes: Buffer, maxFrames = Number.POSITIVE_INFINITY): DecodedFrames {
  const { spans, torn } = scanFrames(bytes, maxFrames)
  const ctx = dctx()
  const known = spans.every((span) => span.content !== null)
  let plain: Buffer
  const ends: number[] = []
  if (known) {
    plain = decodeKnown(bytes, spans, 0, spans.length)
    let at = 0
    for (const span of spans) {
      at += span.content as number
      ends.push(at)
    }
  } else {
    const parts = spans.map((_, index) => decodeSpan(bytes, spans, index))
    plain = Buffer.concat(parts)
    let at = 0
    for (const part of parts) {
      at += part.length
      ends.push(at)
    }
  }
  const frames = ends.map((end, i) => plain.subarray(i === 0 ? 0 : (ends[i - 1] as number), end))
  if (torn === undefined) return { frames, plain, ends, torn: undefined, tornBytes: 0 }
  return { frames, plain, ends, ...decodeTornTail(torn, spans.length, ctx) }
}

/** The plaintext of one complete frame, decoded on the calling thread. */
export function decodeSpan(bytes: Buffer, spans: readonly FrameSpan[], index: number): Buffer {
  const span = spans[index] as FrameSpan
  return decodeComplete(dctx(), bytes.subarray(span.offset, span.offset + span.size), span.offset, index)
}

/**
 * Frames `[from, to)` (every one stating its content size) decoded on the
 * calling thread into one buffer. `onFault`: called with the typed error of
 * the first frame that does not decode, the frames before it being returned
 * (without it, the error is thrown).
 */
function decodeKnown(bytes: Buffer, spans: readonly FrameSpan[], from: number, to: number, onFault?: (error: unknown) => void): Buffer {
  const ctx = dctx()
  let total = 0
  for (let i = from; i < to; i++) total += (spans[i] as FrameSpan).content as number
  const plain = Buffer.allocUnsafe(total)
  let at = 0
  for (let i = from; i < to; i++) {
    const span = spans[i] as FrameSpan
    const content = span.content as number
    try {
      at += decodeInto(ctx, bytes.subarray(span.offset, span.offset + span.size), plain.subarray(at, at + content), span.offset, i)
    } catch (error) {
      if (onFault === undefined) throw error
      onFault(error)
      return plain.subarray(0, at)
    }
  }
  return plain
}

/** What the incomplete final frame decodes to before the tear (complete lines are the caller's to keep). */
export function decodeTornTail(
  torn: NonNullable<FrameScan['torn']>,
  index: number,
  ctx: Binding.DCtx = dctx(),
): { torn: Buffer; tornBytes: number } {
  if (torn.rest.length < 4) return { torn: Buffer.alloc(0), tornBytes: torn.rest.length }
  return decodeTorn(ctx, torn.rest, torn.offset, index)
}

/** Plaintext bytes of the frames one pool call decodes (a frame larger than this is decoded alone). */
export const POOL_GROUP_BYTES = 2 * 1024 * 1024
/** Groups decoding on the pool while the caller reads the one before them. */
const POOL_AHEAD = 2

/** Loaded by the first log read on the pool (`@mongodb-js/zstd`: libzstd on the libuv thread pool). */
let mongodbZstd: Promise<typeof import('@mongodb-js/zstd')> | undefined

/** Plaintext of consecutive complete frames: frame `first + i` ends at `ends[i]` in `plain`. */
export interface DecodedGroup {
  readonly first: number
  readonly plain: Buffer
  readonly ends: readonly number[]
}

/** A group whose frames decode up to a bad one: those before it, and its typed error (thrown by the next `take()`). */
interface GroupResult extends DecodedGroup {
  readonly fault?: { readonly error: unknown }
}

/**
 * Complete frames decoded on the libuv thread pool, in order, a group of
 * about `POOL_GROUP_BYTES` of plaintext per call and `POOL_AHEAD` groups in
 * flight, so the frames after those being read decode on another core.
 * Every frame must state its content size (as every harness frame does).
 *
 * Invariants: groups come back in log order, each frame's plaintext exactly
 * the size its header states, its content checksum checked by libzstd; a
 * group that fails is decoded again frame by frame on the calling thread, so
 * the error is the same typed one `decodeFrames` throws for that frame.
 */
export class PooledFrames {
  private nextFrame: number
  private readonly inFlight: Promise<GroupResult>[] = []
  private fault: { readonly error: unknown } | undefined

  constructor(
    private readonly bytes: Buffer,
    private readonly spans: readonly FrameSpan[],
    from: number,
  ) {
    this.nextFrame = from
    this.start()
  }

  /**
   * The next group of frames, or `undefined` after the last. Throws
   * `ImportV0Error` for a frame that does not decode — after a group holding
   * the frames before it in its group was returned, as a whole read would.
   */
  async take(): Promise<DecodedGroup | undefined> {
    if (this.fault !== undefined) throw this.fault.error
    const pending = this.inFlight.shift()
    this.start()
    const group = await pending
    if (group?.fault !== undefined) {
      this.fault = group.fault
      this.inFlight.length = 0
      if (group.ends.length === 0) throw group.fault.error
    }
    return group
  }

  private start(): void {
    while (this.fault === undefined && this.inFlight.length < POOL_AHEAD && this.nextFrame < this.spans.length) {
      const first = this.nextFrame
      let to = first
      let plain = 0
      while (to < this.spans.length && (to === first || plain < POOL_GROUP_BYTES)) {
        plain += (this.spans[to] as FrameSpan).content as number
        to++
      }
      this.nextFrame = to
      const group = this.decode(first, to, plain)
      // Observed by take(); never an unhandled rejection while an earlier group is read (or after the reader stopped).
      group.catch(() => {})
      this.inFlight.push(group)
    }
  }

  private async decode(first: number, to: number, total: number): Promise<GroupResult> {
    const from = this.spans[first] as FrameSpan
    const last = this.spans[to - 1] as FrameSpan
    let plain: Buffer | undefined
    try {
      mongodbZstd ??= import('@mongodb-js/zstd')
      plain = await (await mongodbZstd).decompress(this.bytes.subarray(from.offset, last.offset + last.size))
    } catch {
      plain = undefined
    }
    let fault: GroupResult['fault']
    // The pool's error names no frame: decoding the group here finds its first bad frame and that frame's typed error.
    if (plain?.length !== total) {
      plain = decodeKnown(this.bytes, this.spans, first, to, (error) => {
        fault = { error }
      })
    }
    const ends: number[] = []
    let at = 0
    for (let i = first; i < to; i++) {
      const end = at + ((this.spans[i] as FrameSpan).content as number)
      if (end > plain.length) break
      at = end
      ends.push(at)
    }
    return fault === undefined ? { first, plain, ends } : { first, plain, ends, fault }
  }
}

function decodeInto(ctx: Binding.DCtx, frame: Buffer, out: Buffer, offset: number, index: number): number {
  try {
    ctx.reset(binding.ResetDirective.sessionOnly)
    const written = ctx.decompress(out, frame)
    if (written !== out.length) throw new Error(`frame decoded to ${written} bytes, its header says ${out.length}`)
    return written
  } catch (error) {
    throw frameError(error, offset, index)
  }
}

function decodeComplete(ctx: Binding.DCtx, frame: Buffer, offset: number, index: number): Buffer {
  try {
    ctx.reset(binding.ResetDirective.sessionOnly)
    const known = binding.getFrameContentSize(frame)
    if (known !== null) {
      const out = Buffer.allocUnsafe(known)
      const written = ctx.decompress(out, frame)
      if (written !== known) throw new Error(`frame decoded to ${written} bytes, its header says ${known}`)
      return out
    }
    const parts = streamDecode(ctx, frame)
    if (!parts.complete) throw new Error('the frame ends before its last block')
    return parts.plaintext
  } catch (error) {
    throw frameError(error, offset, index)
  }
}

function decodeTorn(ctx: Binding.DCtx, rest: Buffer, offset: number, index: number): { torn: Buffer; tornBytes: number } {
  let parts: { plaintext: Buffer; complete: boolean; consumed: number }
  try {
    ctx.reset(binding.ResetDirective.sessionOnly)
    parts = streamDecode(ctx, rest)
  } catch (error) {
    // A truncated but otherwise intact frame never fails to decode what it has: a failure is damage.
    throw frameError(error, offset, index)
  }
  if (parts.complete) {
    throw new ImportV0Error(
      'IMPORT_V0_DAMAGED_FRAME',
      `Frame ${index} at offset ${offset} decodes, but bytes that are not a frame follow it at offset ${offset + parts.consumed}.`,
      {
        details: { offset, frame: index },
      },
    )
  }
  return { torn: parts.plaintext, tornBytes: rest.length }
}

/** Output chunks of a streamed decode grow to this size at most. */
const STREAM_CHUNK_MAX = 8 << 20

/**
 * Decodes a frame whose size its header does not state (or a torn one) as a
 * stream, chunk by chunk, and stops with `IMPORT_V0_FRAME_TOO_LARGE` as soon
 * as its plaintext passes `V0_FRAME_MAX_BYTES`: a few kilobytes of frame can
 * stand for gigabytes, so memory stays bounded by the cap, not the frame.
 */
function streamDecode(ctx: Binding.DCtx, input: Buffer): { plaintext: Buffer; complete: boolean; consumed: number } {
  const chunks: Buffer[] = []
  let consumed = 0
  let total = 0
  let chunkSize = Math.min(STREAM_CHUNK_MAX, Math.max(binding.dStreamOutSize(), input.length * 4))
  for (;;) {
    const out = Buffer.allocUnsafe(chunkSize)
    const [remaining, produced, read] = ctx.decompressStream(out, input.subarray(consumed))
    consumed += read
    total += produced
    if (total > V0_FRAME_MAX_BYTES) throw frameTooLarge(0, 0)
    if (produced > 0) chunks.push(out.subarray(0, produced))
    if (remaining === 0) return { plaintext: Buffer.concat(chunks), complete: true, consumed }
    if ((consumed >= input.length && produced < chunkSize) || (read === 0 && produced === 0)) {
      return { plaintext: Buffer.concat(chunks), complete: false, consumed }
    }
    chunkSize = Math.min(chunkSize * 2, STREAM_CHUNK_MAX)
  }
}

/** A frame whose plaintext is over the cap: `stated` is the size its header states (`undefined`: a streamed decode passed the cap). */
function frameTooLarge(offset: number, index: number, stated?: number): ImportV0Error {
  const why = stated === undefined ? 'decompresses past' : `states ${stated} bytes of plaintext, over`
  return new ImportV0Error(
    'IMPORT_V0_FRAME_TOO_LARGE',
    `Frame ${index} at offset ${offset} ${why} the cap of ${V0_FRAME_MAX_BYTES} bytes (V0_FRAME_MAX_BYTES); a v0 batch that large is refused, never decoded whole. Split the session's batches in the harness, or leave the session out of the import.`,
    { details: { offset, frame: index, max: V0_FRAME_MAX_BYTES, ...(stated === undefined ? {} : { stated }) } },
  )
}

function frameError(error: unknown, offset: number, index: number): ImportV0Error {
  // A cap reached inside a decode names the frame here (the decode itself does not know where it is).
  if (error instanceof ImportV0Error) return error.code === 'IMPORT_V0_FRAME_TOO_LARGE' ? frameTooLarge(offset, index) : error
  const message = error instanceof Error ? error.message : String(error)
  if (/checksum/i.test(message)) {
    return new ImportV0Error(
      'IMPORT_V0_CHECKSUM_MISMATCH',
      `Frame ${index} at offset ${offset} fails its content checksum: the log was changed after it was written.`,
      {
        cause: error,
        details: { offset, frame: index },
      },
    )
  }
  return new ImportV0Error('IMPORT_V0_DAMAGED_FRAME', `Frame ${index} at offset ${offset} does not decode (${message}).`, {
    cause: error,
    details: { offset, frame: index },
  })
}

let sharedCompressor: Binding.CCtx | undefined

/** One standard zstd frame with the content-checksum flag (and the content size), as the harness writes them. */
export function encodeFrame(plaintext: Buffer): Buffer {
  if (sharedCompressor === undefined) {
    sharedCompressor = new binding.CCtx()
    sharedCompressor.setParameter(binding.CParameter.checksumFlag, 1)
    sharedCompressor.setParameter(binding.CParameter.compressionLevel, 3)
  }
  const out = Buffer.allocUnsafe(binding.compressBound(plaintext.length))
  const written = sharedCompressor.compress2(out, plaintext)
  return out.subarray(0, written)
}
