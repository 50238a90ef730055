import { LINE_MAX_BYTES } from '@dsh/protocol/limits'
import { expandRow, isRowType, type RowMaker, type RowMemberMaker, v0RowMember } from './chunk-rows.js'
import { ImportV0Error, lineTooLarge } from './errors.js'
import { FrameWindows } from './frame-windows.js'
import { type V0Compression, v0LogPath } from './layout.js'
import type { V0LogEntry } from './listing.js'
import { LogFile } from './log-file.js'
import { parseHeaderLine, type V0Event, type V0Header } from './v0-types.js'
import { decodeFrames, decodeSpan, decodeTornTail, PooledFrames } from './zstd-frames.js'

/**
 * Reading a v0 root. Reads never write: files are opened read-only and
 * nothing is created, locked or repaired in the v0 root.
 *
 * Invariants: a log yields its header and the contiguous event prefix the
 * harness would read (complete records of a torn final frame included, rows
 * expanded); any fault in a COMPLETE part of the log is an `ImportV0Error`
 * naming it, never a silently shorter log.
 */

export interface V0Log {
  readonly path: string
  readonly compression: V0Compression
  readonly header: V0Header
  /** Every committed event, rows expanded, `events[i].seq === i`. */
  readonly events: V0Event[]
  /** Lines that were packed chunk rows. */
  readonly packedRows: number
  /** The source text each event came from, in UTF-16 units (a row's members share its line): what an import sizes its append batches by. */
  readonly textLengths: readonly number[]
  /** Bytes of an incomplete final frame / line that were not (entirely) read. */
  readonly tornBytes: number
  /** How much of that torn tail was not kept: a plain log's bytes after its last newline; a zstd log's, see `TornTail.skippedBytes`. */
  readonly skippedBytes: number
}

/**
 * Reads one v0 log whole: every event in memory (an import streams instead,
 * see `openV0Log`). The file itself is read a chunk at a time, as there.
 */
export async function readV0Log(root: string, entry: V0LogEntry): Promise<V0Log> {
  const reader = await openV0Log(root, entry)
  try {
    const events: V0Event[] = []
    const textLengths: number[] = []
    do collect(reader, events, textLengths)
    while (await reader.more())
    return logOf(reader, events, textLengths)
  } finally {
    await reader.close()
  }
}

/**
 * Opens one v0 log for reading its events in order. The file is read a
 * chunk at a time (`LogFile`, `READ_CHUNK`), never whole: a plain log is
 * first scanned for a line over `LINE_MAX_BYTES`, then its header line is
 * read before this returns; a zstd log's header frame is read and checked,
 * its other frames are found as the reader gets to them and decoded on the
 * libuv thread pool a few at a time ahead of it, and their lines parsed a
 * slice at a time as `next()` asks for events — so a fault (a frame that
 * does not decode, bad JSON, a seq gap, a bad row) is thrown by the `next()`
 * or `more()` that reaches it, after the events before it. Read with
 * `do { for (e = next(); e; e = next()) … } while (await more())`; the file is
 * closed at the end or at a fault, and by `close()` for a reader that stops
 * before either.
 */
export async function openV0Log(root: string, entry: V0LogEntry): Promise<V0EventReader>
export async function openV0Log<E extends Sequenced>(root: string, entry: V0LogEntry, make: EventMaker<E>): Promise<V0EventReader<E>>
export async function openV0Log<E extends Sequenced>(
  root: string,
  entry: V0LogEntry,
  make?: EventMaker<E>,
): Promise<V0EventReader<E | V0Event>> {
  const file = await LogFile.open(entry.path)
  try {
    if (entry.compression === 'none') await file.checkLineLengths()
    const reader = await V0EventReader.open<E | V0Event>(file, entry.compression, make ?? V0_EVENTS)
    assertPlaced(root, reader.header, entry)
    return reader
  } catch (error) {
    await file.close()
    throw error
  }
}

/** Refuses a log that is not where its header's id and cwd put it (the harness refuses it too). */
export function assertPlaced(root: string, header: V0Header, entry: V0LogEntry): void {
  const expected = v0LogPath(root, header.id, header.cwd, entry.compression)
  if (expected === entry.path) return
  throw new ImportV0Error(
    'IMPORT_V0_MISPLACED',
    `The log's header names session ${JSON.stringify(header.id)}${header.cwd === undefined ? ' without a cwd' : ` in ${header.cwd}`}, which the v0 layout keeps at ${expected}, not at ${entry.path}.`,
    { details: { expected } },
  )
}

/** Parses the bytes of a v0 log (`zstd` frames or plain JSON lines) whole. */
export function parseV0Log(bytes: Buffer, compression: V0Compression, path = '<memory>'): V0Log {
  const reader = V0EventReader.fromBytes(bytes, compression, path, V0_EVENTS)
  const events: V0Event[] = []
  const textLengths: number[] = []
  collect(reader, events, textLengths)
  return logOf(reader, events, textLengths)
}

/** The events `next()` returns until it returns `undefined`, with their source text lengths. */
function collect(reader: V0EventReader, events: V0Event[], textLengths: number[]): void {
  for (let event = reader.next(); event !== undefined; event = reader.next()) {
    events.push(event)
    textLengths.push(reader.textLength)
  }
}

function logOf(reader: V0EventReader, events: V0Event[], textLengths: number[]): V0Log {
  const { path, compression, header, packedRows, tornBytes, skippedBytes } = reader
  return { path, compression, header, events, packedRows, textLengths, tornBytes, skippedBytes }
}

/**
 * Lines are decoded and parsed about this much text at a time (a JS string
 * has a length limit; a log does not). Parsing a slice holds the main thread
 * (~1 ms per 128 KiB) and its events stay alive until they are used, so a
 * small slice lets an import's append in flight go on sooner and keeps less
 * alive across GCs: 100 MiB session, medians of 6 interleaved runs, wall
 * 3.22 s at 1 MiB, 3.11 s at 256 KiB, 3.06 s at 128 KiB (every 128 KiB and
 * 256 KiB run faster than every 1 MiB run).
 */
export const TEXT_SLICE = 128 * 1024

/** What a reader yields for each event line and each packed-row member (an import makes dsh events straight away). */
export interface EventMaker<E> {
  readonly line: (event: V0Event) => E
  readonly member: RowMemberMaker<E>
  /** One item for a whole row where it can (an import: a run of events given as columns; see `expandRow`). */
  readonly row?: RowMaker<E>
}

/** Anything with the seq it is read at. */
export interface Sequenced {
  readonly seq: number
}

/** The v0 events themselves. */
export const V0_EVENTS: EventMaker<V0Event> = { line: (event) => event, member: v0RowMember }

const NO_BYTES = Buffer.alloc(0)

function noHeaderFrame(): ImportV0Error {
  return new ImportV0Error('IMPORT_V0_BAD_HEADER', 'The log holds no complete frame: its header was never committed.')
}

function noHeaderLine(): ImportV0Error {
  return new ImportV0Error('IMPORT_V0_BAD_HEADER', 'The log has no complete first line: its header was never committed.')
}

/** A run of whole lines still to parse: `bytes[at, end)`. */
interface Span {
  readonly bytes: Buffer
  at: number
  readonly end: number
}

/**
 * The events of one v0 log, in order, parsed on demand about `TEXT_SLICE`
 * of text at a time (rows expanded). Holds decoded plaintext, never every
 * event: an import converts and appends as it reads.
 *
 * Over bytes in memory (`fromBytes`): every frame is decoded on the calling
 * thread and checked when the reader is made, and `next()` returns
 * `undefined` only at the end. Over a file (`open`): the file is read a
 * chunk at a time; `next()` returns `undefined` when what was read and
 * decoded so far is used up, and `more()` reads and decodes on (false at
 * the end). A zstd log's frame 0 (the header) is decoded when it opens, the
 * others on the libuv pool ahead of the reader; a plain log's lines are
 * parsed from each chunk, a line longer than a chunk carried into the next.
 *
 * Invariants: the events come as seq 0, 1, 2, …; a fault in a complete
 * frame or line is thrown when reached, never skipped; the complete lines
 * of a torn tail come last, the torn bytes are only counted.
 */
export class V0EventReader<E extends Sequenced = V0Event> {
  /** Bytes of an incomplete final frame / line that were not (entirely) read: known once the log was read to its end (0 before). */
  tornBytes = 0
  /** How much of the torn tail was not kept (0 before the end, and when nothing was lost): see `V0Log.skippedBytes`. */
  skippedBytes = 0
  /** The source text (UTF-16 units) of the event `next()` returned last; a row's members share its line. */
  textLength = 0
  private readonly spans: Span[] = []
  private readonly parser: LineParser<E>
  private buffered: E[] = []
  private lengths: number[] = []
  private at = 0
  private fault: unknown
  /** A fault in the frames after the decoded text queued now. */
  private faultAfter: ImportV0Error | undefined
  /** A zstd file's frames (the torn tail once they are used up), and those decoding on the pool ahead of the reader. */
  private frames: FrameWindows | undefined
  private pool: PooledFrames | undefined
  /** A plain file's bytes after the last complete line read. */
  private carry: Buffer = NO_BYTES
  private closed = false

  private constructor(
    readonly compression: V0Compression,
    readonly path: string,
    make: EventMaker<E>,
    /** The file read (`undefined` over bytes in memory): its `reads` and `largest` say how it was read. */
    readonly file?: LogFile,
  ) {
    this.parser = new LineParser(make)
  }

  get header(): V0Header {
    return this.parser.v0Header()
  }

  /** A reader over a whole log in memory, every frame decoded and checked before this returns. */
  static fromBytes<E extends Sequenced>(bytes: Buffer, compression: V0Compression, path: string, make: EventMaker<E>): V0EventReader<E> {
    const reader = new V0EventReader(compression, path, make)
    if (compression === 'zstd') {
      const { frames, plain, ends, torn, tornBytes, skippedBytes } = decodeFrames(bytes)
      const first = frames[0]
      if (first === undefined) throw noHeaderFrame()
      reader.readHeaderFrame(first)
      reader.addFrames(plain, 0, ends)
      if (reader.faultAfter !== undefined) throw reader.faultAfter
      reader.tornBytes = tornBytes
      reader.skippedBytes = skippedBytes
      if (torn !== undefined) reader.addTorn(torn)
    } else {
      const headerEnd = bytes.indexOf(0x0a)
      if (headerEnd < 0) throw noHeaderLine()
      reader.parser.header(bytes.toString('utf8', 0, headerEnd))
      const end = bytes.lastIndexOf(0x0a)
      reader.spans.push({ bytes, at: headerEnd + 1, end: end + 1 })
      reader.tornBytes = bytes.length - end - 1
      reader.skippedBytes = reader.tornBytes
    }
    return reader
  }

  /** A reader over an open log file, read from its start; its header is read and parsed before this returns. The caller closes `file` when this throws. */
  static async open<E extends Sequenced>(file: LogFile, compression: V0Compression, make: EventMaker<E>): Promise<V0EventReader<E>> {
    const reader = new V0EventReader(compression, file.path, make, file)
    if (compression === 'zstd') {
      const frames = new FrameWindows(file)
      const window = await frames.next()
      if (window === undefined) {
        // Damage in a torn first frame is named, as a whole read names it; short of that there is no header.
        if (frames.torn !== undefined) decodeTornTail(frames.torn.scan, frames.torn.index)
        throw noHeaderFrame()
      }
      reader.readHeaderFrame(decodeSpan(window.bytes, window.spans, 0, window.origin))
      reader.frames = frames
      reader.pool = new PooledFrames(frames, window, 1)
    } else {
      let bytes = await file.extend(NO_BYTES, LINE_MAX_BYTES + 1)
      let headerEnd = bytes.indexOf(0x0a)
      while (headerEnd < 0 && !file.ended && bytes.length <= LINE_MAX_BYTES) {
        const from = bytes.length
        bytes = await file.extend(bytes, LINE_MAX_BYTES + 1)
        headerEnd = bytes.indexOf(0x0a, from)
      }
      if (headerEnd < 0) throw bytes.length > LINE_MAX_BYTES ? lineTooLarge(1, bytes.length) : noHeaderLine()
      reader.parser.header(bytes.toString('utf8', 0, headerEnd))
      const end = bytes.lastIndexOf(0x0a)
      if (end > headerEnd) reader.spans.push({ bytes, at: headerEnd + 1, end: end + 1 })
      reader.carry = bytes.subarray(end + 1)
    }
    return reader
  }

  /** Lines that were packed chunk rows, among those parsed so far. */
  get packedRows(): number {
    return this.parser.packedRows
  }

  /**
   * The next event (seq = the number returned before it), or `undefined`
   * when what was read so far is used up (at the end, unless `more()` says
   * otherwise). Throws `ImportV0Error` at a bad line.
   */
  next(): E | undefined {
    while (this.at === this.buffered.length) {
      if (this.fault !== undefined) throw this.fault
      if (!this.parseSlice()) return undefined
    }
    const i = this.at++
    this.textLength = this.lengths[i] as number
    return this.buffered[i]
  }

  /**
   * After `next()` returned `undefined`: reads on — the next frames decoded
   * on the pool, or the next chunk of a plain log (true: `next()` has more
   * to return) — false at the end of the log. Throws `ImportV0Error` at a
   * frame that does not decode, a line over the cap, or a failed read.
   */
  async more(): Promise<boolean> {
    if (this.fault !== undefined) throw this.fault
    if (this.closed) return false
    try {
      if (this.faultAfter !== undefined) throw this.faultAfter
      // The text already parsed is let go before more is read.
      while (this.spans.length > 0 && (this.spans[0] as Span).at >= (this.spans[0] as Span).end) this.spans.shift()
      const more = this.compression === 'zstd' ? await this.moreFrames() : await this.moreLines()
      if (!more) await this.close()
      return more
    } catch (error) {
      this.fault = error
      await this.close()
      throw error
    }
  }

  /** Stops reading: nothing more is decoded ahead, and the file is closed. Safe to call more than once. */
  async close(): Promise<void> {
    this.closed = true
    this.pool?.stop()
    this.pool = undefined
    this.frames = undefined
    this.carry = NO_BYTES
    await this.file?.close()
  }

  private async moreFrames(): Promise<boolean> {
    const group = await this.pool?.take()
    if (group !== undefined) {
      this.addFrames(group.plain, group.first, group.ends)
      return true
    }
    this.pool = undefined
    const tail = this.frames?.torn
    this.frames = undefined
    if (tail === undefined) return false
    const { torn, tornBytes, skippedBytes } = decodeTornTail(tail.scan, tail.index)
    this.tornBytes = tornBytes
    this.skippedBytes = skippedBytes
    this.addTorn(torn)
    return true
  }

  /** The next chunk's complete lines (those of a line longer than a chunk once its end is read); at the end, what follows the last newline is the torn tail. */
  private async moreLines(): Promise<boolean> {
    const file = this.file
    if (file === undefined) return false
    for (;;) {
      if (file.ended) {
        this.tornBytes = this.carry.length
        this.skippedBytes = this.carry.length
        this.carry = NO_BYTES
        return false
      }
      const bytes = await file.extend(this.carry, LINE_MAX_BYTES + 1)
      const end = bytes.lastIndexOf(0x0a)
      if (end >= 0) {
        this.spans.push({ bytes, at: 0, end: end + 1 })
        this.carry = bytes.subarray(end + 1)
        return true
      }
      // Every line before it was parsed (`next()` used them up): the parser names this one.
      if (bytes.length > LINE_MAX_BYTES) this.parser.refuseLine(bytes.length)
      this.carry = bytes
    }
  }

  /** Frame 0: exactly the header line. */
  private readHeaderFrame(first: Buffer): void {
    if (first.length === 0 || first.indexOf(0x0a) !== first.length - 1) {
      throw new ImportV0Error('IMPORT_V0_BAD_HEADER', 'Frame 0 must hold exactly the header line.')
    }
    this.parser.header(first.toString('utf8', 0, first.length - 1))
  }

  /**
   * Queues the lines of decoded frames: frame `first + i` ends at `ends[i]`
   * in `plain`, which starts with frame `first`. Frame 0 (the header) is
   * skipped; every later frame is whole lines, so the frames' plaintext is
   * read as one run of lines.
   */
  private addFrames(plain: Buffer, first: number, ends: readonly number[]): void {
    let start = 0
    let from = 0
    for (let i = 0; i < ends.length; i++) {
      const end = ends[i] as number
      const frame = first + i
      if (frame === 0) start = end
      else if (end !== from && plain[end - 1] !== 0x0a) {
        // The lines of the frames before it are read first (`more()` throws this once they are used up).
        this.faultAfter = new ImportV0Error(
          'IMPORT_V0_BAD_JSON',
          `Frame ${frame} is complete but ends inside a line (a batch is whole lines).`,
          {
            details: { frame },
          },
        )
        break
      }
      from = end
    }
    this.spans.push({ bytes: plain, at: start, end: from })
  }

  /** The complete lines of what a torn final frame decoded to. */
  private addTorn(torn: Buffer): void {
    this.spans.push({ bytes: torn, at: 0, end: torn.lastIndexOf(0x0a) + 1 })
  }

  /** Parses the next slice of whole lines into the buffer; false when the decoded text is used up. */
  private parseSlice(): boolean {
    let span = this.spans[0]
    while (span !== undefined && span.at >= span.end) {
      this.spans.shift()
      span = this.spans[0]
    }
    if (span === undefined) return false
    const { bytes, at, end } = span
    let cut = end
    if (end - at > TEXT_SLICE) {
      const newline = bytes.lastIndexOf(0x0a, at + TEXT_SLICE - 1)
      cut = newline >= at ? newline + 1 : bytes.indexOf(0x0a, at + TEXT_SLICE) + 1
    }
    span.at = cut
    this.buffered = []
    this.lengths = []
    this.at = 0
    try {
      // A slice is whole lines of at most TEXT_SLICE bytes, or one longer line: never decoded past the line cap.
      if (cut - 1 - at > LINE_MAX_BYTES) this.parser.refuseLine(cut - 1 - at)
      this.parser.lines(bytes.toString('utf8', at, cut - 1), this.buffered, this.lengths)
    } catch (error) {
      // The events before the bad line are returned first; the fault is thrown when they are used up.
      this.fault = error
      this.spans.length = 0
      void this.close()
    }
    return true
  }
}

class LineParser<E extends Sequenced> {
  packedRows = 0
  private parsedHeader: V0Header | undefined
  private line = 1
  private nextSeq = 0

  constructor(private readonly make: EventMaker<E>) {}

  header(text: string): void {
    this.parsedHeader = parseHeaderLine(text)
  }

  v0Header(): V0Header {
    return this.parsedHeader as V0Header
  }

  /** Parses newline-separated lines (no trailing newline) into `events`, with each event's source text length in `lengths`. */
  lines(text: string, events: E[], lengths: number[]): void {
    for (const lineText of text.split('\n')) {
      this.line += 1
      let value: unknown
      try {
        value = JSON.parse(lineText)
      } catch {
        throw new ImportV0Error('IMPORT_V0_BAD_JSON', `Line ${this.line} is not JSON.`, { details: { line: this.line } })
      }
      if (typeof value !== 'object' || value === null || Array.isArray(value)) {
        throw new ImportV0Error('IMPORT_V0_BAD_JSON', `Line ${this.line} is not a JSON object.`, { details: { line: this.line } })
      }
      const record = value as Record<string, unknown>
      const first = events.length
      if (isRowType(record.type)) {
        this.packedRows += 1
        const members = expandRow(record, record.type, this.line, events, this.make.member, this.make.row)
        const share = Math.ceil(lineText.length / (events.length - first))
        for (let i = first; i < events.length; i++) lengths.push(share)
        // Members are seq0, seq0 + 1, … by construction (one item may stand for them all): seq0 is checked.
        this.checkSeq(record.seq0)
        this.nextSeq += members - 1
        continue
      }
      if (typeof record.type !== 'string' || record.type.length === 0 || typeof record.time !== 'number' || !Number.isFinite(record.time)) {
        throw new ImportV0Error(
          'IMPORT_V0_BAD_JSON',
          `Line ${this.line} is not an event line (it needs a string type and a numeric time).`,
          {
            details: { line: this.line },
          },
        )
      }
      // The seq is checked before the line is made into an event (a converter may assume a valid seq).
      this.checkSeq(record.seq)
      events.push(this.makeLine(record as unknown as V0Event))
      lengths.push(lineText.length)
    }
  }

  /**
   * The event of one parsed line. `JSON.parse` takes any nesting depth, but
   * walking the value (freezing, converting) recurses: a line nested deeper
   * than the stack allows is this line's fault, typed like any bad line.
   */
  private makeLine(event: V0Event): E {
    try {
      return this.make.line(event)
    } catch (error) {
      if (!(error instanceof RangeError)) throw error
      throw new ImportV0Error(
        'IMPORT_V0_BAD_JSON',
        `Line ${this.line} holds JSON nested too deeply to convert (${error.message}); no harness writes such a line.`,
        { cause: error, details: { line: this.line, reason: 'too-deep' } },
      )
    }
  }

  /** Refuses the next line, `bytes` long, as over the line cap (its text is never decoded). */
  refuseLine(bytes: number): never {
    throw lineTooLarge(this.line + 1, bytes)
  }

  private checkSeq(seq: unknown): void {
    if (seq !== this.nextSeq) {
      throw new ImportV0Error(
        'IMPORT_V0_SEQ_GAP',
        `Line ${this.line} has seq ${JSON.stringify(seq)} where seq ${this.nextSeq} comes next: the event sequence has a gap.`,
        {
          details: { line: this.line, expected: this.nextSeq, seq },
        },
      )
    }
    this.nextSeq += 1
  }
}
