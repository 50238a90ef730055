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
  /** How much of the incomplete final frame was not kept (see `TornTail.skippedBytes`; 0 without one). */
  readonly skippedBytes: number
}

/** An incomplete final frame: what it decoded to before the tear, its size, and how much of it is lost. */
export interface TornTail {
  /** Its plaintext up to the tear (possibly empty); the caller keeps the complete lines. */
  readonly torn: Buffer
  /** Bytes of the frame in the log. */
  readonly tornBytes: number
  /**
   * What was not kept: the bytes of text the frame's header says it holds
   * minus those of the complete lines it decoded to (0 when only its
   * trailing checksum was cut off: every record of it is kept); for a frame
   * that states no size, or whose header itself is cut, its bytes in the log.
   */
  readonly skippedBytes: number
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

/** Where the bytes a function is given start in the log, and the number of the first frame in them (errors name the log's offsets and frames). */
export interface FrameOrigin {
  readonly offset: number
  readonly frame: number
}

const LOG_START: FrameOrigin = { offset: 0, frame: 0 }

/**
 * Finds the complete frames of a v0 zstd log (at most `maxFrames`) without
 * decoding them. Throws `ImportV0Error` for bytes that are not a zstd frame
 * where one must start. `origin`: where `bytes` start in the log (span and
 * torn offsets stay relative to `bytes`).
 */
export function scanFrames(bytes: Buffer, maxFrames = Number.POSITIVE_INFINITY, origin: FrameOrigin = LOG_START): FrameScan {
  const scan = scanUntilFault(bytes, maxFrames, origin)
  if (scan.fault !== undefined) throw scan.fault
  return scan
}

/** `scanFrames` that hands back the complete frames before a fault with the fault, instead of throwing it. */
export function scanUntilFault(bytes: Buffer, maxFrames: number, origin: FrameOrigin): FrameScan & { readonly fault?: ImportV0Error } {
  const spans: FrameSpan[] = []
  let offset = 0
  let torn: FrameScan['torn']
  while (offset < bytes.length && spans.length < maxFrames) {
    const rest = bytes.subarray(offset)
    if (rest.length < 4) {
      torn = { rest, offset }
      break
    }
    const at = origin.offset + offset
    const index = origin.frame + spans.length
    const magic = rest.readUInt32LE(0)
    if (magic !== ZSTD_MAGIC) {
      if (at === 0 || (magic & SKIPPABLE_MASK) >>> 0 === SKIPPABLE_MAGIC) {
        const fault = new ImportV0Error(
          'IMPORT_V0_FOREIGN_MAGIC',
          `${at === 0 ? 'The log' : `The bytes at offset ${at}`} start with 0x${magic.toString(16).padStart(8, '0')}, not a zstd frame: not a v0 log (v0 logs hold only standard zstd frames${at === 0 ? '' : ', never skippable ones — is this a dsh root?'}).`,
          { details: { offset: at } },
        )
        return { spans, torn, fault }
      }
      const fault = new ImportV0Error(
        'IMPORT_V0_DAMAGED_FRAME',
        `Frame ${index} at offset ${at} does not start with the zstd magic; the log is damaged there.`,
        {
          details: { offset: at, frame: index },
        },
      )
      return { spans, torn, fault }
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
      return { spans, torn, fault: frameError(error, at, index) }
    }
    if (content !== null && content > V0_FRAME_MAX_BYTES) return { spans, torn, fault: frameTooLarge(at, index, content) }
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
  if (torn === undefined) return { frames, plain, ends, torn: undefined, tornBytes: 0, skippedBytes: 0 }
  return { frames, plain, ends, ...decodeTornTail(torn, spans.length, ctx) }
}

/** The plaintext of one complete frame, decoded on the calling thread. */
export function decodeSpan(bytes: Buffer, spans: readonly FrameSpan[], index: number, origin: FrameOrigin = LOG_START): Buffer {
  const span = spans[index] as FrameSpan
  return decodeComplete(dctx(), bytes.subarray(span.offset, span.offset + span.size), origin.offset + span.offset, origin.frame + index)
}

/**
 * Frames `[from, to)` (every one stating its content size) decoded on the
 * calling thread into one buffer. `onFault`: called with the typed error of
 * the first frame that does not decode, the frames before it being returned
 * (without it, the error is thrown).
 */
function decodeKnown(
  bytes: Buffer,
  spans: readonly FrameSpan[],
  from: number,
  to: number,
  onFault?: (error: unknown) => void,
  origin: FrameOrigin = LOG_START,
): Buffer {
  const ctx = dctx()
  let total = 0
  for (let i = from; i < to; i++) total += (spans[i] as FrameSpan).content as number
  const plain = Buffer.allocUnsafe(total)
  let at = 0
  for (let i = from; i < to; i++) {
    const span = spans[i] as FrameSpan
    const content = span.content as number
    try {
      const frame = bytes.subarray(span.offset, span.offset + span.size)
      at += decodeInto(ctx, frame, plain.subarray(at, at + content), origin.offset + span.offset, origin.frame + i)
    } catch (error) {
      if (onFault === undefined) throw error
      onFault(error)
      return plain.subarray(0, at)
    }
  }
  return plain
}

/** What the incomplete final frame decodes to before the tear (complete lines are the caller's to keep). */
export function decodeTornTail(torn: NonNullable<FrameScan['torn']>, index: number, ctx: Binding.DCtx = dctx()): TornTail {
  const size = torn.rest.length
  if (size < 4) return { torn: Buffer.alloc(0), tornBytes: size, skippedBytes: size }
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

/** Complete frames of a log read so far: `spans` (offsets in `bytes`) are frames `origin.frame`, `origin.frame + 1`, …. */
export interface FrameWindow {
  readonly bytes: Buffer
  readonly origin: FrameOrigin
  readonly spans: readonly FrameSpan[]
}

/** Where complete frames come from, in log order: the next ones, or `undefined` after the last. Throws a typed error where the log is damaged. */
export interface FrameSource {
  next(): Promise<FrameWindow | undefined>
}

/** Frames `[from, to)` of one window, for one decode. */
interface Claim {
  readonly window: FrameWindow
  readonly from: number
  readonly to: number
  readonly plain: number
}

const NO_PLAINTEXT = Buffer.alloc(0)

/**
 * Complete frames decoded on the libuv thread pool, in order, a group of
 * about `POOL_GROUP_BYTES` of plaintext per call and `POOL_AHEAD` groups in
 * flight, so the frames after those being read decode on another core. The
 * frames are pulled from `source` as groups are started (a log is read a
 * window at a time, never whole). A frame whose header does not state its
 * size is decoded alone on the calling thread, as a capped stream.
 *
 * Invariants: groups come back in log order, each frame's plaintext exactly
 * the size its header states, its content checksum checked by libzstd; a
 * group that fails is decoded again frame by frame on the calling thread, so
 * the error is the same typed one `decodeFrames` throws for that frame; a
 * fault of the source is thrown after the groups of the frames before it.
 */
export class PooledFrames {
  private window: FrameWindow | undefined
  private at: number
  /** Groups are claimed one after another (a claim may wait for the source); decoding them overlaps. */
  private claims: Promise<unknown> = Promise.resolve()
  private readonly inFlight: Promise<GroupResult | undefined>[] = []
  private fault: { readonly error: unknown } | undefined
  private sourceDone = false
  private stopped = false

  /** `window`, `from`: frames already read from the source, the first of them to decode. */
  constructor(
    private readonly source: FrameSource,
    window?: FrameWindow,
    from = 0,
  ) {
    this.window = window
    this.at = from
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
    let group: GroupResult | undefined
    try {
      group = await pending
    } catch (error) {
      this.fail({ error })
      throw error
    }
    if (group?.fault !== undefined) {
      this.fail(group.fault)
      if (group.ends.length === 0) throw group.fault.error
    }
    return group
  }

  /** Starts nothing more: the reader stopped (groups in flight finish unobserved). */
  stop(): void {
    this.stopped = true
    this.inFlight.length = 0
    this.window = undefined
  }

  private fail(fault: { readonly error: unknown }): void {
    this.fault = fault
    this.stop()
  }

  private start(): void {
    while (!this.stopped && !this.sourceDone && this.inFlight.length < POOL_AHEAD) {
      const claimed = this.claims.then(() => this.claim())
      this.claims = claimed.catch(() => {})
      const group = claimed.then((claim) => (claim === undefined ? undefined : this.decode(claim)))
      // Observed by take(); never an unhandled rejection while an earlier group is read (or after the reader stopped).
      group.catch(() => {})
      this.inFlight.push(group)
    }
  }

  /** The next frames to decode: up to `POOL_GROUP_BYTES` of the current window, or a frame of unstated size alone. */
  private async claim(): Promise<Claim | undefined> {
    if (this.stopped || this.sourceDone) return undefined
    let window = this.window
    while (window === undefined || this.at >= window.spans.length) {
      try {
        window = await this.source.next()
      } catch (error) {
        this.sourceDone = true
        throw error
      }
      this.at = 0
      if (window === undefined || this.stopped) {
        this.sourceDone = true
        this.window = undefined
        return undefined
      }
    }
    const { spans } = window
    const from = this.at
    let to = from
    let plain = 0
    if ((spans[from] as FrameSpan).content === null) to = from + 1
    else {
      for (
        let span = spans[to];
        span !== undefined && span.content !== null && (to === from || plain < POOL_GROUP_BYTES);
        span = spans[to]
      ) {
        plain += span.content
        to++
      }
    }
    this.at = to
    this.window = to < spans.length ? window : undefined
    return { window, from, to, plain }
  }

  private async decode({ window, from, to, plain: total }: Claim): Promise<GroupResult> {
    const { bytes, spans, origin } = window
    const first = origin.frame + from
    if ((spans[from] as FrameSpan).content === null) {
      try {
        const plain = decodeSpan(bytes, spans, from, origin)
        return { first, plain, ends: [plain.length] }
      } catch (error) {
        return { first, plain: NO_PLAINTEXT, ends: [], fault: { error } }
      }
    }
    const head = spans[from] as FrameSpan
    const last = spans[to - 1] as FrameSpan
    let plain: Buffer | undefined
    try {
      mongodbZstd ??= import('@mongodb-js/zstd')
      plain = await (await mongodbZstd).decompress(bytes.subarray(head.offset, last.offset + last.size))
    } catch {
      plain = undefined
    }
    let fault: GroupResult['fault']
    // The pool's error names no frame: decoding the group here finds its first bad frame and that frame's typed error.
    if (plain?.length !== total) {
      const onFault = (error: unknown): void => {
        fault = { error }
      }
      plain = decodeKnown(bytes, spans, from, to, onFault, origin)
    }
    const ends: number[] = []
    let at = 0
    for (let i = from; i < to; i++) {
      const end = at + ((spans[i] as FrameSpan).content as number)
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

function decodeTorn(ctx: Binding.DCtx, rest: Buffer, offset: number, index: number): TornTail {
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
  const kept = parts.plaintext.lastIndexOf(0x0a) + 1
  const stated = statedSize(rest)
  return { torn: parts.plaintext, tornBytes: rest.length, skippedBytes: stated === null ? rest.length : Math.max(0, stated - kept) }
}

/** The plaintext size a frame's header states, or `null` (not stated, or the header itself is cut). */
function statedSize(frame: Buffer): number | null {
  try {
    return binding.getFrameContentSize(frame)
  } catch {
    return null
  }
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

/** Compressed bytes that any frame of at most `V0_FRAME_MAX_BYTES` of plaintext fits in (zstd's bound): a reader never holds more of one frame. */
export const FRAME_BYTES_MAX = binding.compressBound(V0_FRAME_MAX_BYTES)

/**
 * The error for `rest`: more than `FRAME_BYTES_MAX` bytes starting a frame
 * that does not end in them (`origin`: where they are). The size the frame's
 * header states, when over the cap; else what decoding them finds (damage,
 * or plaintext past the cap: every frame a writer makes ends there); else
 * that the frame is longer than any frame within the cap.
 */
export function oversizedFrame(rest: Buffer, origin: FrameOrigin): ImportV0Error {
  const { offset, frame } = origin
  let stated: number | null
  try {
    stated = binding.getFrameContentSize(rest)
  } catch (error) {
    return frameError(error, offset, frame)
  }
  if (stated !== null && stated > V0_FRAME_MAX_BYTES) return frameTooLarge(offset, frame, stated)
  try {
    decodeTornTail({ rest, offset }, frame)
  } catch (error) {
    if (error instanceof ImportV0Error) return error
    throw error
  }
  return new ImportV0Error(
    'IMPORT_V0_FRAME_TOO_LARGE',
    `Frame ${frame} at offset ${offset} runs on past ${FRAME_BYTES_MAX} bytes, more than any frame of at most ${V0_FRAME_MAX_BYTES} bytes of plaintext (V0_FRAME_MAX_BYTES) takes; such a frame is refused, never read whole. Leave the session out of the import.`,
    { details: { offset, frame, max: V0_FRAME_MAX_BYTES, compressed: FRAME_BYTES_MAX } },
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
