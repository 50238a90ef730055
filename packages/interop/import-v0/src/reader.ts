import { promises as fsp } from 'node:fs'
import { join } from 'node:path'
import { LINE_MAX_BYTES } from '@dsh/protocol/limits'
import { expandRow, isRowType, type RowMaker, type RowMemberMaker, v0RowMember } from './chunk-rows.js'
import { ImportV0Error, lineTooLarge } from './errors.js'
import { decodeSegment, NO_CWD_DIR, PLAIN_LOG, type V0Compression, v0LogPath, ZSTD_LOG } from './layout.js'
import { parseHeaderLine, type V0Event, type V0Header } from './v0-types.js'
import { decodeFrames, decodeSpan, decodeTornTail, type FrameScan, PooledFrames, scanFrames } from './zstd-frames.js'

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
}

/** A session directory of a v0 root: where its log is, and the id its directory name encodes. */
export interface V0LogEntry {
  readonly path: string
  readonly compression: V0Compression
  /** The id the session directory name encodes, when it is a valid encoding. */
  readonly dirId: string | undefined
}

/** Every session log of a v0 root (`<root>/<project>/<session>/session.jsonl[.zstd]`), sorted by path. */
export async function listV0Logs(root: string): Promise<V0LogEntry[]> {
  const entries: V0LogEntry[] = []
  for (const project of await subdirs(root)) {
    if (project !== NO_CWD_DIR && !(project.startsWith('--') && project.endsWith('--') && project.length >= 4)) continue
    for (const session of await subdirs(join(root, project))) {
      const dir = join(root, project, session)
      for (const [file, compression] of [
        [ZSTD_LOG, 'zstd'],
        [PLAIN_LOG, 'none'],
      ] as const) {
        const path = join(dir, file)
        const stat = await fsp.lstat(path).catch(() => undefined)
        if (stat?.isFile() === true) entries.push({ path, compression, dirId: decodeSegment(session) })
      }
    }
  }
  return entries.sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0))
}

/**
 * True when `dir` holds at least one v0 session log (`--<project>--/<id>/session.jsonl[.zstd]`
 * or `_no-cwd/<id>/…`): for commands that meet a directory that is not a dsh
 * root and can suggest `dsh import --from dsh-v0`. Reads directory entries only.
 */
export async function isV0Root(dir: string): Promise<boolean> {
  try {
    return (await listV0Logs(dir)).length > 0
  } catch {
    return false
  }
}

async function subdirs(dir: string): Promise<string[]> {
  const names = await fsp.readdir(dir, { withFileTypes: true })
  // Symlinks are not followed: a v0 root's sessions are real directories under it.
  return names
    .filter((entry) => entry.isDirectory())
    .map((entry) => entry.name)
    .sort()
}

/** Reads one v0 log whole (every event in memory; an import streams instead, see `openV0Log`). */
export async function readV0Log(root: string, entry: V0LogEntry): Promise<V0Log> {
  const reader = new V0EventReader(await readLogBytes(entry), entry.compression, entry.path, V0_EVENTS)
  assertPlaced(root, reader.header, entry)
  return drain(reader)
}

/**
 * Opens one v0 log for reading its events in order. The file and its header
 * frame are read and checked before this returns; the other frames are
 * decoded on the libuv thread pool a few at a time ahead of the reader, and
 * their lines parsed a slice at a time as `next()` asks for events — so a
 * fault (a frame that does not decode, bad JSON, a seq gap, a bad row) is
 * thrown by the `next()` or `more()` that reaches it, after the events
 * before it. Read with `do { for (e = next(); e; e = next()) … } while (await more())`.
 */
export async function openV0Log(root: string, entry: V0LogEntry): Promise<V0EventReader>
export async function openV0Log<E extends Sequenced>(root: string, entry: V0LogEntry, make: EventMaker<E>): Promise<V0EventReader<E>>
export async function openV0Log<E extends Sequenced>(
  root: string,
  entry: V0LogEntry,
  make?: EventMaker<E>,
): Promise<V0EventReader<E | V0Event>> {
  const reader = new V0EventReader<E | V0Event>(await readLogBytes(entry), entry.compression, entry.path, make ?? V0_EVENTS, true)
  assertPlaced(root, reader.header, entry)
  return reader
}

async function readLogBytes(entry: V0LogEntry): Promise<Buffer> {
  try {
    if (entry.compression === 'none') await checkLineLengths(entry.path)
    return await fsp.readFile(entry.path)
  } catch (error) {
    if (error instanceof ImportV0Error) throw error
    throw new ImportV0Error('IMPORT_V0_IO', `Cannot read ${entry.path}: ${(error as Error).message}`, { cause: error })
  }
}

/** Bytes a plain log is scanned in for its line lengths. */
const SCAN_CHUNK = 1024 * 1024

/**
 * Refuses a plain log holding a line (a torn last one included) longer than
 * `LINE_MAX_BYTES` before any of it is loaded: the file is read through one
 * buffer of `SCAN_CHUNK` bytes, counting the bytes since the last newline.
 */
async function checkLineLengths(path: string): Promise<void> {
  const handle = await fsp.open(path, 'r')
  try {
    const chunk = Buffer.allocUnsafe(SCAN_CHUNK)
    let run = 0
    let line = 1
    for (;;) {
      const { bytesRead } = await handle.read(chunk, 0, SCAN_CHUNK, null)
      if (bytesRead === 0) return
      let at = 0
      for (let newline = chunk.indexOf(0x0a, at); newline !== -1 && newline < bytesRead; newline = chunk.indexOf(0x0a, at)) {
        if (run + newline - at > LINE_MAX_BYTES) throw lineTooLarge(line, run + newline - at)
        run = 0
        line++
        at = newline + 1
      }
      run += bytesRead - at
      if (run > LINE_MAX_BYTES) throw lineTooLarge(line, run)
    }
  } finally {
    await handle.close()
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
  return drain(new V0EventReader(bytes, compression, path, V0_EVENTS))
}

function drain(reader: V0EventReader): V0Log {
  const events: V0Event[] = []
  const textLengths: number[] = []
  for (let event = reader.next(); event !== undefined; event = reader.next()) {
    events.push(event)
    textLengths.push(reader.textLength)
  }
  const { path, compression, header, packedRows, tornBytes } = reader
  return { path, compression, header, events, packedRows, textLengths, tornBytes }
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
 * Read whole (`pooled` false): every frame is decoded on the calling thread
 * and checked when the reader is made, and `next()` returns `undefined` only
 * at the end. Pooled: frame 0 (the header) is decoded here, the others on
 * the libuv pool ahead of the reader; `next()` returns `undefined` when the
 * frames decoded so far are used up, and `more()` waits for the next ones
 * (false at the end).
 *
 * Invariants: the events come as seq 0, 1, 2, …; a fault in a complete
 * frame or line is thrown when reached, never skipped; the complete lines
 * of a torn tail come last, the torn bytes are only counted.
 */
export class V0EventReader<E extends Sequenced = V0Event> {
  readonly header: V0Header
  /** Bytes of an incomplete final frame / line that were not (entirely) read. */
  readonly tornBytes: number
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
  /** Frames still decoding on the pool, and the torn tail to read after them. */
  private pool: PooledFrames | undefined
  private tornTail: { readonly scan: NonNullable<FrameScan['torn']>; readonly index: number } | undefined

  constructor(
    bytes: Buffer,
    readonly compression: V0Compression,
    readonly path: string,
    make: EventMaker<E>,
    pooled = false,
  ) {
    const parser = new LineParser(make)
    this.parser = parser
    if (compression === 'zstd') {
      const scan = scanFrames(bytes)
      const { spans, torn } = scan
      if (pooled && spans.length > 0 && spans.every((span) => span.content !== null)) {
        this.readHeaderFrame(decodeSpan(bytes, spans, 0))
        if (spans.length > 1) this.pool = new PooledFrames(bytes, spans, 1)
        if (torn !== undefined) this.tornTail = { scan: torn, index: spans.length }
        this.tornBytes = torn?.rest.length ?? 0
      } else {
        const { frames, plain, ends, torn: tornPlain, tornBytes } = decodeFrames(bytes)
        const first = frames[0]
        if (first === undefined) {
          throw new ImportV0Error('IMPORT_V0_BAD_HEADER', 'The log holds no complete frame: its header was never committed.')
        }
        this.readHeaderFrame(first)
        this.addFrames(plain, 0, ends)
        if (this.faultAfter !== undefined) throw this.faultAfter
        this.tornBytes = tornBytes
        if (tornPlain !== undefined) this.addTorn(tornPlain)
      }
    } else {
      const headerEnd = bytes.indexOf(0x0a)
      if (headerEnd < 0)
        throw new ImportV0Error('IMPORT_V0_BAD_HEADER', 'The log has no complete first line: its header was never committed.')
      parser.header(bytes.toString('utf8', 0, headerEnd))
      const end = bytes.lastIndexOf(0x0a)
      this.spans.push({ bytes, at: headerEnd + 1, end: end + 1 })
      this.tornBytes = bytes.length - end - 1
    }
    this.header = parser.v0Header()
  }

  /** Lines that were packed chunk rows, among those parsed so far. */
  get packedRows(): number {
    return this.parser.packedRows
  }

  /**
   * The next event (seq = the number returned before it), or `undefined`
   * when the frames decoded so far are used up (at the end, unless `more()`
   * says otherwise). Throws `ImportV0Error` at a bad line.
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
   * After `next()` returned `undefined`: waits for the next frames decoded on
   * the pool (true: `next()` has more to return) — false at the end of the
   * log. Throws `ImportV0Error` at a frame that does not decode.
   */
  async more(): Promise<boolean> {
    if (this.fault !== undefined) throw this.fault
    try {
      if (this.faultAfter !== undefined) throw this.faultAfter
      const group = await this.pool?.take()
      if (group !== undefined) {
        this.addFrames(group.plain, group.first, group.ends)
        return true
      }
      this.pool = undefined
      const tail = this.tornTail
      if (tail === undefined) return false
      this.tornTail = undefined
      this.addTorn(decodeTornTail(tail.scan, tail.index).torn)
      return true
    } catch (error) {
      this.fault = error
      this.pool = undefined
      this.tornTail = undefined
      throw error
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
      this.pool = undefined
      this.tornTail = undefined
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
