import type { FileHandle } from 'node:fs/promises'
import { crc32 } from 'node:zlib'
import { throwIfAborted } from '@dsh/context'
import type { StoredSessionEvent } from '@dsh/session'
import { persistenceCancelled as cancelled } from '@dsh/session-persistence/backend'
import { isCutBatch, prefixBroken, prefixFailure, sourceLogFile } from './fork-prefix.js'
import type { ForkReference } from './log-format.js'
import type { LogReader } from './log-reader.js'
import { corrupt, decodeEvents, decodeHeader, type LogUnit } from './log-scan.js'

/**
 * The committed part of one open log a ranged read walks: its batches from
 * `headerEnd` to `committedEnd`, holding events `[firstSeq, nextSeq)`, and
 * the fork reference that holds the events before `firstSeq`.
 */
export interface LogSpan {
  readonly handle: FileHandle
  readonly file: string
  readonly headerEnd: number
  readonly committedEnd: number
  readonly firstSeq: number
  readonly nextSeq: number
  readonly fork: ForkReference | undefined
}

/**
 * Events `[lo, hi)` of a log (`lo <= hi <= span.nextSeq`), reading only the
 * batches that hold them: the trailers are walked back from the committed
 * end to the batch holding `lo` (one read of a trailer each, so a page far
 * from the end costs a trailer per later batch), then that run of batches
 * is read, checked (frame extent, stored CRC32, seqs) and decoded. Events
 * below the log's first own seq come from the log its fork reference names,
 * read the same way from the referenced end (`sourceRange`).
 */
export async function readRange(
  reader: LogReader,
  span: LogSpan,
  lo: number,
  hi: number,
  signal: AbortSignal | undefined,
  depth = 0,
): Promise<StoredSessionEvent[]> {
  const ownFrom = Math.max(lo, span.firstSeq)
  const own = ownFrom < hi ? await ownRange(reader, span, ownFrom, hi, signal) : []
  if (lo >= span.firstSeq || lo >= hi) return own
  if (span.fork === undefined) throw corrupt(span.file, 0, `the log starts at event ${span.firstSeq} and names no fork source`)
  const prefix = await sourceRange(reader, span.fork, span.file, lo, Math.min(hi, span.firstSeq), signal, depth + 1)
  return prefix.concat(own)
}

/** Events `[lo, hi)` of a log's own batches (`firstSeq <= lo < hi <= nextSeq`). */
async function ownRange(
  reader: LogReader,
  span: LogSpan,
  lo: number,
  hi: number,
  signal: AbortSignal | undefined,
): Promise<StoredSessionEvent[]> {
  const { codec } = reader
  const { handle, file, headerEnd } = span
  const trailerSize = codec.trailer.size
  let pos = span.committedEnd
  let seq = span.nextSeq
  /** Where the batch holding `hi - 1` ends: the run read stops there. */
  let runEnd: number | undefined
  while (seq > lo) {
    if (pos - trailerSize < headerEnd) throw corrupt(file, pos, `no committed batch holds event ${lo}`)
    const trailer = codec.trailer.decode(await reader.countedRead(handle, pos - trailerSize, trailerSize), 0)
    throwIfAborted(signal, cancelled)
    if (trailer === undefined || trailer.kind !== 'batch' || trailer.firstSeq + trailer.count !== seq) {
      throw corrupt(file, pos - trailerSize, 'a batch trailer is missing, damaged or out of sequence')
    }
    if (runEnd === undefined && trailer.firstSeq < hi) runEnd = pos
    pos -= trailerSize + trailer.bodyLength
    seq = trailer.firstSeq
  }
  const start = pos
  const end = runEnd ?? start
  const run = await reader.countedRead(handle, start, end - start)
  throwIfAborted(signal, cancelled)
  if (run.length !== end - start) throw corrupt(file, start + run.length, 'the log is shorter than its committed batches')
  // The run is a sequence of whole batches: scan it like a log whose header is already checked.
  const units: LogUnit[] = []
  let at = 0
  let next = seq
  while (at < run.length) {
    const extent = codec.measureBody(run, at)
    const trailer = extent.status === 'complete' ? codec.trailer.decode(run, extent.end) : undefined
    if (
      extent.status !== 'complete' ||
      trailer === undefined ||
      trailer.kind !== 'batch' ||
      trailer.firstSeq !== next ||
      trailer.bodyLength !== extent.end - at
    ) {
      throw corrupt(file, start + at, 'a committed batch does not parse')
    }
    if (crc32(run.subarray(at, extent.end)) !== trailer.bodyCrc) throw corrupt(file, start + at, 'the stored batch fails its CRC32')
    units.push({ bodyStart: at, bodyEnd: extent.end, plainLength: trailer.plainLength, trailer })
    next += trailer.count
    at = extent.end + trailerSize
  }
  if (units.length === 0) return []
  const events = await decodeEvents(
    run,
    { header: units[0]!, batches: units, committedEnd: run.length, nextSeq: next, paddingBytes: 0 },
    codec,
    file,
    () => throwIfAborted(signal, cancelled),
  )
  return events.filter((event) => event.seq >= lo && event.seq < hi)
}

/**
 * Events `[lo, hi)` (`hi <= fork.cut`) of the log a fork references, checked
 * against the reference before any is returned: the log must carry the
 * referenced `logId` and id, and end a committed batch at `fork.end` whose
 * trailer has `fork.batchCrc` and holds event `cut - 1`. The walk starts
 * there, so the source's events after the cut are never read. Anything else
 * is `SESSION_PERSISTENCE_CORRUPT`, naming the fork's log.
 */
export async function sourceRange(
  reader: LogReader,
  fork: ForkReference,
  childFile: string,
  lo: number,
  hi: number,
  signal: AbortSignal | undefined,
  depth: number,
): Promise<StoredSessionEvent[]> {
  const broken = prefixBroken(fork, childFile)
  const file = sourceLogFile((id) => reader.logPath(id), fork, depth, broken)
  const opened = await reader.openWithStats(file).catch((error: unknown) => {
    throw broken((error as Error).message, error)
  })
  if (opened === undefined) throw broken('the source is not persisted')
  const { handle, stats } = opened
  try {
    if (Number(stats.size) < fork.end) throw broken('the source log is shorter than the referenced prefix')
    const { codec } = reader
    const { buf, unit } = await reader.readHeaderUnit(handle, Number(stats.size), file, false)
    const physical = await decodeHeader(buf, unit, codec, file)
    if (physical.logId !== fork.logId || physical.header.id !== fork.source)
      throw broken('the source was re-created or replaced (its log identity differs)')
    const trailerSize = codec.trailer.size
    const trailer = codec.trailer.decode(await reader.countedRead(handle, fork.end - trailerSize, trailerSize), 0)
    if (trailer === undefined || trailer.kind !== 'batch' || !isCutBatch(trailer, fork))
      throw broken('the batch at the cut differs from the referenced one')
    const span: LogSpan = {
      handle,
      file,
      headerEnd: unit.bodyEnd + trailerSize,
      committedEnd: fork.end,
      firstSeq: physical.fork?.cut ?? 0,
      nextSeq: trailer.firstSeq + trailer.count,
      fork: physical.fork,
    }
    const events = await readRange(reader, span, lo, hi, signal, depth)
    if (events.length !== hi - lo) throw broken(`the source holds ${events.length} of events ${lo}-${hi - 1}`)
    return events
  } catch (error) {
    throw prefixFailure(error, childFile, broken)
  } finally {
    await handle.close()
  }
}
