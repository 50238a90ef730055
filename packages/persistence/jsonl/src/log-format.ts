import { randomBytes } from 'node:crypto'
import { type JsonValue, parseSessionHeader, type SessionHeader, SessionLogOffset, type StoredSessionEvent } from '@dsh/session'
import {
  type AppendedEvent,
  type FlatValue,
  isEventRun,
  isFrozenTree,
  losslessData,
  type StoredEventRun,
  unencodable,
} from '@dsh/session-persistence/backend'
import { checkEventLines, packedLineFits } from './line-caps.js'

/** The physical header line's format tag. */
export const LOG_FORMAT = 'dsh-session-log'
/**
 * The log format version every log is written in and the only one read. A
 * zstd log of this version may end with one padding frame that appends
 * overwrite (`log-padding.ts`) and may hold packed lines, each standing for
 * a run of consecutive events (`encodeEventLines`); a fork's log carries a
 * `fork` reference to its source's prefix. A log of any other version is
 * refused with `SESSION_PERSISTENCE_UNSUPPORTED_VERSION`, never read as this
 * one.
 */
export const LOG_FORMAT_VERSION = 4

/**
 * What a fork's log says about the prefix it inherits instead of storing it:
 * events `[0, cut)` are the committed events of the log of `source` whose
 * header carries `logId`, up to byte `end` of that log, where the batch
 * holding event `cut - 1` ends with a trailer whose stored-body CRC32 is
 * `batchCrc`. Committed batches never change, so these few numbers identify
 * the prefix without reading it: a source rewritten, re-created under the
 * same id (another `logId`), truncated or damaged does not match.
 * `source` is the log that physically holds event `cut - 1`: for a fork cut
 * inside its parent's own inherited prefix, an ancestor.
 */
export interface ForkReference {
  readonly source: string
  readonly logId: string
  readonly cut: number
  readonly end: number
  readonly batchCrc: number
}

export interface PhysicalHeader {
  readonly header: SessionHeader
  readonly inheritedEventCount: SessionLogOffset
  /** Random per log file (16 hex digits): the log's identity. */
  readonly logId: string
  readonly fork?: ForkReference
}

/** A new log's identity. */
export function newLogId(): string {
  return randomBytes(8).toString('hex')
}

/**
 * The physical header line: the logical header plus the exact inherited cut,
 * which is deliberately not a logical header field. `logId` is random per
 * log file, so the header's CRC (part of every revision) differs between a
 * session and the same id deleted and created again.
 */
export function encodeHeaderLine(physical: PhysicalHeader): Buffer {
  const line = {
    format: LOG_FORMAT,
    formatVersion: LOG_FORMAT_VERSION,
    logId: physical.logId,
    header: physical.header,
    inheritedEventCount: physical.inheritedEventCount,
    ...(physical.fork === undefined ? {} : { fork: physical.fork }),
  }
  return Buffer.from(`${JSON.stringify(line)}\n`, 'utf8')
}

export type HeaderParse =
  | { readonly ok: true; readonly value: PhysicalHeader }
  | { readonly ok: false; readonly unsupported: boolean; readonly reason: string }

/** Parses a header line whose bytes already passed their CRC. */
export function parseHeaderLine(plain: Buffer): HeaderParse {
  let raw: unknown
  try {
    if (plain.at(-1) !== 0x0a) throw new SyntaxError('the header line is not newline-terminated')
    raw = JSON.parse(plain.toString('utf8'))
  } catch (error) {
    return { ok: false, unsupported: false, reason: `the header line is not JSON (${(error as Error).message})` }
  }
  if (typeof raw !== 'object' || raw === null || (raw as { format?: unknown }).format !== LOG_FORMAT) {
    return { ok: false, unsupported: false, reason: `the header line is not a ${LOG_FORMAT} header` }
  }
  const line = raw as { formatVersion?: unknown; logId?: unknown; header?: unknown; inheritedEventCount?: unknown; fork?: unknown }
  if (line.formatVersion !== LOG_FORMAT_VERSION) {
    const version = JSON.stringify(line.formatVersion)
    const older = typeof line.formatVersion === 'number' && line.formatVersion < LOG_FORMAT_VERSION
    return {
      ok: false,
      unsupported: true,
      reason: older
        ? `log format version ${version}, written by a pre-release build (this package reads version ${LOG_FORMAT_VERSION} only; delete the session, or export its events with the build that wrote it)`
        : `log format version ${version} (this package reads version ${LOG_FORMAT_VERSION} only; read it with a newer @dsh/session-persistence-jsonl)`,
    }
  }
  if (typeof line.header === 'object' && line.header !== null && (line.header as { version?: unknown }).version !== 1) {
    return {
      ok: false,
      unsupported: true,
      reason: `session header version ${JSON.stringify((line.header as { version?: unknown }).version)}`,
    }
  }
  if (typeof line.logId !== 'string' || line.logId.length === 0)
    return { ok: false, unsupported: false, reason: 'the header line has no logId' }
  try {
    const header = parseSessionHeader(line.header)
    const inheritedEventCount = SessionLogOffset(line.inheritedEventCount)
    if (line.fork === undefined) return { ok: true, value: { header, inheritedEventCount, logId: line.logId } }
    const fork = parseFork(line.fork, inheritedEventCount)
    if (typeof fork === 'string') return { ok: false, unsupported: false, reason: fork }
    return { ok: true, value: { header, inheritedEventCount, logId: line.logId, fork } }
  } catch (error) {
    return { ok: false, unsupported: false, reason: (error as Error).message }
  }
}

function parseFork(raw: unknown, cut: number): ForkReference | string {
  if (typeof raw !== 'object' || raw === null) return 'the fork reference is not an object'
  const fork = raw as Record<string, unknown>
  const count = (v: unknown): v is number => typeof v === 'number' && Number.isSafeInteger(v) && v >= 0
  if (typeof fork.source !== 'string' || fork.source.length === 0) return 'the fork reference names no source'
  if (typeof fork.logId !== 'string' || fork.logId.length === 0) return 'the fork reference names no source logId'
  if (!count(fork.cut) || fork.cut !== cut || cut === 0) return 'the fork reference cut differs from inheritedEventCount'
  if (!count(fork.end) || !count(fork.batchCrc) || fork.batchCrc > 0xffffffff) return 'the fork reference digest is malformed'
  if (Object.keys(fork).length !== 5) return 'the fork reference has unknown fields'
  return { source: fork.source, logId: fork.logId, cut: fork.cut, end: fork.end, batchCrc: fork.batchCrc }
}

/**
 * Serialises a batch as JSON lines. Events that are not already deep-frozen
 * (i.e. did not come from a `Session`) are checked for lossless JSON first,
 * so nothing is silently changed by `JSON.stringify` (NaN, -0, undefined,
 * class instances); a frozen event is taken as the plain JSON data a
 * `Session` freezes.
 *
 * An event's line is exactly `JSON.stringify({type, seq, time, data})`,
 * however it is produced. With `pack` (zstd logs: `LogCodec.packsRuns`), a
 * run of 2 to `PACKED_RUN_MAX` consecutive events that `packRunAt` accepts
 * — one type, flat data objects with the same keys in the same order,
 * integer times — is one packed line instead:
 *
 *     {"type":T,"seq":S,"time":T0,"run":{"dt":[t1-t0,…],"data":{key: value | [v0,v1,…],…}}}
 *
 * standing for `dt.length + 1` events of type T from seq S: event k's time
 * is T0 plus the first k gaps, and its data has the run's keys in their
 * order, each with the array's k-th value, or the one value every event
 * shares (a flat value is never an array, so the two cannot be confused).
 * `parseEventLines` expands it back to the same events. A stream of text
 * deltas, most of a transcript, is stored without repeating its envelope:
 * the 1.2 M streamed chunks of a 100 MiB harness session take 28 MiB of
 * lines instead of 137 MiB. A run appended as columns (`StoredEventRun`,
 * checked by `checkAppend`) is such lines already: `eventRunLines` writes
 * its columns as given, none of its events made (a log that does not pack
 * is given the run's events instead).
 *
 * What makes the rest cheaper (a bulk import writes ~100 MiB of lines for
 * a 100 MiB v0 session; see `encodeFlatRun`):
 * - a run of consecutive flat events (`isFlatEvent`) is stringified in one
 *   call and split into lines, instead of one call and one string per event;
 * - a frozen event of exactly those four keys is stringified as it is (no
 *   wrapper object);
 * - each line's text is written as UTF-8 straight into the batch's buffer
 *   (`LineBytes`), never concatenated into a rope that must be flattened.
 */
export function encodeEventLines(events: readonly AppendedEvent[], pack = false): Buffer {
  const out = new LineBytes()
  try {
    writeEventLines(out, events, pack)
    return out.bytes()
  } catch (error) {
    throw unencodable(undefined, error)
  } finally {
    out.release()
  }
}

function writeEventLines(out: LineBytes, events: readonly AppendedEvent[], pack: boolean): void {
  let run: StoredSessionEvent[] = []
  for (let i = 0; i < events.length; ) {
    const event = events[i]!
    if (isEventRun(event)) {
      if (!pack) throw new Error('encodeEventLines: a log that does not pack runs is given their events (expandEventRuns)')
      i++
      if (run.length > 0) run = out.addFlatRun(run)
      for (const line of eventRunLines(event)) out.line(line)
      continue
    }
    const packed = pack ? packRunAt(events, i) : undefined
    if (packed !== undefined) {
      if (run.length > 0) run = out.addFlatRun(run)
      // packRunAt builds the run exactly as its one packed line reads (2 to PACKED_RUN_MAX events, fresh plain objects).
      const line = JSON.stringify(packed.run)
      if (packedLineFits(line)) out.line(line)
      else for (let k = i; k < packed.end; k++) out.line(encodeLine(events[k] as StoredSessionEvent))
      i = packed.end
      continue
    }
    i++
    if (isFlatEvent(event)) {
      run.push(event)
      if (run.length === FLAT_RUN_MAX) run = out.addFlatRun(run)
      continue
    }
    if (run.length > 0) run = out.addFlatRun(run)
    out.line(encodeLine(event))
  }
  if (run.length > 0) out.addFlatRun(run)
}

/** Events one packed line stands for at most. */
const PACKED_RUN_MAX = 1024

/**
 * The lines of an appended run (`StoredEventRun`, checked by `checkAppend`):
 * packed lines of its columns as given, `PACKED_RUN_MAX` events at most each,
 * none of its events made or walked; a last single event is a line of its
 * own (a packed line stands for 2 events at least). Never joined with the
 * events around it.
 */
function* eventRunLines(item: StoredEventRun): Generator<string> {
  const { dt, data } = item.run
  const count = dt.length + 1
  let time = item.time
  for (let from = 0; from < count; from += PACKED_RUN_MAX) {
    const n = Math.min(PACKED_RUN_MAX, count - from)
    const whole = n === count
    const columns: Record<string, unknown> = {}
    for (const key of Object.keys(data)) {
      const column = data[key]
      columns[key] = !Array.isArray(column) ? column : n === 1 ? column[from] : whole ? column : column.slice(from, from + n)
    }
    const seq = item.seq + from
    const line =
      n === 1
        ? JSON.stringify({ type: item.type, seq, time, data: columns })
        : JSON.stringify({ type: item.type, seq, time, run: { dt: whole ? dt : dt.slice(from, from + n - 1), data: columns } })
    if (n === 1 || packedLineFits(line)) yield line
    else {
      // Over the event cap as one line: one line per event, each checked as any event.
      for (let k = 0, t = time; k < n; t += dt[from + k] ?? 0, k++) {
        const values: Record<string, unknown> = {}
        for (const key of Object.keys(columns)) values[key] = Array.isArray(data[key]) ? (data[key] as unknown[])[from + k] : data[key]
        yield JSON.stringify({ type: item.type, seq: seq + k, time: t, data: values })
      }
    }
    for (let k = from; k < from + n && k < dt.length; k++) time += dt[k]!
  }
}

/**
 * The longest run of 2 to `PACKED_RUN_MAX` events starting at `events[i]`,
 * as columns (`StoredEventRun`, built in the order its packed line lists
 * its fields, so that line is `JSON.stringify` of it: `eventRunLines`'
 * line for it, without rebuilding it), and where it ends (exclusive); `undefined` when no such run starts there. A run is flat
 * events (`isFlatEvent`) of one type whose data are objects with the first
 * one's keys in its order (never `__proto__`, which a parsed object would
 * hold as an own key but an assignment would not), at safe-integer times
 * whose gaps are safe integers too (so the times add back exactly). Each
 * event's data is walked once: checked and collected into its columns.
 */
function packRunAt(events: readonly AppendedEvent[], i: number): { run: StoredEventRun; end: number } | undefined {
  const first = events[i] as StoredSessionEvent
  if (events[i + 1]?.type !== first.type || !Number.isSafeInteger(first.time) || !isFlatEvent(first)) return undefined
  const data = first.data
  if (typeof data !== 'object' || data === null) return undefined
  const keys = Object.keys(data)
  if (keys.includes('__proto__')) return undefined
  const columns: unknown[][] = keys.map((key) => [(data as Record<string, unknown>)[key]])
  const dt: number[] = []
  const last = Math.min(events.length, i + PACKED_RUN_MAX)
  let end = i + 1
  for (; end < last; end++) {
    const event = events[end]!
    if (isEventRun(event)) break
    const gap = event.time - events[end - 1]!.time
    if (event.type !== first.type || !Number.isSafeInteger(event.time) || !Number.isSafeInteger(gap)) break
    if (!Object.isFrozen(event) || !isCanonicalEvent(event) || !collectColumns(event.data, keys, columns)) break
    dt.push(gap)
  }
  const n = end - i
  if (n < 2) return undefined
  const packed: Record<string, FlatValue | FlatValue[]> = {}
  for (let k = 0; k < keys.length; k++) {
    const column = columns[k]!
    // A member that failed part way may have added values: drop them.
    if (column.length !== n) column.length = n
    const shared = column[0]
    let same = 1
    while (same < n && column[same] === shared) same++
    packed[keys[k]!] = (same === n ? shared : column) as FlatValue | FlatValue[]
  }
  return { run: { type: first.type, seq: first.seq, time: first.time, run: { dt, data: packed } }, end }
}

/**
 * Appends `data`'s values to `columns` when it is a frozen plain object of
 * flat values (see `isFlatEvent`) with exactly `keys`, in that order; false
 * otherwise (having maybe appended some).
 */
function collectColumns(data: unknown, keys: readonly string[], columns: unknown[][]): boolean {
  if (typeof data !== 'object' || data === null || !Object.isFrozen(data) || !isPlainObject(data)) return false
  let k = 0
  for (const key in data) {
    if (key !== keys[k]) return false
    const value: unknown = (data as Record<string, unknown>)[key]
    if (typeof value === 'object' ? value !== null : typeof value !== 'string' && typeof value !== 'number' && typeof value !== 'boolean')
      return false
    columns[k]!.push(value)
    k++
  }
  return k === keys.length
}

/** One event's line (without its newline). */
function encodeLine(event: StoredSessionEvent): string {
  const frozen = Object.isFrozen(event) && isFrozenTree(event.data)
  if (frozen && isCanonicalEvent(event)) return JSON.stringify(event)
  const data = frozen ? event.data : losslessData(event)
  return JSON.stringify({ type: event.type, seq: event.seq, time: event.time, data })
}

/** Flat events stringified in one call at most. */
const FLAT_RUN_MAX = 512

/**
 * Event lines written as UTF-8 straight into one growing buffer: each line's
 * text (flat, fresh from `JSON.stringify`) is encoded once where it goes, never
 * concatenated into a rope that must be flattened first. A batch starts in the
 * module's scratch buffer (encoding is synchronous, so one batch at a time
 * uses it) and leaves with a copy of its bytes: a small durable append then
 * allocates one pooled slice, not a fresh 4 KiB buffer and a copy.
 */
class LineBytes {
  private buf: Buffer
  private length = 0

  constructor() {
    if (scratchInUse) this.buf = Buffer.allocUnsafe(LINES_INITIAL)
    else {
      scratchInUse = true
      this.buf = scratch
    }
  }

  /** Adds one line's text and its newline. */
  line(text: string): void {
    checkEventLines(text)
    // A UTF-16 code unit takes at most 3 bytes in UTF-8 (a surrogate pair: 4 for 2).
    const room = text.length * 3 + 1
    if (this.length + room > this.buf.length) this.grow(room)
    this.length += this.buf.write(text, this.length, 'utf8')
    this.buf[this.length++] = 0x0a
  }

  /** Adds the lines of a run of flat events (`encodeFlatRun`); returns a new empty run. */
  addFlatRun(run: readonly StoredSessionEvent[]): StoredSessionEvent[] {
    this.line(encodeFlatRun(run))
    return []
  }

  /** The lines, in a buffer of their own (never the scratch buffer). */
  bytes(): Buffer {
    const lines = this.buf.subarray(0, this.length)
    // A buffer mostly unused is not kept alive with the batch (it may wait for the pool): copy what was written.
    return this.buf === scratch || this.length * 2 < this.buf.length ? Buffer.from(lines) : lines
  }

  /** Frees the scratch buffer for the next batch (after `bytes`, or when encoding threw). */
  release(): void {
    if (this.buf === scratch) scratchInUse = false
  }

  private grow(room: number): void {
    const next = Buffer.allocUnsafe(Math.max(this.buf.length * 2, this.length + room))
    this.buf.copy(next, 0, 0, this.length)
    this.release()
    this.buf = next
  }
}

/** Bytes a batch's lines start with room for (the scratch buffer's size). */
const LINES_INITIAL = 16 * 1024
const scratch = Buffer.allocUnsafe(LINES_INITIAL)
/** True while a batch is being written into `scratch` (a getter reached while encoding gets a buffer of its own). */
let scratchInUse = false

/**
 * The lines of a run of flat events, from one `JSON.stringify` of the run:
 * `[e0,e1,…]` with each `,{"type":` between two events turned into a
 * newline. Exact because a flat event's text holds no other `,{"type":`:
 * outside a string, `,{` only starts an object in an array (a flat event
 * holds no array or object below its data), and inside a string every `"` is
 * escaped as `\"`. Each event's text starts with `{"type":` (a canonical
 * event's first key is a string `type`), so the run splits into exactly
 * `run.length` lines; anything else (impossible for flat events, checked all
 * the same) falls back to one line per event.
 */
function encodeFlatRun(run: readonly StoredSessionEvent[]): string {
  if (run.length === 1) return JSON.stringify(run[0])
  const pieces = JSON.stringify(run).slice(1, -1).split(FLAT_BOUNDARY)
  if (pieces.length !== run.length) return run.map((event) => encodeLine(event)).join('\n')
  return pieces.join(FLAT_LINE_START)
}

const FLAT_BOUNDARY = ',{"type":'
const FLAT_LINE_START = '\n{"type":'

/**
 * A frozen canonical event (`isCanonicalEvent`) with a string type, numeric
 * seq and time, and data that is a primitive or a frozen plain object whose
 * values are strings, numbers, booleans or null: its line is
 * `JSON.stringify(event)` and holds no array or nested object.
 */
function isFlatEvent(event: StoredSessionEvent): boolean {
  if (!Object.isFrozen(event) || typeof event.type !== 'string' || typeof event.seq !== 'number' || typeof event.time !== 'number')
    return false
  const data: unknown = event.data
  if (typeof data === 'object' && data !== null) {
    if (!Object.isFrozen(data) || !isPlainObject(data)) return false
    for (const key in data) {
      const value: unknown = (data as Record<string, unknown>)[key]
      if (typeof value === 'object' ? value !== null : typeof value !== 'string' && typeof value !== 'number' && typeof value !== 'boolean')
        return false
    }
  } else if (typeof data !== 'string' && typeof data !== 'number' && typeof data !== 'boolean' && data !== null) {
    return false
  }
  return isCanonicalEvent(event)
}

function isPlainObject(value: object): boolean {
  const proto: unknown = Object.getPrototypeOf(value)
  return proto === Object.prototype || proto === null
}

/**
 * True when `JSON.stringify(event)` is exactly the line of its four fields:
 * a plain object (no prototype `toJSON`) whose enumerable keys are `type,
 * seq, time, data` in that order (no other field would be written).
 */
function isCanonicalEvent(event: StoredSessionEvent): boolean {
  if (!isPlainObject(event)) return false
  let i = 0
  for (const key in event) {
    if (key !== CANONICAL_KEYS[i]) return false
    i++
  }
  return i === 4
}

const CANONICAL_KEYS = ['type', 'seq', 'time', 'data'] as const

/**
 * Parses one batch's lines into deep-frozen events, checking shape and that
 * seqs continue from `firstSeq`; a packed line (`encodeEventLines`) expands
 * to the events it stands for (`count` undefined: as many as the lines hold). Returns a reason string on failure.
 */
export function parseEventLines(
  plain: Buffer,
  firstSeq: number,
  count: number | undefined,
  into: StoredSessionEvent[],
): string | undefined {
  if (plain.length === 0 || plain[plain.length - 1] !== 0x0a) return 'the batch does not end with a newline'
  const text = plain.toString('utf8')
  let seq = firstSeq
  let start = 0
  while (start < text.length) {
    const end = text.indexOf('\n', start)
    let raw: unknown
    try {
      raw = JSON.parse(text.slice(start, end))
    } catch (error) {
      return `line for seq ${seq} is not JSON (${(error as Error).message})`
    }
    if (typeof raw !== 'object' || raw === null || Array.isArray(raw)) return `line for seq ${seq} is not an event object`
    const event = raw as { type?: unknown; seq?: unknown; time?: unknown; data?: unknown; run?: unknown }
    if (typeof event.type !== 'string' || event.type.length === 0) return `event ${seq} has no type`
    if (event.seq !== seq) return `expected seq ${seq}, found ${JSON.stringify(event.seq)}`
    if (typeof event.time !== 'number' || !Number.isFinite(event.time)) return `event ${seq} has no numeric time`
    let keys = 0
    for (const _ in event) keys++
    if (event.data === undefined && event.run !== undefined && keys === 4) {
      const reason = expandPackedRun(event.type, seq, event.time, event.run, into)
      if (typeof reason === 'string') return reason
      seq += reason
      start = end + 1
      continue
    }
    if (event.data === undefined) return `event ${seq} has no data`
    if (keys !== 4) return `event ${seq} has fields other than type, seq, time and data`
    // The parsed object itself becomes the event (no copy: reads of huge logs stay close to bare JSON.parse).
    deepFreeze(event.data as JsonValue)
    into.push(Object.freeze(event) as StoredSessionEvent)
    seq++
    start = end + 1
  }
  if (count !== undefined && seq - firstSeq !== count) return `the batch holds ${seq - firstSeq} events, its trailer records ${count}`
  return undefined
}

/**
 * The events of a packed line (`encodeEventLines`) pushed onto `into`;
 * returns how many, or why the line is not a packed run.
 */
function expandPackedRun(type: string, seq: number, time: number, run: unknown, into: StoredSessionEvent[]): number | string {
  const where = `packed run at seq ${seq}`
  if (typeof run !== 'object' || run === null || Array.isArray(run)) return `the ${where} is not an object`
  const { dt, data: columns } = run as { dt?: unknown; data?: unknown }
  if (Object.keys(run).length !== 2 || !Array.isArray(dt) || dt.length === 0 || !Number.isSafeInteger(time))
    return `the ${where} has no time gaps`
  if (typeof columns !== 'object' || columns === null || Array.isArray(columns)) return `the ${where} has no data columns`
  const n = dt.length + 1
  const keys = Object.keys(columns)
  if (keys.includes('__proto__')) return `the ${where} has a __proto__ column`
  const values = keys.map((key) => (columns as Record<string, unknown>)[key])
  for (const value of values) {
    if (!Array.isArray(value)) {
      if (typeof value === 'object' && value !== null) return `the ${where} has a nested value`
    } else if (value.length !== n || value.some((v) => typeof v === 'object' && v !== null)) {
      return `the ${where} has a column that is not ${n} flat values`
    }
  }
  let at = time
  for (let k = 0; k < n; k++) {
    if (k > 0) at += dt[k - 1] as number
    if (!Number.isSafeInteger(at)) return `the ${where} has a time gap that is not an integer`
    const data: Record<string, unknown> = {}
    for (let c = 0; c < keys.length; c++) {
      const value = values[c]
      data[keys[c]!] = Array.isArray(value) ? value[k] : value
    }
    into.push(Object.freeze({ type, seq: seq + k, time: at, data: Object.freeze(data) }) as StoredSessionEvent)
  }
  return n
}

/**
 * How many events a batch's lines stand for (a packed line counts its run),
 * without checking them: for telling a damaged trailer from a torn one.
 */
export function countEventLines(plain: Buffer): number {
  let count = 0
  let start = 0
  for (let end = plain.indexOf(0x0a); end !== -1; start = end + 1, end = plain.indexOf(0x0a, start)) {
    count += 1
    if (plain.subarray(start, end).includes(PACKED_RUN_MARK)) {
      try {
        const dt = (JSON.parse(plain.toString('utf8', start, end)) as { run?: { dt?: unknown } }).run?.dt
        if (Array.isArray(dt)) count += dt.length
      } catch {
        // Counted as one line: the caller only compares with a trailer.
      }
    }
  }
  return count
}

const PACKED_RUN_MARK = Buffer.from(',"run":{"dt":[')

function deepFreeze(value: JsonValue): JsonValue {
  if (typeof value === 'object' && value !== null) {
    if (Array.isArray(value)) {
      for (const item of value) deepFreeze(item as JsonValue)
    } else {
      for (const key in value) deepFreeze((value as Record<string, JsonValue>)[key]!)
    }
    Object.freeze(value)
  }
  return value
}
