import { crc32 } from 'node:zlib'
import type { StoredSessionEvent } from '@dsh/session'
import { LINE_MAX_BYTES, persistenceError } from '@dsh/session-persistence/backend'
import type { LogCodec, UnitRange } from './codec.js'
import { countEventLines, type PhysicalHeader, parseEventLines, parseHeaderLine } from './log-format.js'
import { paddingFrameEnd, paddingIntact } from './log-padding.js'
import { decodeLongUnit } from './long-lines.js'
import type { TrailerFields } from './trailer.js'

/** A structurally complete unit: its body and the trailer that closes it. */
export interface LogUnit extends UnitRange {
  readonly trailer: TrailerFields
}

export interface LogScan {
  readonly header: LogUnit
  /** Every committed batch, in order. */
  readonly batches: readonly LogUnit[]
  /** Where the committed log ends; bytes after it are padding (`paddingBytes`) or a torn tail. */
  readonly committedEnd: number
  /** The stored next offset. */
  readonly nextSeq: number
  /** Bytes of the valid padding frame after `committedEnd` (0: none; see `log-padding.ts`); bytes after it are a torn tail. */
  readonly paddingBytes: number
}

/** The reason `scanLog` gives for damaged padding (a reader racing an append may see it once: it reads again). */
export const PADDING_DAMAGED = 'the padding after the committed end holds bytes no writer leaves there'

/** Decoded runs stay below this many plaintext bytes, bounding peak memory on huge logs. */
const RUN_PLAIN_BYTES = 8 * 1024 * 1024

export function corrupt(file: string, offset: number, reason: string): Error {
  return persistenceError(
    'SESSION_PERSISTENCE_CORRUPT',
    `Session log ${file} is corrupt at byte ${offset}: ${reason}. Committed data is never dropped or rewritten automatically; restore the file from a backup or delete the session explicitly.`,
    { details: { file, offset, reason } },
  )
}

/**
 * `SESSION_PERSISTENCE_CORRUPT` for a log this process may not read (`code`:
 * EACCES or EPERM): a listing leaves it out as a damaged entry and goes on,
 * and the message names its remedy (owner and mode), not a restore.
 */
export function unreadable(file: string, code: string): Error {
  return persistenceError(
    'SESSION_PERSISTENCE_CORRUPT',
    `Session log ${file} cannot be read by this process (${code}): another user owns it or its mode forbids reading. Give it back the store's owner and mode 0600; nothing was changed.`,
    { details: { file, offset: 0, reason: `permission denied (${code})` } },
  )
}

/**
 * Locates the header unit at the start of `buf` (possibly only a prefix of
 * the file). `more` means the prefix ended inside the header unit.
 */
export function locateHeader(buf: Buffer, codec: LogCodec, file: string, isWholeFile: boolean): LogUnit | 'more' {
  const extent = codec.measureBody(buf, 0)
  if (extent.status === 'complete') {
    const trailer = codec.trailer.decode(buf, extent.end)
    if (trailer?.kind === 'header' && trailer.bodyLength === extent.end) {
      if (crc32(buf.subarray(0, extent.end)) !== trailer.bodyCrc) throw corrupt(file, 0, 'the header unit fails its CRC32')
      return { bodyStart: 0, bodyEnd: extent.end, plainLength: trailer.plainLength, trailer }
    }
    if (trailer === undefined && extent.end + codec.trailer.size > buf.length && !isWholeFile) return 'more'
    throw corrupt(file, extent.end, 'the header trailer is missing or damaged')
  }
  if (extent.status === 'incomplete' && !isWholeFile) return 'more'
  // Logs are published whole (header and first batch at once), so a header
  // that does not parse is damage, never a torn write.
  throw corrupt(file, 0, extent.status === 'invalid' ? `the header unit is damaged (${extent.reason})` : 'the header unit is truncated')
}

/** Decodes and verifies the header unit. */
export async function decodeHeader(buf: Buffer, unit: LogUnit, codec: LogCodec, file: string): Promise<PhysicalHeader> {
  const [plain] = await decodeUnits(buf, [unit], codec, file)
  return physicalHeaderOf(plain!, file)
}

/** The physical header of a header line whose bytes passed their CRC; a line of another version or a damaged one is a typed error. */
export function physicalHeaderOf(plain: Buffer, file: string): PhysicalHeader {
  const parsed = parseHeaderLine(plain)
  if (parsed.ok) return parsed.value
  if (parsed.unsupported) {
    throw persistenceError(
      'SESSION_PERSISTENCE_UNSUPPORTED_VERSION',
      `Session log ${file} was written in an unsupported format: ${parsed.reason}.`,
      { details: { file } },
    )
  }
  throw corrupt(file, 0, parsed.reason)
}

/**
 * Splits a whole log into units and finds where the committed part ends.
 * `firstSeq` is the seq of the log's first stored event (a fork's cut; else 0).
 *
 * A batch is committed iff its body and its trailer are complete. The first
 * batch that is not whole and self-consistent is either a torn write (only
 * ever the final, incomplete batch: writes are appends) or damage. It is
 * damage when anything shows that a complete batch was written there:
 * 1. its body and trailer are both complete but disagree (length, seq, CRC);
 * 2. a valid trailer (self-checked) exists at or after it — the bytes of a
 *    committed batch follow, which a torn write cannot produce;
 * 3. its body is complete and decodes, and the bytes after it are close to
 *    the trailer that body would have — a committed batch whose trailer was
 *    damaged — and the write went past that trailer: the log ends exactly
 *    there, or bytes follow that are not the zeros of a padding it was
 *    written into (a committed batch is followed by the end of the log, the
 *    next unit or its padding frame's header, never by zeros).
 * Otherwise it is a torn tail: ignored by reads, truncated by `load`.
 */
export async function scanLog(buf: Buffer, codec: LogCodec, file: string, firstSeq = 0): Promise<LogScan> {
  const header = locateHeader(buf, codec, file, true)
  if (header === 'more') throw corrupt(file, 0, 'the header unit is truncated')
  const trailerSize = codec.trailer.size
  const padded = codec.padsTail
  const batches: LogUnit[] = []
  let pos = header.bodyEnd + trailerSize
  let nextSeq = firstSeq
  let paddingBytes = 0
  while (pos < buf.length) {
    // A padding frame ends the committed log (never a torn write: a torn
    // append overwrote this frame's header first); bytes after it are a torn tail.
    const padEnd = padded ? paddingFrameEnd(buf, pos) : undefined
    if (padEnd !== undefined) {
      if (!paddingIntact(buf, pos, padEnd)) throw corrupt(file, pos, PADDING_DAMAGED)
      paddingBytes = padEnd - pos
      break
    }
    const extent = codec.measureBody(buf, pos)
    if (extent.status === 'complete') {
      const trailer = codec.trailer.decode(buf, extent.end)
      if (trailer !== undefined) {
        if (trailer.kind === 'batch' && trailer.bodyLength === extent.end - pos && trailer.firstSeq === nextSeq && trailer.count > 0) {
          if (crc32(buf.subarray(pos, extent.end)) !== trailer.bodyCrc) throw corrupt(file, pos, 'the stored batch fails its CRC32')
          batches.push({ bodyStart: pos, bodyEnd: extent.end, plainLength: trailer.plainLength, trailer })
          nextSeq += trailer.count
          pos = extent.end + trailerSize
          continue
        }
        throw corrupt(
          file,
          pos,
          trailer.firstSeq !== nextSeq
            ? `the batch starts at seq ${trailer.firstSeq}, expected ${nextSeq}`
            : 'the batch trailer does not match its body',
        )
      }
    }
    for (const candidate of codec.trailer.candidates(buf, pos)) {
      if (codec.trailer.decode(buf, candidate) !== undefined)
        throw corrupt(file, pos, 'a batch does not parse, but committed data follows it')
    }
    if (await hasDamagedTrailer(buf, pos, nextSeq, codec)) throw corrupt(file, pos, 'the trailer of a complete batch is damaged')
    break
  }
  return { header, batches, committedEnd: pos, nextSeq, paddingBytes }
}

async function hasDamagedTrailer(buf: Buffer, pos: number, firstSeq: number, codec: LogCodec): Promise<boolean> {
  const extent = codec.measureBodyByContent(buf, pos)
  if (extent.status !== 'complete' || extent.end + codec.trailer.size > buf.length) return false
  // A torn append into padding: zeros follow where its trailer should have ended.
  const after = extent.end + codec.trailer.size
  if (after < buf.length && isZero(buf, after, Math.min(buf.length, after + 8))) return false
  let plain: Buffer
  try {
    plain = await codec.decodeBody(buf.subarray(pos, extent.end))
  } catch {
    return false
  }
  const count = countEventLines(plain)
  const expected = codec.trailer.encode({
    kind: 'batch',
    plainLength: plain.length,
    plainCrc: crc32(plain),
    bodyLength: extent.end - pos,
    bodyCrc: crc32(buf.subarray(pos, extent.end)),
    firstSeq,
    count,
  })
  let same = 0
  for (let i = 0; i < expected.length; i++) if (buf[extent.end + i] === expected[i]) same++
  return same * 2 >= expected.length
}

function isZero(buf: Buffer, from: number, to: number): boolean {
  for (let i = from; i < to; i++) if (buf[i] !== 0) return false
  return true
}

/** Decodes units (in runs) and checks each plaintext against its trailer's length and CRC. */
async function decodeUnits(buf: Buffer, units: readonly LogUnit[], codec: LogCodec, file: string): Promise<Buffer[]> {
  let plains: Buffer[]
  try {
    plains = await codec.decodeRun(buf, units)
  } catch (error) {
    if (units.length === 1) throw corrupt(file, units[0]!.bodyStart, `the unit does not decode (${(error as Error).message})`)
    // Decode one by one to name the damaged unit.
    plains = []
    for (const unit of units) plains.push(...(await decodeUnits(buf, [unit], codec, file)))
    return plains
  }
  units.forEach((unit, i) => {
    const plain = plains[i]!
    if (plain.length !== unit.trailer.plainLength)
      throw corrupt(file, unit.bodyStart, `the unit decodes to ${plain.length} bytes, its trailer records ${unit.trailer.plainLength}`)
    if (crc32(plain) !== unit.trailer.plainCrc) throw corrupt(file, unit.bodyStart, 'CRC32 mismatch')
  })
  return plains
}

/**
 * Decodes every committed batch into deep-frozen events. Checks the abort
 * signal between runs so a cancelled read of a huge log stops early. A batch
 * of more than `LINE_MAX_BYTES` of plaintext is decoded a chunk at a time,
 * its lines over the cap elided (`decodeLongUnit`).
 */
export async function decodeEvents(
  buf: Buffer,
  scan: LogScan,
  codec: LogCodec,
  file: string,
  checkpoint: () => void,
): Promise<StoredSessionEvent[]> {
  const events: StoredSessionEvent[] = []
  let run: LogUnit[] = []
  let runBytes = 0
  const flush = async (): Promise<void> => {
    const plains = await decodeUnits(buf, run, codec, file)
    checkpoint()
    run.forEach((unit, i) => {
      const reason = parseEventLines(plains[i]!, unit.trailer.firstSeq, unit.trailer.count, events)
      if (reason !== undefined) throw corrupt(file, unit.bodyStart, reason)
    })
    run = []
    runBytes = 0
  }
  for (const unit of scan.batches) {
    if (unit.plainLength > LINE_MAX_BYTES) {
      // A batch that may hold a line over the read cap is read a chunk at a time, never whole (`long-lines.ts`).
      if (run.length > 0) await flush()
      const reason = decodeLongUnit(codec, buf, unit, events)
      if (reason !== undefined) throw corrupt(file, unit.bodyStart, reason)
      checkpoint()
      continue
    }
    if (run.length > 0 && runBytes + unit.plainLength > RUN_PLAIN_BYTES) await flush()
    run.push(unit)
    runBytes += unit.plainLength
  }
  if (run.length > 0) await flush()
  return events
}
