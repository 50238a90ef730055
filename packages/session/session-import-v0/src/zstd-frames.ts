import { createRequire } from 'node:module'
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

/**
 * Splits and decodes the frames of a v0 zstd log (at most `maxFrames` complete
 * ones). Throws `ImportV0Error` with a frame-level code. Frames whose header
 * states their content size (as every harness frame does) decode straight
 * into one shared buffer, without a copy per frame.
 */
export function decodeFrames(bytes: Buffer, maxFrames = Number.POSITIVE_INFINITY): DecodedFrames {
  const spans: { offset: number; size: number; content: number | null }[] = []
  let offset = 0
  let torn: { rest: Buffer; offset: number } | undefined
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
    spans.push({ offset, size, content })
    offset += size
  }
  const ctx = dctx()
  const known = spans.every((span) => span.content !== null)
  let plain: Buffer
  const ends: number[] = []
  if (known) {
    plain = Buffer.allocUnsafe(spans.reduce((n, span) => n + (span.content as number), 0))
    let at = 0
    spans.forEach((span, index) => {
      at += decodeInto(
        ctx,
        bytes.subarray(span.offset, span.offset + span.size),
        plain.subarray(at, at + (span.content as number)),
        span.offset,
        index,
      )
      ends.push(at)
    })
  } else {
    const parts = spans.map((span, index) => decodeComplete(ctx, bytes.subarray(span.offset, span.offset + span.size), span.offset, index))
    plain = Buffer.concat(parts)
    let at = 0
    for (const part of parts) {
      at += part.length
      ends.push(at)
    }
  }
  const frames = ends.map((end, i) => plain.subarray(i === 0 ? 0 : (ends[i - 1] as number), end))
  if (torn === undefined) return { frames, plain, ends, torn: undefined, tornBytes: 0 }
  if (torn.rest.length < 4) return { frames, plain, ends, torn: Buffer.alloc(0), tornBytes: torn.rest.length }
  return { frames, plain, ends, ...decodeTorn(ctx, torn.rest, torn.offset, spans.length) }
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

function streamDecode(ctx: Binding.DCtx, input: Buffer): { plaintext: Buffer; complete: boolean; consumed: number } {
  const chunks: Buffer[] = []
  let consumed = 0
  let chunkSize = Math.max(binding.dStreamOutSize(), input.length * 4)
  for (;;) {
    const out = Buffer.allocUnsafe(chunkSize)
    const [remaining, produced, read] = ctx.decompressStream(out, input.subarray(consumed))
    consumed += read
    if (produced > 0) chunks.push(out.subarray(0, produced))
    if (remaining === 0) return { plaintext: Buffer.concat(chunks), complete: true, consumed }
    if ((consumed >= input.length && produced < chunkSize) || (read === 0 && produced === 0)) {
      return { plaintext: Buffer.concat(chunks), complete: false, consumed }
    }
    chunkSize = Math.min(chunkSize * 2, 64 << 20)
  }
}

function frameError(error: unknown, offset: number, index: number): ImportV0Error {
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
